import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository } from 'typeorm';
import { ApiError, ErrorCode } from '@ws/common';
import { PLACEMENT_LOCK_KEY_SQL, ServersService } from '@ws/servers';
import { NetworkHolders } from '../runtime/network-holders';
import { LIVE_STATUSES, Workspace } from '../workspace.entity';

/** `server remove`: a Docker host goes only when no live workspace is on it (the servers library knows no workspaces). */
@Injectable()
export class ServerRetirement {
  constructor(
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly servers: ServersService,
    private readonly holders: NetworkHolders,
  ) {}

  async remove(ref: string): Promise<void> {
    const server = await this.servers.findByRef(ref);
    const removeHolders = await this.workspaces.manager.transaction(async (tx) => {
      // Under the server's placement lock: a launch placing on it has committed or waits, so the count is final.
      await tx.query(`SELECT pg_advisory_xact_lock(${PLACEMENT_LOCK_KEY_SQL})`, [server.id]);
      const live = await tx.getRepository(Workspace).countBy({ serverId: server.id, status: In([...LIVE_STATUSES]) });
      if (live > 0) throw new ApiError(ErrorCode.Conflict, `Server ${server.hostname} still has ${live} workspace(s)`);
      const holders = await this.holders.takeAll(server, tx);
      await this.servers.remove(server, tx);
      return holders;
    });
    await removeHolders();
  }
}
