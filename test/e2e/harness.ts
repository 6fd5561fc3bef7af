import 'reflect-metadata';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import { createApi } from '../../apps/api/src/bootstrap';
import { ApiKeysService, Permission } from '@ws/auth';
import { AppConfig, loadConfig, randomSecret } from '@ws/common';
import { dropDatabase, migrate } from '@ws/database';

export interface TestKey {
  api_key: string;
  api_key_secret: string;
}

/** A live api on a database and Redis prefix of its own; close() drops both. */
export class TestApi {
  private constructor(
    readonly app: NestFastifyApplication,
    readonly config: AppConfig,
    readonly database: string,
  ) {}

  static async start(overrides: Partial<AppConfig> = {}): Promise<TestApi> {
    const suffix = randomSecret(5);
    const database = `ws_e2e_${suffix}`;
    const settings: Partial<AppConfig> = { DATABASE_NAME: database, REDIS_PREFIX: `wse2e-${suffix}`, DATABASE_POOL_SIZE: 4, LOG_LEVEL: 'warn', ...overrides };
    const config = Object.assign(loadConfig(), settings);
    await migrate(config, database);
    const app = await createApi(settings);
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
    return new TestApi(app, config, database);
  }

  async key(permissions: Permission[], options: { readOnly?: boolean; expiresAt?: Date } = {}): Promise<TestKey> {
    const { key, secret } = await this.app.get(ApiKeysService).create({ name: 'test', permissions, ...options });
    return { api_key: key.apiKey, api_key_secret: secret };
  }

  /** POST /api/public/<operation> with the key in the body, as an integrator calls it. */
  call(operation: string, key: TestKey | null, body: Record<string, unknown> = {}) {
    return request(this.app.getHttpServer())
      .post(`/api/public/${operation}`)
      .set('content-type', 'application/json')
      .send({ ...(key ?? {}), ...body });
  }

  raw() {
    return request(this.app.getHttpServer());
  }

  async close(): Promise<void> {
    await this.app.close();
    await dropDatabase(this.config, this.database);
  }
}

/** Polls `check` until it returns a value other than undefined, within a bounded time. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; Date.now() < deadline && attempt < 100_000; attempt++) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

export const HEX32 = /^[0-9a-f]{32}$/;
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}$/;
