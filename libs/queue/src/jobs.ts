/**
 * Every queue and job of the system, the payload each job carries, and how each is retried and repeated.
 * Payloads carry ids, never state: a job reads the current rows when it runs, so a retry or a late run acts
 * on the truth.
 */
export const QUEUES = {
  workspaces: 'workspaces',
  maintenance: 'maintenance',
  /** Long CPU-bound conversions, apart so they never hold back the reaper and reconcilers (RECORDING_CONVERT_CONCURRENCY). */
  recordings: 'recordings',
} as const;
export type QueueName = (typeof QUEUES)[keyof typeof QUEUES];

export type DestroyReason = 'requested' | 'user_deleted' | 'expired' | 'failed' | 'orphaned';

export interface JobPayloads {
  'workspace.provision': { workspaceId: string };
  'workspace.destroy': { workspaceId: string; reason: DestroyReason };
  /** Hands the workspace_events outbox to its subscribers; the rows say what is undelivered, so no payload. */
  'workspace-events.relay': Record<string, never>;
  /** Fills, trims and expires staging pools: one config's, or every config's when no id is given (the schedule). */
  'staging.reconcile': { stagingConfigId?: string };
  /** Turns a captured session recording into a video and thumbnail, then deletes the raw capture. */
  'recording.convert': { recordingId: string };
  'maintenance.purge-expired-credentials': Record<string, never>;
  'maintenance.reap-expired-workspaces': Record<string, never>;
  'maintenance.reconcile-containers': Record<string, never>;
  /** Reads the egress sidecars' health of running workspaces into their operational_message (tunnel down / back up). */
  'maintenance.check-egress-tunnels': Record<string, never>;
  'maintenance.prune-workspace-events': Record<string, never>;
  /** Deletes recordings older than the retention setting; re-enqueues conversions whose job was lost. */
  'maintenance.expire-recordings': Record<string, never>;
  /** Removes Idempotency-Keys older than 24 hours (@ws/auth IdempotencyKeys.expire). */
  'maintenance.expire-idempotency-keys': Record<string, never>;
  /** Deletes finished webhook messages and delivery attempts past their retention. */
  'maintenance.prune-webhooks': Record<string, never>;
  /** Pings every enabled server (ServerHealth); reconciles the containers of each that answers again. */
  'maintenance.check-server-health': Record<string, never>;
  /** Tops up (and trims) the network holders of one server, or of every server that is up (the schedule). */
  'maintenance.fill-network-pools': { serverId?: string };
}
export type JobName = keyof JobPayloads;

export interface JobPolicy {
  queue: QueueName;
  /** Runs of one job before it fails for good (a PermanentFailure ends it at once). */
  attempts: number;
  /** Exponential backoff between attempts, from this delay. */
  backoffMs: number;
  /** Repeated this often, scheduled idempotently at every worker boot (one schedule per job, whatever the replica count). */
  everyMs?: number;
  /** The setting that replaces everyMs when the worker boots (the operator's period). */
  everyMsSetting?: 'SERVER_HEALTH_INTERVAL_MS';
}

/**
 * The one table of retry, backoff and repeat schedules. Repeated jobs run once per attempt: the next
 * repetition is their retry (each reads the rows afresh).
 */
export const JOBS: { [J in JobName]: JobPolicy } = {
  'workspace.provision': { queue: QUEUES.workspaces, attempts: 8, backoffMs: 500 },
  'workspace.destroy': { queue: QUEUES.workspaces, attempts: 8, backoffMs: 500 },
  // Backstop only: the relay also polls for committed events every 200 ms and hears the sequencer's notices.
  'workspace-events.relay': { queue: QUEUES.workspaces, attempts: 1, backoffMs: 500, everyMs: 5_000 },
  // Asked after each config change and assignment; the schedule catches expiry and lost asks.
  'staging.reconcile': { queue: QUEUES.maintenance, attempts: 3, backoffMs: 1000, everyMs: 15_000 },
  // Off the gateway's hot path; a retry starts over from the raw capture (nothing is switched until verified).
  'recording.convert': { queue: QUEUES.recordings, attempts: 5, backoffMs: 5_000 },
  'maintenance.purge-expired-credentials': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 5 * 60_000 },
  'maintenance.reap-expired-workspaces': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 30_000 },
  'maintenance.reconcile-containers': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 60_000 },
  // One container inspect per running workspace with a sidecar (bounded per pass); a no-op query without any.
  'maintenance.check-egress-tunnels': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 10_000 },
  'maintenance.prune-workspace-events': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 60 * 60_000 },
  'maintenance.expire-recordings': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 10 * 60_000 },
  // Keys past 24 hours are no longer replayed whether or not this has run (a new request takes the row over).
  'maintenance.expire-idempotency-keys': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 10 * 60_000 },
  'maintenance.prune-webhooks': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 60 * 60_000 },
  // One run per period across the pool (BullMQ's scheduler); each run is bounded (SERVER_HEALTH_TIMEOUT_MS, one retry).
  'maintenance.check-server-health': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 10_000, everyMsSetting: 'SERVER_HEALTH_INTERVAL_MS' },
  // Asked after each claim; the schedule makes the first holders and catches lost asks. A no-op query with the pool off.
  'maintenance.fill-network-pools': { queue: QUEUES.maintenance, attempts: 1, backoffMs: 500, everyMs: 10_000 },
};

/** Which queue each job runs on. */
export const JOB_QUEUE = Object.fromEntries(Object.entries(JOBS).map(([name, policy]) => [name, policy.queue])) as { [J in JobName]: QueueName };

/** Jobs with a repeat schedule. */
export const SCHEDULED_JOBS = (Object.keys(JOBS) as JobName[]).filter((name) => JOBS[name].everyMs !== undefined);

/** What BullMQ keeps of finished jobs: enough to see recent history, bounded. */
export const JOB_RETENTION = {
  removeOnComplete: { age: 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600 },
};

/** BullMQ options of one run of `name`, from its policy. */
export function jobOptions(name: JobName) {
  const { attempts, backoffMs } = JOBS[name];
  return { attempts, backoff: { type: 'exponential', delay: backoffMs }, ...JOB_RETENTION };
}

/**
 * How often one job may lose its worker (killed mid-job) before its next run gives up cleanly instead of
 * trying again: a job that brings its worker down every time must not take every worker down in turn.
 */
export const MAX_JOB_STALLS = 5;

/** Deterministic ids: a second enqueue of the same work is a no-op while the first is pending. */
export const jobId = {
  provision: (workspaceId: string) => `provision-${workspaceId}`,
  destroy: (workspaceId: string) => `destroy-${workspaceId}`,
  convertRecording: (recordingId: string) => `convert-recording-${recordingId}`,
};
