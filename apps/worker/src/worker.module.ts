import { DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { AuthModule } from '@ws/auth';
import { AppConfig, ConfigModule } from '@ws/common';
import { DatabaseModule } from '@ws/database';
import { LicensingModule } from '@ws/licensing';
import { QueueModule, QueueWorkers } from '@ws/queue';
import { RecordingsModule } from '@ws/recordings';
import { ServerSessionsModule } from '@ws/server-sessions';
import { SettingsModule } from '@ws/settings';
import { StagingModule } from '@ws/staging';
import { UsersModule } from '@ws/users';
import { UserWebhooksFeed, WebhookDispatcher, WebhooksModule, WorkspaceWebhooks } from '@ws/webhooks';
import { WorkspaceEventLog, WorkspaceEventRelay, WorkspacesModule } from '@ws/workspaces';
import { MaintenanceProcessor } from './processors/maintenance.processor';
import { RecordingsProcessor } from './processors/recordings.processor';
import { StagingProcessor } from './processors/staging.processor';
import { WebhooksProcessor } from './processors/webhooks.processor';
import { WorkspaceEventsProcessor } from './processors/workspace-events.processor';
import { WorkspacesProcessor } from './processors/workspaces.processor';

@Module({})
export class WorkerModule {
  static forRoot(overrides: Partial<AppConfig> = {}): DynamicModule {
    return {
      module: WorkerModule,
      imports: [ConfigModule.forRoot(overrides), DiscoveryModule, DatabaseModule, SettingsModule, AuthModule, QueueModule, UsersModule, WorkspacesModule, ServerSessionsModule, StagingModule, RecordingsModule, LicensingModule, WebhooksModule],
      providers: [QueueWorkers, WorkspacesProcessor, MaintenanceProcessor, StagingProcessor, WorkspaceEventRelay, WorkspaceEventsProcessor, WorkspaceEventLog, RecordingsProcessor,
        WorkspaceWebhooks, UserWebhooksFeed, WebhookDispatcher, WebhooksProcessor],
    };
  }
}
