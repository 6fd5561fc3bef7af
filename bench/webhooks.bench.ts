/**
 * Issue 22 benchmark: webhook delivery latency, from the lifecycle change (the outbox row's time, which the body's
 * `timestamp` carries) to receipt by a receiver on loopback, under a burst of BENCH_WEBHOOK_LAUNCHES (50)
 * request_workspace calls made at once, then their destroy_workspace. Prints p50/p99 per event type and overall.
 * The receiver verifies every signature with `standardwebhooks`, as an integrator's would.
 */
import 'reflect-metadata';
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { desktopImage, post, registerLocalDesktop, startBenchApi, until } from './harness';
import { percentile, row } from './stats';

const LAUNCHES = Number(process.env.BENCH_WEBHOOK_LAUNCHES ?? 50);
const EXPECTED = ['workspace.requested', 'workspace.running', 'workspace.stopping', 'workspace.destroyed'];

async function main(): Promise<void> {
  // The receiver is on loopback: the bench deployment allows it, as the tests do.
  process.env.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = 'true';
  const latencies = new Map<string, number[]>();
  const seen = new Set<string>();
  let verifier: StandardWebhook | null = null;
  let bad = 0;
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received = Date.now();
      const body = Buffer.concat(chunks).toString('utf8');
      try {
        const event = verifier?.verify(body, req.headers as Record<string, string>) as { type: string; timestamp: string };
        const id = String(req.headers['webhook-id']);
        if (!seen.has(id)) {
          seen.add(id);
          const list = latencies.get(event.type) ?? [];
          list.push(received - Date.parse(event.timestamp));
          latencies.set(event.type, list);
        }
      } catch {
        bad++;
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
  const bench = await startBenchApi({ worker: true, kind: 'webhooks' });
  const { base } = bench;
  try {
    const { image, auth } = await registerLocalDesktop(bench.api, { name: desktopImage(), friendlyName: 'Desktop', cores: 0.25, memory: 256 * 1024 ** 2, portMap: { vnc: '5900/tcp' } });
    const hook = (await post(base, 'create_webhook', { ...auth, target_webhook: { url: receiverUrl, events: EXPECTED } })).webhook as { secret: string };
    verifier = new StandardWebhook(hook.secret);
    const users: string[] = [];
    for (let i = 0; i < LAUNCHES; i++) users.push(((await post(base, 'create_user', { ...auth, target_user: { username: `bench-${i}` } })).user as { user_id: string }).user_id);
    const launched = await Promise.all(users.map((userId) => post(base, 'request_workspace', { ...auth, user_id: userId, image_id: image.id })));
    const ids = launched.map((r, i) => {
      if (typeof r.workspace_id !== 'string') throw new Error(`request_workspace ${i}: ${JSON.stringify(r)}`);
      return r.workspace_id;
    });
    const count = (type: string) => latencies.get(type)?.length ?? 0;
    await until('every workspace running, as its webhook says', async () => (count('workspace.running') + count('workspace.failed') >= LAUNCHES ? true : undefined), 600_000);
    await Promise.all(ids.map((workspaceId, i) => post(base, 'destroy_workspace', { ...auth, workspace_id: workspaceId, user_id: users[i] })));
    await until('every workspace destroyed, as its webhook says', async () => (count('workspace.destroyed') >= LAUNCHES ? true : undefined), 600_000);

    console.log(`\nwebhook delivery latency, outbox row → receipt on loopback (burst of ${LAUNCHES} launches, then their removal; ${bad} bad signatures)`);
    for (const type of [...EXPECTED, 'workspace.failed']) {
      const values = latencies.get(type);
      if (values?.length) console.log(`${row(type, values)}   p99 ${percentile(values, 99).toFixed(1)} ms`);
    }
    const all = [...latencies.values()].flat();
    console.log(`${row('all workspace events', all)}   p99 ${percentile(all, 99).toFixed(1)} ms`);
  } finally {
    await bench.close();
    receiver.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
