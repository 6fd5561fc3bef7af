import { DataSource } from 'typeorm';
import { newId, randomSecret } from '@ws/common';
import { Image } from '@ws/images/image.entity';
import { Server } from '@ws/servers/server.entity';
import { Workspace, WorkspaceStatus } from '@ws/workspaces/workspace.entity';
import { Zone } from '@ws/zones/zone.entity';

/** Rows for tests that need workspaces to exist without running containers (permission rules, listings). */
export async function insertWorkspaceRow(db: DataSource, userId: string, status: WorkspaceStatus = 'running'): Promise<Workspace> {
  const zone = await db.getRepository(Zone).save({ id: newId(), name: `zone-${randomSecret(4)}` });
  const server = await db.getRepository(Server).save({
    id: newId(), hostname: `host-${randomSecret(4)}`, dockerEndpoint: 'unix:///var/run/docker.sock', zoneId: zone.id, cores: 4, memory: 8 * 1024 ** 3,
  });
  const image = await db.getRepository(Image).save({ id: newId(), name: 'example/desktop:1', friendlyName: `Desktop ${randomSecret(4)}` });
  const now = new Date();
  return db.getRepository(Workspace).save({
    id: newId(), userId, imageId: image.id, serverId: server.id, status, cores: 1, memory: 1024 ** 3, token: randomSecret(), viewOnlyToken: randomSecret(),
    shareId: randomSecret(16), hostPorts: { vnc: 35900 }, startDate: now, keepaliveDate: now, expirationDate: new Date(now.getTime() + 3600_000),
  });
}
