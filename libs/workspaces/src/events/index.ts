export * from './workspace-event.entity';
export * from './workspace-event-types';
export * from './workspace-event-subscriber';
export * from './workspace-event-relay.service';
export * from './workspace-event-log.subscriber';
export { appendWorkspaceEvents } from './outbox';
