/**
 * Issue 8 benchmark: the developer API under load. autocannon drives get_user, get_workspaces and
 * get_workspace_status (stored state: running workspace rows, skip_agent_check) through the real api process,
 * and the same requests against a bare Fastify + pg server doing the same reads (the same statements, round trips
 * and answers; the key checked from memory, as the api holds it) in the same run: first at full speed (requests/s, autocannon), then at a
 * fixed rate evenly paced (latency, bench/paced-load.ts).
 * Target (issue 25): each operation at ≥ 0.85× the bare server's requests/s, and p99 < 15 ms with zero errors at 1,000 requests/s.
 * Both servers run in processes of their own, so the load generator never shares their event loop.
 */
import 'reflect-metadata';
import { deepStrictEqual } from 'node:assert/strict';
import { ChildProcess, fork, spawn } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import { join } from 'node:path';
import autocannon from 'autocannon';
import type { QueryResultRow } from 'pg';
import { DataSource } from 'typeorm';
import { loadConfig, newId, randomSecret, sha256, toWireId } from '@ws/common';
import { DEFAULT_CLIENT_SETTINGS, Group, UserGroup } from '@ws/groups';
import { UsersService } from '@ws/users';
import { Workspace } from '@ws/workspaces';
import { benchDeployment, benchEnv, BenchSettings, freePort, registerLocalDesktop, treeCpuMs, until, withSetupApi } from './harness';
import { pacedLoad } from './paced-load';
import { median } from './stats';

const ROOT = join(__dirname, '..');
const SECONDS = Number(process.env.BENCH_API_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_API_ROUNDS ?? 4);
/** BENCH_API_OPERATIONS=get_user,… limits the run to those operations. */
const ONLY = (process.env.BENCH_API_OPERATIONS ?? '').split(',').filter(Boolean);
const CONNECTIONS = Number(process.env.BENCH_API_CONNECTIONS ?? 16);
const FIXED_RATE = Number(process.env.BENCH_API_RATE ?? 1000);
const USERS = 3;
/** Issue 25: each operation at ≥ 0.85× the bare server's requests/s, p99 < 15 ms at 1,000 requests/s. */
const TARGET_RATIO = 0.85;
const TARGET_P99_MS = 15;

interface Figures {
  rps: number;
  /** CPU time of the server process per answered request (less sensitive to a busy machine than requests/s). */
  cpuUs: number;
  p50: number;
  p99: number;
  errors: number;
  /** At the fixed rate: how late the generator sent (p99, ms; part of the latencies) and its CPU per request (µs). */
  sendLag?: number;
  generatorCpuUs?: number;
}

/** Full speed: autocannon's connections each send the next request as soon as the last is answered. */
async function load(url: string, bodies: object[], pid: number, options: { seconds: number }): Promise<Figures> {
  const cpuBefore = treeCpuMs(pid);
  const result = await autocannon({
    url, method: 'POST', headers: { 'content-type': 'application/json' }, requests: bodies.map((body) => ({ body: JSON.stringify(body) })),
    connections: CONNECTIONS, duration: options.seconds, timeout: 10,
  });
  const cpuUs = ((treeCpuMs(pid) - cpuBefore) * 1000) / Math.max(1, result.requests.total);
  return { rps: result.requests.average, cpuUs, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.timeouts + result.non2xx };
}

/** A fixed rate, evenly paced, latency counted from when each request was due (bench/paced-load.ts). */
async function paced(url: string, bodies: object[], pid: number, seconds: number): Promise<Figures> {
  const cpuBefore = treeCpuMs(pid);
  const result = await pacedLoad({ url, bodies, rate: FIXED_RATE, seconds, connections: CONNECTIONS });
  const cpuUs = ((treeCpuMs(pid) - cpuBefore) * 1000) / Math.max(1, FIXED_RATE * seconds);
  return { rps: result.rps, cpuUs, p50: result.p50, p99: result.p99, errors: result.errors, sendLag: result.sendLagP99, generatorCpuUs: result.generatorCpuUs };
}

