import { Injectable, Logger } from '@nestjs/common';
import { OnWorkspaceEvent } from './workspace-event-subscriber';
import { WORKSPACE_EVENT_TYPES, WorkspaceEventMessage } from './workspace-event-types';

/**
 * The lifecycle of every workspace in the worker's log (debug level), one line per event; its delivery
 * records (workspace_event_deliveries) are the audit trail of the relay itself.
 */
@Injectable()
export class WorkspaceEventLog {
  private readonly logger = new Logger('WorkspaceEvents');

  @OnWorkspaceEvent({ name: 'event-log', types: WORKSPACE_EVENT_TYPES })
  async record(event: WorkspaceEventMessage): Promise<void> {
    this.logger.debug(`workspace ${event.workspaceId}: ${event.type} (${JSON.stringify(event.payload)})`);
  }
}
