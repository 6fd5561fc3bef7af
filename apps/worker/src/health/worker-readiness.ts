import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { MetricsServer } from '@ws/metrics';
import { RedisConnections } from '@ws/queue';
import { ServerHealth } from '@ws/servers';

/**
 * The worker's /readyz (on its metrics listener; /healthz is the listener's own): ready when PostgreSQL and Redis
 * answer and at least one enabled Docker host answered its last health check (maintenance.check-server-health).
 * A worker with no reachable host can start nothing, so it says so rather than taking jobs it will fail.
 */
@Injectable()
export class WorkerReadiness implements OnModuleInit {
  constructor(
    private readonly server: MetricsServer,
    @InjectDataSource() private readonly db: DataSource,
    private readonly redis: RedisConnections,
    private readonly health: ServerHealth,
  ) {}

  onModuleInit(): void {
    const { listener } = this.server;
    listener.addReadinessCheck('PostgreSQL', () => this.db.query('SELECT 1'));
    listener.addReadinessCheck('Redis', () => this.redis.shared().ping());
    listener.addReadinessCheck('Docker', async () => {
      if ((await this.health.reachable()) === 0) throw new Error('no enabled Docker host answered its last check (server list)');
    });
  }
}
