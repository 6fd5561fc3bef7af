import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_PIPE } from '@nestjs/core';
import { AuthModule, OperationGuard } from '@ws/auth';
import { ApiValidationPipe, AppConfig, ConfigModule } from '@ws/common';
import { DatabaseModule } from '@ws/database';
import { QueueModule } from '@ws/queue';
import { ServerSessionsModule } from '@ws/server-sessions';
import { ServersModule } from '@ws/servers';
import { SettingsModule } from '@ws/settings';
import { StagingModule } from '@ws/staging';
import { CastingModule } from '@ws/casting';
import { LicensingModule } from '@ws/licensing';
import { LoggingModule } from '@ws/logging';
import { MetricsModule } from '@ws/metrics';
import { RecordingsModule } from '@ws/recordings';
import { UsersModule } from '@ws/users';
import { ImagesModule } from '@ws/images';
import { WorkspacesModule } from '@ws/workspaces';
import { ZonesModule } from '@ws/zones';
import { EgressModule } from '@ws/egress';
import { ClientConnectController } from './client/client-connect.controller';
import { ClientLoginController } from './client/client-login.controller';
import { ClientSessionController } from './client/client-session.controller';
import { ApiExceptionFilter } from './errors/api-exception.filter';
import { GatewayModule } from './gateway/gateway.module';
import { HealthController } from './health.controller';
import { IdempotentExecution } from './idempotency/idempotent-execution';
import { StorageApiModule } from './storage/storage.module';
import { GroupsController } from './public-api/groups.controller';
import { ImagesController } from './public-api/images.controller';
import { LicensingController } from './public-api/licensing.controller';
import { RecordingsController } from './public-api/recordings.controller';
import { SessionTokensController } from './public-api/session-tokens.controller';
import { StagingController } from './public-api/staging.controller';
import { CastingController } from './public-api/casting.controller';
import { EgressController } from './public-api/egress.controller';
import { ClientCastController } from './client/client-cast.controller';
import { WorkspaceFilesController } from './client/workspace-files.controller';
import { FilesModule } from '@ws/files';
import { UsersController } from './public-api/users.controller';
import { WorkspaceStreamsController } from './public-api/workspace-streams.controller';
import { WebhooksController } from './public-api/webhooks.controller';
import { WorkspacesController } from './public-api/workspaces.controller';
import { WebhooksModule } from '@ws/webhooks';
import { ApiShutdown } from './shutdown';

/**
 * The controllers of the developer API's operations (`POST /api/public/<operation>`): Nest makes them as providers
 * and registerOperationRoutes routes them (public-api/operation-routes.ts).
 */
export const OPERATION_CONTROLLERS = [
  UsersController, GroupsController, SessionTokensController, WorkspacesController, WorkspaceStreamsController, ImagesController, RecordingsController,
  StagingController, CastingController, LicensingController, EgressController, WebhooksController,
];

/** The controllers Nest routes: the browser client's, files and health. */
export const ROUTED_CONTROLLERS = [ClientLoginController, ClientSessionController, ClientConnectController, ClientCastController, WorkspaceFilesController, HealthController];

/** Every controller of the api (the OpenAPI document is generated from these: apps/api/src/openapi). */
export const API_CONTROLLERS = [...OPERATION_CONTROLLERS, ...ROUTED_CONTROLLERS];

@Module({})
export class AppModule {
  static forRoot(overrides: Partial<AppConfig> = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [ConfigModule.forRoot(overrides), MetricsModule.forRoot('api'), LoggingModule.forRoot('api'), DatabaseModule, SettingsModule, AuthModule, QueueModule, UsersModule, ImagesModule, WorkspacesModule, ServerSessionsModule, ZonesModule, ServersModule, GatewayModule, StagingModule, CastingModule, StorageApiModule, RecordingsModule, LicensingModule, EgressModule, FilesModule, WebhooksModule],
      controllers: ROUTED_CONTROLLERS,
      providers: [
        ...OPERATION_CONTROLLERS,
        IdempotentExecution,
        { provide: APP_GUARD, useClass: OperationGuard },
        { provide: APP_FILTER, useClass: ApiExceptionFilter },
        { provide: APP_PIPE, useClass: ApiValidationPipe },
        ApiShutdown,
      ],
    };
  }
}
