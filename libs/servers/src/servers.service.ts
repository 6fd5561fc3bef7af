import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository } from 'typeorm';
import { DockerHosts } from '@ws/agent/docker-hosts';
import { ApiError, ErrorCode, newId } from '@ws/common';
import { findByRef } from '@ws/database/find-by-ref';
import { Workspace } from '@ws/workspaces/workspace.entity';
import { Zone } from '@ws/zones/zone.entity';
import { Server } from './server.entity';

export interface ServerDefinition {
  hostname: string;
  dockerEndpoint: string;
  zone: Zone;
  publishHost?: string;
  /** Omitted: read from the Docker host. */
  cores?: number;
  memory?: number;
  tlsCaPath?: string | null;
  tlsCertPath?: string | null;
  tlsKeyPath?: string | null;
  enabled?: boolean;
}

export const LOCAL_SERVER = { hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', publishHost: '127.0.0.1' };

/** Docker hosts that run workspaces. */
@Injectable()
export class ServersService {
  constructor(
    @InjectRepository(Server) private readonly servers: Repository<Server>,
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly hosts: DockerHosts,
  ) {}

  list(): Promise<Server[]> {
    return this.servers.find({ relations: { zone: true }, order: { hostname: 'ASC' } });
  }

  findByRef(ref: string): Promise<Server> {
    return findByRef(this.servers, ref, 'hostname', 'server');
  }

  /** Adds or updates (by hostname) a server; capacity defaults to what the Docker host reports. */
  async upsert(definition: ServerDefinition): Promise<Server> {
    const existing = await this.servers.findOneBy({ hostname: definition.hostname });
    const id = existing?.id ?? newId();
    let { cores, memory } = definition;
    if (cores === undefined || memory === undefined) {
      const info = await this.hosts
        .get({ id, dockerEndpoint: definition.dockerEndpoint, hostname: definition.hostname, tlsCaPath: definition.tlsCaPath, tlsCertPath: definition.tlsCertPath, tlsKeyPath: definition.tlsKeyPath })
        .info()
        .catch((err: Error) => {
          throw new ApiError(ErrorCode.Unavailable, `Docker at ${definition.dockerEndpoint} did not answer (${err.message}); give --cores and --memory or start it`);
        });
      cores ??= info.ncpu;
      memory ??= info.memTotal;
    }
    await this.servers.save({
      ...(existing ?? {}), id, hostname: definition.hostname, dockerEndpoint: definition.dockerEndpoint, zoneId: definition.zone.id,
      publishHost: definition.publishHost ?? existing?.publishHost ?? '127.0.0.1', cores, memory, enabled: definition.enabled ?? existing?.enabled ?? true,
      tlsCaPath: definition.tlsCaPath ?? null, tlsCertPath: definition.tlsCertPath ?? null, tlsKeyPath: definition.tlsKeyPath ?? null, provider: 'docker',
    });
    this.hosts.evict(id);
    return this.servers.findOneOrFail({ where: { id }, relations: { zone: true } });
  }

  async remove(ref: string): Promise<void> {
    const server = await this.findByRef(ref);
    const live = await this.workspaces.countBy({ serverId: server.id, status: In(['starting', 'running', 'stopping', 'failed']) });
    if (live > 0) throw new ApiError(ErrorCode.Conflict, `Server ${server.hostname} still has ${live} workspace(s)`);
    await this.servers.delete({ id: server.id });
    this.hosts.evict(server.id);
  }
}
