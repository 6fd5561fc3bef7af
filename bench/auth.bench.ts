/**
 * Issue 2 benchmark: what authenticating a request costs. The cached authenticator against two baselines
 * measured in the same run: an uncached indexed lookup per request, and a bcrypt check (a slow hash).
 */
import 'reflect-metadata';
import * as bcrypt from 'bcryptjs';
import { DataSource } from 'typeorm';
import { ApiKeyAuthenticator, ApiKeysService, OperationAuthorizer } from '@ws/auth';
import { randomSecret, sha256 } from '@ws/common';
import { startBenchApi } from './harness';

const N = Number(process.env.BENCH_AUTH_CALLS ?? 20_000);

async function perCallMicros(calls: number, fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < Math.min(200, calls); i++) await fn(); // warm up
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await fn();
  return Number(process.hrtime.bigint() - start) / 1000 / calls;
}

/** What the operation routes hand the authorizer for `get_users` with these credentials (failure-limit checks included). */
function operationRequest(apiKey: string, secret: string) {
  return { ip: '127.0.0.1', headers: {}, body: { api_key: apiKey, api_key_secret: secret } };
}

async function main(): Promise<void> {
  const bench = await startBenchApi({ kind: 'auth', listen: false });
  const { api } = bench;
  try {
    const { key, secret } = await api.get(ApiKeysService).create({ name: 'bench', permissions: ['Users View'] });
    const authenticator = api.get(ApiKeyAuthenticator);
    const db = api.get(DataSource);
    const cached = await perCallMicros(N, () => authenticator.authenticate(key.apiKey, secret));
    const authorizer = api.get(OperationAuthorizer);
    const request = operationRequest(key.apiKey, secret);
    const guarded = await perCallMicros(N, async () => authorizer.authorize('get_users', request));
    // An unknown key is refused from memory after its first miss (the authenticator alone: the whole check would also count the failure).
    const unknownKey = randomSecret(16);
    const unknown = await perCallMicros(Math.min(N, 2000), () => authenticator.authenticate(unknownKey, secret).catch(() => undefined));
    const lookup = await perCallMicros(Math.min(N, 2000), async () => {
      const [row] = await db.query('SELECT secret_sha256, permissions, expires_at, revoked_at FROM api_keys WHERE api_key = $1', [key.apiKey]);
      return row.secret_sha256 === sha256(secret);
    });
    const hashed = await bcrypt.hash(secret, 10);
    const slowHash = await perCallMicros(20, () => bcrypt.compare(secret, hashed));
    console.log(`\nAPI-key authentication per request (${N} calls)`);
    console.log(`cached authenticator                          ${cached.toFixed(2).padStart(10)} µs`);
    console.log(`whole check (limits, permissions, no Redis)   ${guarded.toFixed(2).padStart(10)} µs   (${(guarded / cached).toFixed(2)}× the authenticator)`);
    console.log(`unknown api_key, remembered miss              ${unknown.toFixed(2).padStart(10)} µs`);
    console.log(`baseline: indexed lookup per request          ${lookup.toFixed(2).padStart(10)} µs   (${(lookup / cached).toFixed(0)}× slower; ${(lookup / unknown).toFixed(0)}× a remembered miss)`);
    console.log(`baseline: bcrypt cost 10 per request          ${slowHash.toFixed(2).padStart(10)} µs   (${(slowHash / cached).toFixed(0)}× slower)`);
  } finally {
    await bench.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