/** Medians over rounds; errors summed. */
const summary = (runs: Figures[]): Figures => ({
  rps: median(runs.map((f) => f.rps)), cpuUs: median(runs.map((f) => f.cpuUs)), p50: median(runs.map((f) => f.p50)), p99: median(runs.map((f) => f.p99)), errors: runs.reduce((n, f) => n + f.errors, 0),
});

const fmt = (f: Figures) =>
  `${f.rps.toFixed(0).padStart(7)} req/s   ${f.cpuUs.toFixed(0).padStart(5)} µs CPU/req   p50 ${f.p50.toFixed(1).padStart(6)} ms   p99 ${f.p99.toFixed(1).padStart(6)} ms   errors ${f.errors}`;

/**
 * The baseline must answer what the api answers (else it would be measuring less work): the same JSON but for the
 * clock and the link's JWT (signed for another generation of the same token).
 */
function sameAnswers(operation: string, api: unknown, bare: unknown): void {
  const normal = (answer: unknown) => JSON.parse(JSON.stringify(answer), (key, value: unknown) =>
    key === 'current_time' ? '<now>' : key === 'workspace_url' && typeof value === 'string' ? value.replace(/[^/]+$/, '<jwt>') : value);
  try {
    deepStrictEqual(normal(bare), normal(api));
  } catch (err) {
    throw new Error(`the bare server's ${operation} answers otherwise than the api's: ${(err as Error).message}`);
  }
}

/** Stored state: users in two groups, each with a running workspace on a registered server. */
function seed(settings: BenchSettings) {
  return withSetupApi(settings, async (setup) => {
    const { server, image, key, auth } = await registerLocalDesktop(setup, { name: 'bench/desktop:1', friendlyName: 'Desktop', cores: 1, memory: 1024 ** 3 });
    const db = setup.get(DataSource);
    const administrators = await db.getRepository(Group).findOneByOrFail({ systemKey: 'administrators' });
    const workspaces: Array<{ user_id: string; workspace_id: string }> = [];
    for (let i = 0; i < USERS; i++) {
      const user = await setup.get(UsersService).create({ username: `bench-${i}`, first_name: 'Bench', last_name: `User ${i}` });
      await db.getRepository(UserGroup).insert({ userId: user.id, groupId: administrators.id });
      const now = new Date();
      const id = newId();
      await db.getRepository(Workspace).insert({
        id, userId: user.id, imageId: image.id, serverId: server.id, status: 'running', operationalMessage: 'Running', operationalProgress: 100,
        containerId: randomSecret(32), containerIp: '172.17.0.99', hostPorts: { vnc: 49000 + i }, cores: 1, memory: 1024 ** 3,
        token: randomSecret(32), viewOnlyToken: randomSecret(32), shareId: randomSecret(16), sharingEnabled: false, environment: {},
        sessionTokenId: null, launchOptions: {}, persistentProfileMode: null, isPersistentProfile: false,
        startDate: now, keepaliveDate: now, expirationDate: new Date(now.getTime() + 86400_000), destroyedAt: null, destroyReason: null,
      });
      workspaces.push({ user_id: toWireId(user.id), workspace_id: toWireId(id) });
    }
    return { auth, secretSha256: key.secretSha256, workspaces };
  });
}

