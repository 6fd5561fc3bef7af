import { ApiKey, IdempotencyKey } from '@ws/auth';
import { CastConfig } from '@ws/casting';
import { EgressConnection, EgressCredential, EgressCredentialGateway, EgressGateway, EgressProvider } from '@ws/egress';
import { Group, UserGroup } from '@ws/groups';
import { Image, ImageAttribute, ServerTargetRecord } from '@ws/images';
import { License } from '@ws/licensing';
import { PersistentProfile } from '@ws/profiles';
import { SessionRecording } from '@ws/recordings';
import { Server, ServerImage } from '@ws/servers';
import { Setting } from '@ws/settings';
import { StagingConfig } from '@ws/staging';
import { LoginLink, SessionToken, User, UserAttributes, UserEvent } from '@ws/users';
import { Webhook, WebhookAttempt, WebhookFeedCursor, WebhookMessage } from '@ws/webhooks';
import { Workspace, WorkspaceEvent, WorkspaceEventCursor, WorkspaceEventDelivery, WorkspaceEventSequencer } from '@ws/workspaces';
import { Zone } from '@ws/zones';

/**
 * Every entity of every area, for what runs outside the Nest modules: the migration check and generation (the
 * typeorm CLI reads ./data-source) and benchmarks. The running apps load each area's own (its module's forFeature).
 */
export const ALL_ENTITIES = [
  ApiKey, IdempotencyKey, Setting, User, UserAttributes, SessionToken, LoginLink, Group, UserGroup, Zone, Server, ServerImage, Image, ImageAttribute, ServerTargetRecord, Workspace, WorkspaceEvent, WorkspaceEventCursor, WorkspaceEventDelivery, WorkspaceEventSequencer, StagingConfig, CastConfig, SessionRecording, PersistentProfile, License,
  EgressProvider, EgressGateway, EgressCredential, EgressCredentialGateway, EgressConnection,
  UserEvent, Webhook, WebhookMessage, WebhookAttempt, WebhookFeedCursor,
];
