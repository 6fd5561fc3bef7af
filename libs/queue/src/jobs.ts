/**
 * Every queue and job of the system, and the payload each job carries. Payloads carry ids, never state:
 * a job reads the current rows when it runs, so a retry or a late run acts on the truth.
 */
export const QUEUES = {
  workspaces: 'workspaces',
  maintenance: 'maintenance',
} as const;
export type QueueName = (typeof QUEUES)[keyof typeof QUEUES];

export type DestroyReason = 'requested' | 'user_deleted' | 'expired' | 'failed' | 'orphaned';

export interface JobPayloads {
  'workspace.provision': { workspaceId: string };
  'workspace.destroy': { workspaceId: string; reason: DestroyReason };
  /** Fills, trims and expires staging pools: one config's, or every config's when no id is given (the schedule). */
  'staging.reconcile': { stagingConfigId?: string };
  'maintenance.purge-expired-credentials': Record<string, never>;
  'maintenance.reap-expired-workspaces': Record<string, never>;
  'maintenance.reconcile-containers': Record<string, never>;
}
export type JobName = keyof JobPayloads;

/** Which queue each job runs on. */
export const JOB_QUEUE: { [J in JobName]: QueueName } = {
  'workspace.provision': QUEUES.workspaces,
  'workspace.destroy': QUEUES.workspaces,
  'staging.reconcile': QUEUES.maintenance,
  'maintenance.purge-expired-credentials': QUEUES.maintenance,
  'maintenance.reap-expired-workspaces': QUEUES.maintenance,
  'maintenance.reconcile-containers': QUEUES.maintenance,
};

/**
 * How often one job may lose its worker (killed mid-job) before its next run gives up cleanly instead of
 * trying again: a job that brings its worker down every time must not take every worker down in turn.
 */
export const MAX_JOB_STALLS = 5;

/** Deterministic ids: a second enqueue of the same work is a no-op while the first is pending. */
export const jobId = {
  provision: (workspaceId: string) => `provision-${workspaceId}`,
  destroy: (workspaceId: string) => `destroy-${workspaceId}`,
};
