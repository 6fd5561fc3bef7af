import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { DockerHosts } from '@ws/agent';
import { AppConfig } from '@ws/common';
import { Server } from './server.entity';
import { ServerInventory } from './server-inventory';

/** What one round of checks found. */
export interface HealthRound {
  checked: number;
  /** Hostnames that failed this round. */
  down: string[];
  /** Servers that were down and answered again this round: the caller reconciles them at once. */
  recovered: Server[];
}

/** The longest reason kept (a Docker error can carry a long body). */
const MAX_REASON_CHARS = 500;

/**
 * Pings every enabled server's Docker engine, each bounded by SERVER_HEALTH_TIMEOUT_MS with one retry, all at
 * once (a round takes at most about twice the bound, whatever the number of servers), and records the outcome on
 * the server's row: `up`, or `down` with the reason and since when. Only the transition down → up is reported back,
 * by a conditional update, so two concurrent rounds cannot both report one recovery. Each server that answers has
 * its image inventory taken in the same round (ServerInventory).
 */
@Injectable()
export class ServerHealth {
  private readonly logger = new Logger(ServerHealth.name);

  constructor(
    @InjectRepository(Server) private readonly servers: Repository<Server>,
    private readonly hosts: DockerHosts,
    private readonly config: AppConfig,
    private readonly inventory: ServerInventory,
  ) {}

  async checkAll(): Promise<HealthRound> {
    const servers = await this.servers.find({ where: { enabled: true }, relations: { zone: true } });
    // A server that answers also has its image inventory taken (placement reads it; best effort).
    const outcomes = await Promise.all(servers.map(async (server) => {
      const failure = await this.ping(server);
      if (failure === null) await this.inventory.refreshQuietly(server);
      return { server, failure };
    }));
    const round: HealthRound = { checked: servers.length, down: [], recovered: [] };
    for (const { server, failure } of outcomes) {
      if (failure === null) {
        if (await this.markUp(server)) round.recovered.push(server);
      } else {
        await this.markDown(server, failure);
        round.down.push(server.hostname);
      }
    }
    return round;
  }

  /** How many enabled servers answered at their last check (a server not checked yet counts as up). */
  reachable(): Promise<number> {
    return this.servers.count({ where: { enabled: true, health: 'up' } });
  }

  /** null when the engine answered (at the first try or the retry); otherwise why it did not. */
  private async ping(server: Server): Promise<string | null> {
    let reason = '';
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await this.hosts.get(server).ping(this.config.SERVER_HEALTH_TIMEOUT_MS);
        return null;
      } catch (err) {
        reason = (err as Error).message || String(err);
      }
    }
    return reason.slice(0, MAX_REASON_CHARS);
  }

  /** Records an answer; true when this call ended an outage (the row was down). */
  private async markUp(server: Server): Promise<boolean> {
    const result = await this.servers
      .createQueryBuilder()
      .update(Server)
      .set({ health: 'up', healthReason: null, downSince: null, healthCheckedAt: () => 'now()' })
      .where('id = :id AND health = :down', { id: server.id, down: 'down' })
      .execute();
    if ((result.affected ?? 0) > 0) {
      this.logger.log(`server ${server.hostname} answers again: marked up`);
      return true;
    }
    await this.servers.update({ id: server.id }, { healthCheckedAt: () => 'now()' });
    return false;
  }

  private async markDown(server: Server, reason: string): Promise<void> {
    if (server.health !== 'down') this.logger.warn(`server ${server.hostname} did not answer: marked down (${reason})`);
    await this.servers
      .createQueryBuilder()
      .update(Server)
      .set({ health: 'down', healthReason: reason, healthCheckedAt: () => 'now()', downSince: () => 'COALESCE(down_since, now())' })
      .where('id = :id', { id: server.id })
      .execute();
  }
}
