/**
 * How a launch bench learns that a workspace runs without polling: a webhook receiver on loopback, as an
 * integrator with webhooks would have (every signature verified with `standardwebhooks`). Polling
 * get_workspace_status every 100 ms for each of 16 workspaces is ~160 requests a second of the bench's own, which
 * on a shared two-core machine takes CPU from the very desktops being timed; the bare baseline pays nothing alike.
 * The bench deployment must allow a receiver on a private address (WEBHOOK_ALLOW_PRIVATE_ADDRESSES).
 */
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { Webhook as StandardWebhook } from 'standardwebhooks';

type Outcome = 'running' | 'failed';

export class LifecycleWebhook {
  private readonly outcomes = new Map<string, { outcome: Outcome; message: string | null }>();
  private readonly waiters = new Map<string, () => void>();
  private verifier: StandardWebhook | null = null;

  private constructor(private readonly server: Server) {}

  /** Listens on loopback and subscribes the deployment at `base` to workspace.running and workspace.failed. */
  static async start(base: string, auth: object): Promise<LifecycleWebhook> {
    const server = createServer();
    const watcher = new LifecycleWebhook(server);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        watcher.receive(Buffer.concat(chunks).toString('utf8'), req.headers as Record<string, string>);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    const res = await fetch(`${base}/api/public/create_webhook`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...auth, target_webhook: { url, events: ['workspace.running', 'workspace.failed'] } }),
    });
    const created = (await res.json()) as { webhook?: { secret?: string } };
    const secret = created.webhook?.secret;
    if (!secret) throw new Error(`create_webhook: ${JSON.stringify(created)}`);
    watcher.verifier = new StandardWebhook(secret);
    return watcher;
  }

  /** Until the workspace's running or failed event arrived (bounded by `deadline`, ms since the epoch). */
  async outcome(workspaceId: string, deadline: number): Promise<{ outcome: Outcome; message: string | null }> {
    const known = this.outcomes.get(workspaceId);
    if (known) return known;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(workspaceId);
        reject(new Error(`no running or failed webhook for workspace ${workspaceId} in time`));
      }, Math.max(0, deadline - Date.now()));
      this.waiters.set(workspaceId, () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return this.outcomes.get(workspaceId) as { outcome: Outcome; message: string | null };
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private receive(body: string, headers: Record<string, string>): void {
    let event: { type?: string; data?: { workspace_id?: string; operational_message?: string | null } };
    try {
      event = this.verifier?.verify(body, headers) as typeof event;
    } catch {
      return; // not from our subscription: never counts (the launch then times out and says which workspace)
    }
    const workspaceId = event?.data?.workspace_id;
    const outcome = event?.type === 'workspace.running' ? 'running' : event?.type === 'workspace.failed' ? 'failed' : null;
    if (!workspaceId || !outcome || this.outcomes.has(workspaceId)) return;
    this.outcomes.set(workspaceId, { outcome, message: event.data?.operational_message ?? null });
    this.waiters.get(workspaceId)?.();
    this.waiters.delete(workspaceId);
  }
}
