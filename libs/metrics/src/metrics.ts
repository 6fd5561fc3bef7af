import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Every metric of this service starts with this (Prometheus naming: base units, `_total`, `_seconds`). */
export const METRIC_PREFIX = 'workspace_server_';

/** Seconds, from a fast request to a slow Docker call. */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds, from a quick job to a long provision or conversion. */
const JOB_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];
/** Seconds from a workspace's request to its `running`. */
const PROVISION_BUCKETS = [0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 300];

/** Runs before each scrape to set figures read at scrape time (queue depths, rows in PostgreSQL). */
export type ScrapeCollector = () => Promise<void>;

/**
 * The metric objects of one process, in a registry of its own (one per api or worker; the e2e tests run both in
 * one process, each with its own). Every metric is defined here, so a process shows the whole set: a figure moves
 * in the process that does the work (docs/operations.md says which).
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly collectors: Array<{ name: string; collect: ScrapeCollector }> = [];

  // api: HTTP
  readonly httpRequests = this.counter('http_requests_total', 'Answered HTTP requests by operation (or route) and status code', ['operation', 'status_code']);
  readonly httpRequestDuration = this.histogram('http_request_duration_seconds', 'Time from a request to its answer, by operation (or route)', ['operation'], REQUEST_BUCKETS);
  readonly authFailures = this.counter('authentication_failures_total', 'Requests refused for their credentials (401), by operation (or route)', ['operation']);
  readonly rateLimited = this.counter('rate_limited_requests_total', 'Requests refused by a rate limit (429), by operation (or route)', ['operation']);
  readonly dependencyOutages = this.counter('dependency_outages_total', 'Requests answered 503 because a dependency was unavailable, by dependency', ['dependency']);
  /** Wired by the idempotency keys (a stored answer replayed for a repeated Idempotency-Key). */
  readonly idempotentReplays = this.counter('idempotent_replays_total', 'Requests answered with the stored answer of an earlier request with the same Idempotency-Key', ['operation']);
  // api: stream gateway
  readonly streamConnections = this.gauge('stream_connections', 'Open stream (VNC over websocket) connections of this process');
  readonly streamBytes = this.counter('stream_bytes_total', 'Bytes through the stream gateway, by direction (to_client, from_client)', ['direction']);

  // worker: jobs and queues
  readonly jobs = this.counter('jobs_total', 'Finished job runs by queue, job and outcome (completed, failed, retried, handed_back)', ['queue', 'job', 'outcome']);
  readonly jobDuration = this.histogram('job_duration_seconds', 'Time a job run took, by queue and job', ['queue', 'job'], JOB_BUCKETS);
  readonly queueJobs = this.gauge('queue_jobs', 'Jobs in each queue by state (waiting, active, delayed, failed), read at scrape', ['queue', 'state']);
  // worker: workspaces and servers (read from PostgreSQL at scrape)
  readonly provisionDuration = this.histogram('workspace_provision_duration_seconds', 'Time from a workspace\'s request to running, by kind (cold, staged)', ['kind'], PROVISION_BUCKETS);
  readonly workspaces = this.gauge('workspaces', 'Workspaces that are not deleted, by status and server', ['status', 'server']);
  readonly serverCoresUsed = this.gauge('server_cores_used', 'Cores reserved by starting, running and stopping workspaces, by server', ['server']);
  readonly serverUp = this.gauge('server_up', 'Whether an enabled server answered its last health check (1) or is marked down (0)', ['server']);
  readonly serverCoresOffered = this.gauge('server_cores_offered', 'Cores a server offers to placement (cores times CPU overcommit), enabled servers', ['server']);
  readonly serverMemoryUsed = this.gauge('server_memory_used_bytes', 'Memory reserved by starting, running and stopping workspaces, by server', ['server']);
  readonly serverMemoryOffered = this.gauge('server_memory_offered_bytes', 'Memory a server offers to placement (memory times memory overcommit), enabled servers', ['server']);
  // staging pools (names after Coder's prebuilt-workspace metrics)
  readonly stagedDesired = this.gauge('staged_workspaces_desired', 'Staged workspaces a staging config asks for (num_sessions), by pool (config id)', ['pool']);
  readonly stagedReady = this.gauge('staged_workspaces_ready', 'Unassigned staged workspaces running and claimable, by pool', ['pool']);
  readonly stagedStarting = this.gauge('staged_workspaces_starting', 'Unassigned staged workspaces still starting, by pool', ['pool']);
  readonly networkHolders = this.gauge('network_holders', 'Network holders (namespaces made in advance for launches), by server and state: free or claimed', ['server', 'state']);
  readonly stagedCreated = this.counter('staged_workspaces_created_total', 'Staged workspaces recorded to fill a pool');
  readonly stagedFailed = this.counter('staged_workspaces_failed_total', 'Staged workspaces removed from their pool because they failed');
  readonly stagedClaimed = this.counter('staged_workspaces_claimed_total', 'Launches answered with a staged workspace');
  readonly stagedClaimDuration = this.histogram('staged_workspace_claim_duration_seconds', 'Time a launch took to find and claim a staged workspace (claims that found one)', [], REQUEST_BUCKETS);
  // recordings
  readonly recordingConversions = this.counter('recording_conversions_total', 'Recording conversions by outcome (converted, failed, retried)', ['outcome']);
  readonly recordingConversionDuration = this.histogram('recording_conversion_duration_seconds', 'Time a successful recording conversion took', [], JOB_BUCKETS);
  // webhooks
  /** Wired by the webhook delivery (libs/webhooks). */
  readonly webhookDeliveries = this.counter('webhook_deliveries_total', 'Webhook delivery attempts by outcome (delivered, failed, retried)', ['outcome']);
  /** Wired by the webhook delivery (libs/webhooks). */
  readonly webhookDeliveryDuration = this.histogram('webhook_delivery_duration_seconds', 'Time a webhook delivery attempt took, by outcome', ['outcome'], REQUEST_BUCKETS);

  constructor(options: { defaultMetrics?: boolean } = {}) {
    // Node's own figures (CPU, memory, event loop lag, GC, handles), with our prefix.
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: METRIC_PREFIX });
  }

  /**
   * `collect` runs before every scrape, at most `timeoutMs`; a failure (PostgreSQL or Redis down) is logged by the
   * caller's `onError` and leaves the figures it sets reset, never stale.
   */
  onScrape(name: string, collect: ScrapeCollector): void {
    this.collectors.push({ name, collect });
  }

  /** The text exposition: scrape-time collectors first (each bounded), then every metric. */
  async exposition(options: { timeoutMs?: number; onError?: (name: string, error: Error) => void } = {}): Promise<string> {
    const timeoutMs = options.timeoutMs ?? 5000;
    await Promise.all(this.collectors.map(async ({ name, collect }) => {
      try {
        await withTimeout(collect(), timeoutMs, `${name} took longer than ${timeoutMs} ms`);
      } catch (err) {
        options.onError?.(name, err as Error);
      }
    }));
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private counter<L extends string>(name: string, help: string, labelNames: L[] = []): Counter<L> {
    return new Counter({ name: METRIC_PREFIX + name, help, labelNames, registers: [this.registry] });
  }

  private gauge<L extends string>(name: string, help: string, labelNames: L[] = []): Gauge<L> {
    return new Gauge({ name: METRIC_PREFIX + name, help, labelNames, registers: [this.registry] });
  }

  private histogram<L extends string>(name: string, help: string, labelNames: L[], buckets: number[]): Histogram<L> {
    return new Histogram({ name: METRIC_PREFIX + name, help, labelNames, buckets, registers: [this.registry] });
  }
}

/** Seconds since `start` (a `performance.now()` reading): what histograms observe. */
export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000;
}

/** `promise`, or a rejection with `message` once `ms` passed (the timer cleared either way). */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