async function main(): Promise<void> {
  const deployment = await benchDeployment('load');
  const { settings } = deployment;
  const children: ChildProcess[] = [];
  try {
    const { auth, secretSha256, workspaces } = await seed(settings);
    const [apiPort, barePort] = await Promise.all([freePort(), freePort()]);
    const env = benchEnv(settings, { API_PORT: String(apiPort), API_HOST: '127.0.0.1' });
    // BENCH_PROFILE_API=<dir> writes CPU profiles of the api and the bare server (on exit) for finding hot spots.
    // BENCH_API_SERVER_FLAGS adds Node/V8 flags to both servers (to try one on both alike).
    const profile = process.env.BENCH_PROFILE_API ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_API}`] : [];
    const flags = [...profile, ...(process.env.BENCH_API_SERVER_FLAGS ?? '').split(' ').filter(Boolean)];
    const apiProcess = spawn(process.execPath, [...flags, join(ROOT, 'apps/api/src/main.js')], { env, stdio: 'inherit' });
    const bareProcess = fork(__filename, ['bare-server', String(barePort), auth.api_key, secretSha256], { env, stdio: 'inherit', execArgv: [...process.execArgv, ...flags] });
    children.push(apiProcess, bareProcess);
    const pids = { api: apiProcess.pid as number, bare: bareProcess.pid as number };
    const api = `http://127.0.0.1:${apiPort}`;
    const bare = `http://127.0.0.1:${barePort}`;
    // A busy shared machine can take more than a minute to start the api.
    await until('the api', async () => ((await fetch(`${api}/api/health`)).ok ? true : undefined), 300_000);
    await until('the bare server', async () => ((await fetch(`${bare}/health`)).ok ? true : undefined), 300_000);

    // The calls about one user or workspace go round all of them, as an integrator's would: a status call renews
    // the workspace's session token, and 16 connections renewing one row measure PostgreSQL's row lock more than
    // either server.
    const operations: Array<[string, object[]]> = [
      ['get_user', workspaces.map((w) => ({ ...auth, target_user: { user_id: w.user_id } }))],
      ['get_workspaces', [{ ...auth }]],
      ['get_workspace_status', workspaces.map((w) => ({ ...auth, user_id: w.user_id, workspace_id: w.workspace_id, skip_agent_check: true }))],
    ];
    for (const [operation, bodies] of operations) {
      for (const body of bodies) {
        const answers: unknown[] = [];
        for (const base of [api, bare]) {
          const res = await fetch(`${base}/api/public/${operation}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
          if (res.status !== 200) throw new Error(`${operation} at ${base} answered ${res.status}: ${await res.text()}`);
          answers.push(await res.json());
        }
        sameAnswers(operation, answers[0], answers[1]);
      }
    }

    console.log(`\nAPI under load (${ROUNDS} alternating rounds of ${SECONDS} s per figure, up to ${CONNECTIONS} connections: full speed by autocannon, ${FIXED_RATE}/s evenly paced with latency from each request's due time; baseline: bare Fastify + pg doing the same reads)`);
    for (const [operation, bodies] of operations.filter(([op]) => ONLY.length === 0 || ONLY.includes(op))) {
      const url = (base: string) => `${base}/api/public/${operation}`;
      // Warm both (JIT, pools), then alternate short rounds so background load on the shared machine hits
      // both alike; figures are medians over rounds, the ratio the median of per-round ratios.
      await load(url(api), bodies, pids.api, { seconds: 2 });
      await load(url(bare), bodies, pids.bare, { seconds: 2 });
      const full = { api: [] as Figures[], bare: [] as Figures[] };
      const fixed = { api: [] as Figures[], bare: [] as Figures[] };
      const orderOf = (round: number): Array<['api' | 'bare', string]> => (round % 2 === 0 ? [['api', api], ['bare', bare]] : [['bare', bare], ['api', api]]);
      for (let round = 0; round < ROUNDS; round++) {
        for (const [side, base] of orderOf(round)) full[side].push(await load(url(base), bodies, pids[side], { seconds: SECONDS }));
      }
      // The latency rounds after all the full-speed ones, each behind a short run at the same rate (not counted): a
      // fixed-rate run right behind a full-speed one measured the machine recovering from it (the garbage it left in
      // the load generator and the server, PostgreSQL's buffers), not a steady 1,000/s, and put that on whichever
      // server came next (a p99 of 42 ms for the bare server, 9–10 in its other rounds).
      for (let round = 0; round < ROUNDS; round++) {
        for (const [side, base] of orderOf(round)) {
          await paced(url(base), bodies, pids[side], 1);
          fixed[side].push(await paced(url(base), bodies, pids[side], SECONDS));
        }
      }
      const ratio = median(full.api.map((f, i) => f.rps / full.bare[i].rps));
      const p99 = summary(fixed.api).p99;
      const errors = fixed.api.reduce((n, f) => n + f.errors, 0);
      console.log(`\n${operation}`);
      console.log(`  full speed     api  ${fmt(summary(full.api))}`);
      console.log(`  full speed     bare ${fmt(summary(full.bare))}`);
      console.log(`  ${FIXED_RATE}/s fixed   api  ${fmt(summary(fixed.api))}`);
      console.log(`  ${FIXED_RATE}/s fixed   bare ${fmt(summary(fixed.bare))}`);
      const rounds = (figures: Figures[]) => figures.map((f) => f.p99.toFixed(1)).join(' ');
      const generator = (figures: Figures[]) => `${median(figures.map((f) => f.sendLag ?? 0)).toFixed(1)} ms late at p99, ${median(figures.map((f) => f.generatorCpuUs ?? 0)).toFixed(0)} µs CPU/req`;
      console.log(`  p99 at ${FIXED_RATE}/s per round: api ${rounds(fixed.api)}   bare ${rounds(fixed.bare)}`);
      console.log(`  the paced generator: ${generator(fixed.api)} (api) / ${generator(fixed.bare)} (bare)`);
      console.log(`  ratio api/bare requests/s ${ratio.toFixed(2)} (per round: ${full.api.map((f, i) => (f.rps / full.bare[i].rps).toFixed(2)).join(' ')})   CPU/req api/bare ${(summary(full.api).cpuUs / summary(full.bare).cpuUs).toFixed(2)}   p99 at ${FIXED_RATE}/s api/bare ${(p99 / summary(fixed.bare).p99).toFixed(2)}`);
      const met = ratio >= TARGET_RATIO && p99 < TARGET_P99_MS && errors === 0;
      console.log(`  target: ≥ ${TARGET_RATIO}× requests/s, p99 < ${TARGET_P99_MS} ms and 0 errors at ${FIXED_RATE}/s: ${met ? 'met' : 'NOT met'}`);
    }
  } finally {
    for (const child of children) child.kill('SIGINT');
    await Promise.all(children.map((c) => (c.exitCode !== null ? undefined : new Promise((r) => c.once('exit', r)))));
    await deployment.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// The baseline: a bare Fastify + pg server answering the same three operations with the same statements as the
// api (same joins, same round trips, same concurrency) and the same answers (`sameAnswers` checks them before
// any load). The key is checked from memory, as the api checks a key it holds (ApiKeyAuthenticator: exact, evicted
// by PostgreSQL change notices); its secret is hashed on every request by both.

const LIVE = ['starting', 'running', 'stopping', 'failed'];
const ts = (d: Date | null) => (d ? d.toISOString().replace('T', ' ').replace('Z', '000') : null);
const wire = (id: string | null) => (id ? id.replace(/-/g, '') : null);

async function bareServer(port: number, apiKey: string, secretSha256: string): Promise<void> {
  const { default: Fastify } = await import('fastify');
  const { Pool } = await import('pg');
  const jwt = await import('jsonwebtoken');
  const { createSecretKey } = await import('node:crypto');
  const config = loadConfig();
  const pool = new Pool({ host: config.DATABASE_HOST, port: config.DATABASE_PORT, user: config.DATABASE_USER, password: config.DATABASE_PASSWORD, database: config.DATABASE_NAME, max: config.DATABASE_POOL_SIZE });
  const expected = Buffer.from(secretSha256, 'hex');
  // The same signing key as the api's (made on first use by whichever comes first), held as a KeyObject as the api holds it.
  await pool.query(`INSERT INTO settings (key, value) VALUES ('jwt_signing_key', $1) ON CONFLICT DO NOTHING`, [JSON.stringify(randomSecret(32))]);
  const [{ value: signingKeyText }] = (await pool.query(`SELECT value FROM settings WHERE key = 'jwt_signing_key'`)).rows;
  const signingKey = createSecretKey(Buffer.from(signingKeyText as string, 'utf8'));
  const app = Fastify();
  const authenticate = (body: Record<string, string>) =>
    body.api_key === apiKey && timingSafeEqual(Buffer.from(sha256(body.api_key_secret ?? ''), 'hex'), expected);
  const groupsOf = async (userIds: string[]) =>
    (await pool.query('SELECT m.user_id, g.id, g.name, g.priority, g.keepalive_expiration, g.client_settings FROM user_groups m JOIN groups g ON g.id = m.group_id WHERE m.user_id = ANY($1) ORDER BY g.priority, g.name', [userIds])).rows;
  const setting = async (key: string) => (await pool.query('SELECT value FROM settings WHERE key = $1', [key])).rows[0].value;

  app.get('/health', async () => ({}));
  app.post('/api/public/get_user', async (request, reply) => {
    const body = request.body as Record<string, unknown>;
    if (!authenticate(body as Record<string, string>)) return reply.status(401).send({ error_message: 'Invalid api_key or api_key_secret' });
    const userId = (body.target_user as { user_id: string }).user_id;
    const { rows: [user] } = await pool.query('SELECT * FROM users WHERE id = $1', [userId]);
    if (!user) return reply.status(400).send({ error_message: `Invalid user_id (${userId})` });
    const [groups, workspaces] = await Promise.all([
      groupsOf([user.id]),
      pool.query('SELECT w.id, w.start_date, w.keepalive_date, w.expiration_date, w.host_ports, s.id AS server_id, s.hostname FROM workspaces w LEFT JOIN servers s ON s.id = w.server_id WHERE w.user_id = $1 AND w.status = ANY($2) ORDER BY w.start_date', [user.id, LIVE]),
    ]);
    return {
      user: {
        user_id: wire(user.id), username: user.username, first_name: user.first_name, last_name: user.last_name, phone: user.phone,
        organization: user.organization, notes: user.notes, locked: user.locked, disabled: user.disabled, realm: user.realm,
        last_session: ts(user.last_session), groups: groups.map((g) => ({ name: g.name, group_id: wire(g.id) })),
        workspaces: workspaces.rows.map((w) => ({
          workspace_id: wire(w.id), start_date: ts(w.start_date), keepalive_date: ts(w.keepalive_date), expiration_date: ts(w.expiration_date),
          server: w.server_id ? { server_id: wire(w.server_id), hostname: w.hostname, port: w.host_ports.vnc ?? null } : null,
        })),
        two_factor: user.two_factor, program_id: user.program_id, hash: sha256(`${user.id}:${user.credentials_changed_at.toISOString()}`),
      },
    };
  });

  /** A live workspace's row (one per image attribute, as the api selects it) with its image, server and owner's name. */
  const workspaceSelect = (columns: string) => `SELECT ${columns}, i.name AS image_name, i.image_src, i.friendly_name, i.kind AS image_kind, s.publish_host, s.hostname, s.zone_id, s.provider,
      s.health, s.health_reason, s.health_checked_at, s.down_since, u.username, a.category AS a_category, a.name AS a_name, a.value AS a_value
    FROM workspaces w JOIN images i ON i.id = w.image_id LEFT JOIN image_attributes a ON a.image_id = i.id
    LEFT JOIN servers s ON s.id = w.server_id LEFT JOIN users u ON u.id = w.user_id`;
  /** get_workspace_status reads the whole row (its session token too); get_workspaces, as the api, only what the list shows. */
  const WORKSPACE_SELECT = workspaceSelect('w.*');
  const LIST_SELECT = workspaceSelect(['id', 'user_id', 'image_id', 'server_id', 'server_connection', 'host_ports', 'container_id', 'container_ip', 'start_date', 'keepalive_date',
    'expiration_date', 'token', 'view_only_token', 'share_id', 'cores', 'memory', 'status', 'operational_message', 'is_persistent_profile', 'persistent_profile_mode',
    'client_settings_override'].map((c) => `w.${c}`).join(', '));
  /** Rows (one per attribute) → workspaces with their port maps, in order. */
  const byWorkspace = (rows: QueryResultRow[]) => {
    const found = new Map<string, { w: QueryResultRow; portMap: Record<string, string> }>();
    for (const row of rows) {
      let entry = found.get(row.id);
      if (!entry) found.set(row.id, (entry = { w: row, portMap: {} }));
      if (row.a_category === 'port_map') entry.portMap[row.a_name] = row.a_value;
    }
    return [...found.values()];
  };
  const clientSettingsOf = (groups: QueryResultRow[], w: QueryResultRow) => {
    const settings: Record<string, boolean | number> = { ...DEFAULT_CLIENT_SETTINGS };
    for (const g of groups.filter((g) => g.user_id === w.user_id).reverse()) {
      for (const [key, value] of Object.entries(g.client_settings ?? {})) if (key in settings && typeof value === typeof settings[key]) settings[key] = value as boolean | number;
    }
    return { ...settings, ...w.client_settings_override };
  };
  const statusName = (status: string) => (status === 'failed' || status === 'deleted' ? 'stopped' : status);
  const workspaceJson = ({ w, portMap }: { w: QueryResultRow; portMap: Record<string, string> }, groups: QueryResultRow[]) => {
    const path = (service: string) => `api/stream/${wire(w.id)}/${service}`;
    const services: Record<string, { port: number; path: string }> = Object.fromEntries(
      Object.entries(Object.keys(portMap).length ? portMap : { vnc: '5900/tcp' }).map(([name, spec]) => [name, { port: Number(spec.split('/')[0]), path: path(name) }]),
    );
    if (!services.uploads && !w.server_connection && w.image_kind !== 'server') services.uploads = { port: 0, path: path('uploads') };
    const direct = w.server_connection?.mode === 'direct' ? w.server_connection : null;
    return {
      workspace_id: wire(w.id), user_id: wire(w.user_id), image_id: wire(w.image_id),
      image: { image_id: wire(w.image_id), name: w.image_name, image_src: w.image_src, friendly_name: w.friendly_name },
      server_id: wire(w.server_id), host: direct?.host ?? w.publish_host ?? null, hostname: direct?.host ?? w.hostname ?? null, port: direct?.port ?? w.host_ports.vnc ?? null,
      container_id: w.container_id, container_ip: w.container_ip, start_date: ts(w.start_date), keepalive_date: ts(w.keepalive_date),
      expiration_date: ts(w.expiration_date), token: w.token, view_only_token: w.view_only_token, share_id: w.share_id, cores: Number(w.cores),
      memory: Number(w.memory), operational_status: statusName(w.status), operational_message: w.operational_message, is_persistent_profile: w.is_persistent_profile,
      persistent_profile_mode: w.persistent_profile_mode, point_of_presence: null, port_map: services, client_settings: clientSettingsOf(groups, w),
    };
  };
  const unreachable = (w: QueryResultRow) => (w.health === 'down' ? `The workspace's host ${w.hostname} is unreachable` : null);

  app.post('/api/public/get_workspaces', async (request, reply) => {
    if (!authenticate(request.body as Record<string, string>)) return reply.status(401).send({ error_message: 'Invalid api_key or api_key_secret' });
    const [{ rows }, zones] = await Promise.all([
      pool.query(`${LIST_SELECT} WHERE w.status = ANY($1) ORDER BY w.start_date, w.id`, [LIVE]),
      pool.query('SELECT id, name FROM zones'),
    ]);
    const workspaces = byWorkspace(rows);
    const [groups] = await Promise.all([groupsOf(workspaces.map(({ w }) => w.user_id)), setting('default_keepalive_expiration')]);
    const zoneNames = new Map(zones.rows.map((z) => [z.id, z.name]));
    return {
      current_time: ts(new Date()),
      workspaces: workspaces.map((entry) => {
        const { w } = entry;
        return {
          ...workspaceJson(entry, groups),
          server: w.server_id
            ? { port: w.host_ports.vnc ?? null, hostname: w.hostname, zone_name: zoneNames.get(w.zone_id) ?? null, provider: w.provider, health: w.health, health_reason: w.health_reason, health_checked_at: ts(w.health_checked_at), down_since: ts(w.down_since) }
            : null,
          user: { username: w.username },
          operational_message: unreachable(w) ?? w.operational_message ?? null,
        };
      }),
    };
  });

  app.post('/api/public/get_workspace_status', async (request, reply) => {
    const body = request.body as Record<string, string>;
    if (!authenticate(body)) return reply.status(401).send({ error_message: 'Invalid api_key or api_key_secret' });
    const [entry] = byWorkspace((await pool.query(`${WORKSPACE_SELECT} WHERE w.id = $1 AND w.status = ANY($2)`, [body.workspace_id, LIVE])).rows);
    if (!entry || wire(entry.w.user_id) !== body.user_id) return reply.status(400).send({ error_message: `Invalid workspace_id (${body.workspace_id})` });
    const { w } = entry;
    if (unreachable(w) || w.status !== 'running') return reply.status(400).send({ error_message: `Workspace (${wire(w.id)}) is not running` });
    // Renewal (the session lifetime read in the same statement) beside the owner's groups: a live token of the
    // workspace gets a new generation and a new link (a fresh token the first time).
    const now = new Date();
    const renewal = `UPDATE session_tokens SET token_date = $2, expires_at = $2::timestamptz + (SELECT (value #>> '{}')::integer FROM settings WHERE key = 'session_lifetime') * interval '1 second',
      generation = generation + 1 WHERE id = $1 AND expires_at > $2 RETURNING id, generation, expires_at`;
    const [renewed, groups] = await Promise.all([
      w.session_token_id ? pool.query(renewal, [w.session_token_id, now]).then((r) => r.rows[0]) : undefined,
      groupsOf([w.user_id]),
      setting('default_keepalive_expiration'),
    ]);
    let token = renewed;
    if (!token) {
      const lifetime = await setting('session_lifetime');
      token = (await pool.query('INSERT INTO session_tokens (id, user_id, token_date, expires_at, generation) VALUES (gen_random_uuid(), $1, $2, $3, 0) RETURNING id, generation, expires_at', [w.user_id, now, new Date(now.getTime() + lifetime * 1000)])).rows[0];
      await pool.query('UPDATE workspaces SET session_token_id = $2 WHERE id = $1', [w.id, token.id]);
    }
    const link = jwt.sign({ workspace_id: w.id, sub: w.user_id, sid: token.id, gen: token.generation, exp: Math.floor(token.expires_at.getTime() / 1000) }, signingKey, { algorithm: 'HS256', issuer: 'workspace-server' });
    return {
      current_time: ts(now),
      workspace_url: `/#/connect/workspace/${wire(w.id)}/${wire(w.user_id)}/${link}`,
      workspace: workspaceJson(entry, groups),
    };
  });

  await app.listen({ port, host: '127.0.0.1' });
  process.once('SIGINT', () => void app.close().then(() => pool.end()).then(() => process.exit(0)));
}

if (process.argv[2] === 'bare-server') {
  bareServer(Number(process.argv[3]), process.argv[4], process.argv[5]).catch((err: Error) => {
    console.error(err.stack ?? err.message);
    process.exit(1);
  });
} else {
  main().catch((err: Error) => {
    console.error(err.stack ?? err.message);
    process.exit(1);
  });
}
