import { SetMetadata } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { WorkspaceEventMessage, WorkspaceEventType } from './workspace-event-types';

export const WORKSPACE_EVENT_SUBSCRIBER_KEY = 'ws:workspace-event-subscriber';

export interface WorkspaceEventSubscriberOptions {
  /** Stable name: the relay keeps this subscriber's position in the outbox under it. */
  name: string;
  /** The event types it wants; the others pass it by. */
  types: readonly WorkspaceEventType[];
  /** Deliveries of one event before the relay gives up on it (recorded as a failed delivery) and moves on. */
  attempts?: number;
  /** Wait before the second attempt, doubling after each further failure (at most a minute). */
  backoffMs?: number;
}

/**
 * The handler gets each event once its transaction committed, in outbox order, at least once. `tx` is the
 * relay's transaction, which also advances this subscriber's cursor: writes made through it happen exactly
 * once; anything else (a job enqueued, a request sent) must be idempotent, since a worker killed before the
 * commit means the event is delivered again. Throwing makes the relay retry the event later (backoff),
 * holding back the events after it.
 */
export type WorkspaceEventHandler = (event: WorkspaceEventMessage, tx: EntityManager) => Promise<void>;

/** Marks a provider method (a WorkspaceEventHandler) of the worker as a subscriber of the workspace event outbox. */
export const OnWorkspaceEvent = (options: WorkspaceEventSubscriberOptions) => SetMetadata(WORKSPACE_EVENT_SUBSCRIBER_KEY, options);

/** Retry delay after `attempts` failures. */
export function retryDelayMs(backoffMs: number, attempts: number): number {
  return Math.min(60_000, backoffMs * 2 ** Math.max(0, attempts - 1));
}
