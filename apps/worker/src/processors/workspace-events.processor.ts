import { Injectable } from '@nestjs/common';
import { JobHandler } from '@ws/queue';
import { WorkspaceEventRelay } from '@ws/workspaces';

@Injectable()
export class WorkspaceEventsProcessor {
  constructor(private readonly relay: WorkspaceEventRelay) {}

  /** The repeat schedule's backstop; commits wake the relay at once through a PostgreSQL notice. */
  @JobHandler('workspace-events.relay')
  relayOutbox() {
    return this.relay.wake();
  }

  @JobHandler('maintenance.prune-workspace-events')
  prune() {
    return this.relay.prune();
  }
}
