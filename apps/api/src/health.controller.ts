import { Controller, Get, HttpCode, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { PublicRoute } from '@ws/auth';
import { ApiError, AppConfig, ErrorCode } from '@ws/common';
import { RedisConnections } from '@ws/queue';
import { ApiShutdown } from './shutdown';

@Controller('api/health')
export class HealthController {
  private readonly logger = new Logger(HealthController.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly redis: RedisConnections,
    private readonly config: AppConfig,
    private readonly shutdown: ApiShutdown,
  ) {}

  /**
   * Readiness: 200 when PostgreSQL and Redis both answer within DEPENDENCY_TIMEOUT_MS, else 503 (with
   * Retry-After) naming each one that did not; 503 from the moment the process is told to stop. Load balancers
   * route by it; it never waits longer than the bound.
   */
  @Get()
  @HttpCode(200)
  @PublicRoute()
  async ready() {
    // Shutting down: out of the balancer's rotation while it still serves (API_SHUTDOWN_DRAIN_MS).
    if (this.shutdown.draining) throw new ApiError(ErrorCode.Unavailable, 'Shutting down');
    const failures = (
      await Promise.all([
        this.check('PostgreSQL', () => this.db.query('SELECT 1')),
        this.check('Redis', () => this.redis.shared().ping()),
      ])
    ).filter((failure): failure is string => failure !== null);
    if (failures.length) throw new ApiError(ErrorCode.Unavailable, `Not ready: ${failures.join('; ')}`);
    return { status: 'ok' };
  }

  /** Liveness: the process serves HTTP. Touches no dependency, so an outage of one never gets the api restarted. */
  @Get('live')
  @HttpCode(200)
  @PublicRoute()
  live() {
    return { status: 'ok' };
  }

  /** Null when `probe` answers within the bound, else what went wrong (details go to the log, not to anonymous callers). */
  private async check(name: string, probe: () => Promise<unknown>): Promise<string | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`${name} did not answer within ${this.config.DEPENDENCY_TIMEOUT_MS} ms`), this.config.DEPENDENCY_TIMEOUT_MS);
    });
    try {
      const failed = (err: Error) => {
        this.logger.warn(`health: ${name}: ${err.message}`);
        return `${name} is unavailable`;
      };
      return await Promise.race([probe().then(() => null, failed), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
