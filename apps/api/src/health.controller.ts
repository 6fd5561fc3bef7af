import { Controller, Get, HttpCode } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { PublicRoute } from '@ws/auth';
import { ApiError, ErrorCode } from '@ws/common';
import { RedisConnections } from '@ws/queue';

@Controller('api')
export class HealthController {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly redis: RedisConnections,
  ) {}

  /** Ready when PostgreSQL and Redis answer. */
  @Get('health')
  @HttpCode(200)
  @PublicRoute()
  async health() {
    try {
      await Promise.all([this.db.query('SELECT 1'), this.redis.shared().ping()]);
    } catch (err) {
      throw new ApiError(ErrorCode.Unavailable, `Not ready: ${(err as Error).message}`);
    }
    return { status: 'ok' };
  }
}
