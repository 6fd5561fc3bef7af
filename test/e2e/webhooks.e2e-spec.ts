import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { ImagesService } from '@ws/images';
import { desktopImage, TestApi, TestKey, waitFor } from './harness';
import { registerLocalServer, waitForRemovedWorkspace, waitForRunningWorkspace } from './fixtures';
import { WorkerProcess } from './worker-processes';
import { runCli, useApiForCli } from './cli-runner';

interface Delivery {
  path: string;
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the delivery body, read field by field
  json: any;
}

/**
 * A webhook receiver on loopback, as an integrator would run one: every request is kept; `answers` says what a
 * path answers next (a queue of status codes, then 204).
 */
class Receiver {
  readonly received: Delivery[] = [];
  readonly answers = new Map<string, number[]>();
  readonly held: ServerResponse[] = [];
  private server!: Server;
  base = '';

  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        const body = Buffer.concat(chunks).toString('utf8');
        this.received.push({
          path, id: String(req.headers['webhook-id']), timestamp: String(req.headers['webhook-timestamp']),
          signature: String(req.headers['webhook-signature']), body, json: JSON.parse(body),
        });
        const status = this.answers.get(path)?.shift() ?? 204;
        // 0: never answer (a hung receiver); the sender's own timeout ends it.
        if (status === 0) this.held.push(res);
        else res.writeHead(status).end();
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  on(path: string): Delivery[] {
    return this.received.filter((d) => d.path === path);
  }

