import { Injectable } from '@nestjs/common';

/**
 * "This process just committed outbox events": the worker's relay wakes on it at once instead of at its next poll
 * for events without a position (up to WorkspaceEventRelay's POLL_MS later, 100 ms on average, which every
 * `running` webhook waited). In-process only: PostgreSQL notices from writers would serialise their commits (see
 * WorkspaceEventRelay.poll). A writer in a process without a relay (the api) tells no one, and the poll stays the
 * guarantee for every event.
 */
@Injectable()
export class OutboxSignal {
  private readonly listeners = new Set<() => void>();

  committed(): void {
    for (const listener of this.listeners) listener();
  }

  /** Calls `listener` after each commit; answers the function that stops it. */
  onCommitted(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
}
