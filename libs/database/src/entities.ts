import { ApiKey } from '@ws/auth/api-key.entity';
import { CastConfig } from '@ws/casting/cast-config.entity';
import { EgressConnection, EgressCredential, EgressCredentialGateway, EgressGateway, EgressProvider } from '@ws/egress/egress.entities';
import { Group, UserGroup } from '@ws/groups/group.entity';
import { Image, ImageAttribute } from '@ws/images/image.entity';
import { ServerTargetRecord } from '@ws/images/server-target.entity';
import { License } from '@ws/licensing/license.entity';
import { PersistentProfile } from '@ws/profiles/persistent-profile.entity';
import { Server } from '@ws/servers/server.entity';
import { Setting } from '@ws/settings/setting.entity';
import { StagingConfig } from '@ws/staging/staging-config.entity';
import { SessionRecording } from '@ws/recordings/session-recording.entity';
import { LoginLink } from '@ws/users/login-link.entity';
import { SessionToken } from '@ws/users/session-token.entity';
import { UserAttributes } from '@ws/users/user-attributes.entity';
import { User } from '@ws/users/user.entity';
import { WorkspaceEvent, WorkspaceEventCursor, WorkspaceEventDelivery } from '@ws/workspaces/events/workspace-event.entity';
import { Workspace } from '@ws/workspaces/workspace.entity';
import { Zone } from '@ws/zones/zone.entity';

/** Every entity of every area; the one list the data source, the migration check and the tests share. */
export const ALL_ENTITIES = [
  ApiKey, Setting, User, UserAttributes, SessionToken, LoginLink, Group, UserGroup, Zone, Server, Image, ImageAttribute, ServerTargetRecord, Workspace, WorkspaceEvent, WorkspaceEventCursor, WorkspaceEventDelivery, StagingConfig, CastConfig, SessionRecording, PersistentProfile, License,
  EgressProvider, EgressGateway, EgressCredential, EgressCredentialGateway, EgressConnection,
];