  close(): Promise<void> {
    for (const res of this.held) res.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Verifies a delivery with the npm package a receiver uses; throws when the signature does not verify. */
function verify(secret: string, d: Delivery): unknown {
  return new StandardWebhook(secret).verify(d.body, { 'webhook-id': d.id, 'webhook-timestamp': d.timestamp, 'webhook-signature': d.signature });
}

describe('webhooks (issue 22, point 5)', () => {
  let api: TestApi;
  let admin: TestKey;
  const receiver = new Receiver();
  const workers: WorkerProcess[] = [];
  const spawnWorker = async () => {
    const w = WorkerProcess.spawn(api.settings);
    workers.push(w);
    await w.ready();
    return w;
  };
  const create = async (path: string, events: string[] = [], key: TestKey = admin) => {
    const res = await api.call('create_webhook', key, { target_webhook: { url: `${receiver.base}${path}`, events, description: path } });
    expect(res.status).toBe(200);
    return res.body.webhook as { webhook_id: string; secret: string; url: string; events: string[]; enabled: boolean };
  };
  const newUser = async (prefix: string) =>
    (await api.call('create_user', admin, { target_user: { username: `${prefix}-${Math.random().toString(36).slice(2, 8)}` } })).body.user.user_id as string;

  beforeAll(async () => {
    await receiver.start();
    // Loopback receivers allowed (the flag), short retries; WORKER_LOCK_MS short so a killed worker's endpoints are taken over soon.
    api = await TestApi.start({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: true, WEBHOOK_RETRY_BASE_MS: 200, WORKER_LOCK_MS: 2000 });
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => {
    for (const w of workers) await w.kill('SIGKILL').catch(() => undefined);
    await api?.close();
    await receiver.close();
  });

  describe('operations', () => {
    it('create_webhook shows the secret once; get_webhooks, update_webhook and delete_webhook never do', async () => {
      const made = await create('/ops', ['user.created', 'workspace.running']);
      expect(made.secret).toMatch(/^whsec_[A-Za-z0-9+/=]+$/);
      expect(made).toMatchObject({ url: `${receiver.base}/ops`, events: ['user.created', 'workspace.running'], enabled: true, description: '/ops' });
      expect(made.webhook_id).toMatch(/^[0-9a-f]{32}$/);
      const listed = (await api.call('get_webhooks', admin)).body.webhooks as Array<Record<string, unknown>>;
      const mine = listed.find((w) => w.webhook_id === made.webhook_id);
      expect(mine).toBeDefined();
      expect(mine).not.toHaveProperty('secret');
      const updated = await api.call('update_webhook', admin, { target_webhook: { webhook_id: made.webhook_id, events: [], enabled: false, description: null } });
      expect(updated.status).toBe(200);
      expect(updated.body.webhook).toMatchObject({ events: [], enabled: false, description: null });
      expect(updated.body.webhook).not.toHaveProperty('secret');
      expect((await api.call('delete_webhook', admin, { webhook_id: made.webhook_id })).body).toEqual({});
      const again = await api.call('delete_webhook', admin, { webhook_id: made.webhook_id });
      expect(again.status).toBe(400);
      expect(again.body.error_message).toMatch(/webhook_id/);
    });

    it('refuses bad input with a 400 naming the field', async () => {
      const bad = async (target: Record<string, unknown>, field: RegExp) => {
        const res = await api.call('create_webhook', admin, { target_webhook: target });
        expect(res.status).toBe(400);
        expect(res.body.error_message).toMatch(field);
      };
      await bad({ url: `${receiver.base}/x`, events: ['workspace.exploded'] }, /events/);
      await bad({ url: 'ftp://example.invalid/x', events: [] }, /url/);
      await bad({ url: 'not a url', events: [] }, /url/);
      await bad({ events: [] }, /url/);
      await bad({ url: `${receiver.base}/x` }, /events/);
      // Metadata addresses stay refused with the flag.
      await bad({ url: 'http://169.254.169.254/latest/meta-data', events: [] }, /url .*metadata/);
    });
  });

  describe('delivery', () => {
    let first: WorkerProcess;
    beforeAll(async () => {
      first = await spawnWorker();
    });

    it('a failing receiver is retried until it answers 2xx; get_webhook_deliveries shows each attempt', async () => {
      const hook = await create('/flaky', ['user.created']);
      receiver.answers.set('/flaky', [500, 503]);
      const userId = await newUser('flaky');
      const ok = await waitFor('the third attempt', async () => (receiver.on('/flaky').length >= 3 ? receiver.on('/flaky') : undefined), 60_000);
      expect(new Set(ok.map((d) => d.id)).size).toBe(1);
      for (const d of ok) expect(verify(hook.secret, d)).toMatchObject({ type: 'user.created', data: { user_id: userId } });
      const attempts = await waitFor('three attempts recorded', async () => {
        const res = await api.call('get_webhook_deliveries', admin, { webhook_id: hook.webhook_id });
        return res.body.deliveries?.length >= 3 ? res.body.deliveries : undefined;
      });
      expect(attempts.map((a: { status_code: number }) => a.status_code)).toEqual([204, 503, 500]);
      expect(attempts[0]).toMatchObject({ succeeded: true, error: null, event_type: 'user.created', attempt: 3 });
      expect(attempts[2]).toMatchObject({ succeeded: false, error: 'HTTP 500', attempt: 1 });
      expect(typeof attempts[0].duration_ms).toBe('number');
    });

    it('a 410 disables the endpoint', async () => {
      const hook = await create('/gone', ['user.created']);
      receiver.answers.set('/gone', [410]);
      await newUser('gone');
      const listed = await waitFor('the endpoint disabled', async () => {
        const w = ((await api.call('get_webhooks', admin)).body.webhooks as Array<{ webhook_id: string; enabled: boolean }>).find((x) => x.webhook_id === hook.webhook_id);
        return w && !w.enabled ? w : undefined;
      });
      expect(listed).toMatchObject({ enabled: false, disabled_reason: expect.stringMatching(/410/) });
      await newUser('gone-after');
      // The next user event reaches the endpoints still enabled (flaky's filter) but never this one.
      const before = receiver.on('/gone').length;
      const probe = await create('/probe', ['user.created']);
      const probed = await newUser('probe');
      await waitFor('the probe endpoint got it', async () => (receiver.on('/probe').some((d) => d.json.data.user_id === probed) ? true : undefined));
      expect(receiver.on('/gone').length).toBe(before);
      expect(probe.enabled).toBe(true);
    });

    it('rotate_webhook_secret: deliveries carry both signatures, each secret verifies', async () => {
      const hook = await create('/rotate', ['user.updated']);
      const rotated = await api.call('rotate_webhook_secret', admin, { webhook_id: hook.webhook_id });
      expect(rotated.status).toBe(200);
      const fresh = rotated.body.webhook.secret as string;
      expect(fresh).toMatch(/^whsec_/);
      expect(fresh).not.toBe(hook.secret);
      const userId = await newUser('rotate');
      expect((await api.call('update_user', admin, { target_user: { user_id: userId, first_name: 'Rotated' } })).status).toBe(200);
      const [d] = await waitFor('the rotated delivery', async () => (receiver.on('/rotate').length > 0 ? receiver.on('/rotate') : undefined));
      expect(d.signature.split(' ')).toHaveLength(2);
      expect(verify(fresh, d)).toMatchObject({ type: 'user.updated', data: { user_id: userId, changed: ['first_name'] } });
      expect(verify(hook.secret, d)).toMatchObject({ type: 'user.updated' });
      expect(() => verify('whsec_' + Buffer.alloc(24, 7).toString('base64'), d)).toThrow();
    });

    it('a hung receiver holds up no other endpoint', async () => {
      await create('/hung', ['user.created']);
      await create('/fast', ['user.created']);
      receiver.answers.set('/hung', [0]);
      const userId = await newUser('hung');
      await waitFor('the hung receiver asked', async () => (receiver.on('/hung').some((d) => d.json.data.user_id === userId) ? true : undefined));
      await waitFor('the other endpoint served', async () => (receiver.on('/fast').some((d) => d.json.data.user_id === userId) ? true : undefined));
      // The first request to /hung is still unanswered while /fast got its delivery.
      expect(receiver.held.some((res) => !res.writableEnded && !res.destroyed)).toBe(true);
    });

    it('each workspace event arrives once, in commit order per workspace, across a worker SIGKILL', async () => {
      await registerLocalServer(api);
      const image = await api.app.get(ImagesService).upsert({
        name: desktopImage(), friendlyName: 'Webhook desktop', cores: 1, memory: 384 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' },
      });
      const hook = await create('/all');
      const users: string[] = [];
      const workspaces: string[] = [];
      for (let i = 0; i < 3; i++) {
        const userId = await newUser('ws');
        const res = await api.call('request_workspace', admin, { user_id: userId, image_id: image.id.replace(/-/g, '') });
        expect(res.status).toBe(200);
        users.push(userId);
        workspaces.push(res.body.workspace_id as string);
      }
      // The worker dies while the workspaces start and their events go out; a second one finishes the work.
      await waitFor('some workspace events delivered', async () => (receiver.on('/all').some((d) => d.json.type === 'workspace.requested') ? true : undefined));
      await first.kill('SIGKILL');
      await spawnWorker();
      for (let i = 0; i < 3; i++) await waitForRunningWorkspace(api, admin, workspaces[i], users[i]);
      for (let i = 0; i < 3; i++) expect((await api.call('destroy_workspace', admin, { workspace_id: workspaces[i], user_id: users[i] })).status).toBe(200);
      for (let i = 0; i < 3; i++) await waitForRemovedWorkspace(api, admin, workspaces[i], users[i]);
      const expected = ['workspace.requested', 'workspace.running', 'workspace.stopping', 'workspace.destroyed'];
      for (const [i, workspaceId] of workspaces.entries()) {
        const seen = await waitFor(`every event of workspace ${workspaceId}`, async () => {
          const mine = receiver.on('/all').filter((d) => d.json.data.workspace_id === workspaceId);
          // At least once: a delivery cut short by the kill comes again with the same webhook-id; the receiver keeps the first.
          const firstOfEach = mine.filter((d, n) => mine.findIndex((x) => x.id === d.id) === n);
          return firstOfEach.length >= expected.length ? firstOfEach : undefined;
        }, 90_000);
        for (const d of seen) verify(hook.secret, d);
        expect(seen.map((d) => d.json.type)).toEqual(expected);
        expect(seen[0].json.data).toMatchObject({ workspace_id: workspaceId, user_id: users[i], image_id: image.id.replace(/-/g, ''), operational_status: 'starting' });
        expect(seen[1].json.data).toMatchObject({ operational_status: 'running', operational_message: 'Running' });
        expect(seen[3].json.data).toMatchObject({ operational_status: 'deleted', user_id: users[i] });
        expect(Date.parse(seen[0].json.timestamp)).not.toBeNaN();
        // One message per event: repeats (at least once) carry the first one's webhook-id and body.
        const all = receiver.on('/all').filter((d) => d.json.data.workspace_id === workspaceId);
        expect(new Set(all.map((d) => d.id)).size).toBe(expected.length);
        for (const d of all) expect(d.body).toBe(seen.find((x) => x.id === d.id)?.body);
      }
      // The users' own events came through the same endpoint (no filter).
      for (const userId of users) {
        expect(receiver.on('/all').some((d) => d.json.type === 'user.created' && d.json.data.user_id === userId)).toBe(true);
      }
    });
  });

  describe('staging', () => {
    it('staging.pool_filled once when a pool reaches num_sessions', async () => {
      const image = await api.app.get(ImagesService).upsert({
        name: desktopImage(), friendlyName: 'Webhook desktop', cores: 1, memory: 384 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' },
      });
      const zone = (await api.call('get_zones', admin)).body.zones.find((z: { zone_name: string }) => z.zone_name === 'default');
      const hook = await create('/staging', ['staging.pool_filled', 'workspace.running']);
      const res = await api.call('create_staging_config', admin, {
        target_staging_config: { zone_id: zone.zone_id, image_id: image.id.replace(/-/g, ''), num_sessions: 2, expiration: 1 },
      });
      expect(res.status).toBe(200);
      const configId = res.body.staging_config.staging_config_id as string;
      const filled = await waitFor('staging.pool_filled', async () => receiver.on('/staging').find((d) => d.json.type === 'staging.pool_filled'), 120_000);
      expect(verify(hook.secret, filled)).toMatchObject({ data: { staging_config_id: configId, num_sessions: 2, ready: 2 } });
      await waitFor('both staged workspaces running', async () => (new Set(receiver.on('/staging').filter((d) => d.json.type === 'workspace.running').map((d) => d.id)).size >= 2 ? true : undefined));
      expect(new Set(receiver.on('/staging').filter((d) => d.json.type === 'staging.pool_filled').map((d) => d.id)).size).toBe(1);
      expect((await api.call('delete_staging_config', admin, { target_staging_config: { staging_config_id: configId } })).status).toBe(200);
    });
  });

  describe('receiver addresses', () => {
    it('refuses loopback, private and link-local receivers by default, at creation', async () => {
      const strict = await TestApi.start({});
      try {
        const key = await strict.key(['Global Admin']);
        for (const url of [`${receiver.base}/x`, 'http://localhost:9/x', 'http://10.1.2.3/x', 'http://[::1]:9/x', 'http://169.254.10.10/x', 'http://192.168.1.1/x']) {
          const res = await strict.call('create_webhook', key, { target_webhook: { url, events: [] } });
          expect(res.status).toBe(400);
          expect(res.body.error_message).toMatch(/^url .*refused.*WEBHOOK_ALLOW_PRIVATE_ADDRESSES/);
        }
      } finally {
        await strict.close();
      }
    });

    it('checks again at delivery: a worker without the allowance records a refusal and sends nothing', async () => {
      for (const w of workers) await w.kill('SIGKILL').catch(() => undefined);
      const strictWorker = WorkerProcess.spawn(api.settings, { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'false' });
      workers.push(strictWorker);
      await strictWorker.ready();
      const hook = await create('/strict', ['user.created']);
      await newUser('strict');
      const [attempt] = await waitFor('a refused attempt', async () => {
        const res = await api.call('get_webhook_deliveries', admin, { webhook_id: hook.webhook_id });
        return res.body.deliveries?.length > 0 ? res.body.deliveries : undefined;
      });
      expect(attempt).toMatchObject({ succeeded: false, status_code: null, error: expect.stringMatching(/refused: a loopback address/) });
      expect(receiver.on('/strict')).toHaveLength(0);
    });
  });

  describe('cli', () => {
    it('webhook add|list|remove', async () => {
      process.env.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = 'true';
      const undo = useApiForCli(api);
      try {
        const added = JSON.parse(await runCli('webhook', 'add', `${receiver.base}/cli`, '--event', 'user.deleted', '--description', 'from the cli', '--json'));
        expect(added).toMatchObject({ url: `${receiver.base}/cli`, events: ['user.deleted'], description: 'from the cli', enabled: true });
        expect(added.secret).toMatch(/^whsec_/);
        const listed = JSON.parse(await runCli('webhook', 'list', '--json')) as Array<Record<string, unknown>>;
        expect(listed.find((w) => w.webhook_id === added.webhook_id)).not.toHaveProperty('secret');
        await expect(runCli('webhook', 'add', `${receiver.base}/cli`, '--event', 'user.exploded')).rejects.toThrow(/unknown event type/);
        expect(await runCli('webhook', 'remove', added.webhook_id)).toMatch(/removed/);
        expect((JSON.parse(await runCli('webhook', 'list', '--json')) as Array<Record<string, unknown>>).some((w) => w.webhook_id === added.webhook_id)).toBe(false);
      } finally {
        await undo();
        delete process.env.WEBHOOK_ALLOW_PRIVATE_ADDRESSES;
      }
    });
  });

  describe('permissions', () => {
    it('Webhooks View reads, Webhooks Modify writes; a Read Only key is refused writes', async () => {
      const viewer = await api.key(['Webhooks View']);
      const modifier = await api.key(['Webhooks View', 'Webhooks Modify']);
      const readOnly = await api.key(['Global Admin'], { readOnly: true });
      expect((await api.call('get_webhooks', viewer)).status).toBe(200);
      const refused = await api.call('create_webhook', viewer, { target_webhook: { url: `${receiver.base}/p`, events: [] } });
      expect(refused.status).toBe(403);
      expect((await api.call('create_webhook', readOnly, { target_webhook: { url: `${receiver.base}/p`, events: [] } })).status).toBe(403);
      const made = await create('/p', [], modifier);
      expect((await api.call('rotate_webhook_secret', viewer, { webhook_id: made.webhook_id })).status).toBe(403);
      expect((await api.call('get_webhook_deliveries', viewer, { webhook_id: made.webhook_id })).status).toBe(200);
      expect((await api.call('delete_webhook', modifier, { webhook_id: made.webhook_id })).status).toBe(200);
    });
  });
});
