import { DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { AuthModule } from '@ws/auth';
import { AppConfig, ConfigModule } from '@ws/common';
import { DatabaseModule } from '@ws/database';
import { LicensingModule } from '@ws/licensing';
import { LoggingModule } from '@ws/logging';
import { MetricsModule } from '@ws/metrics';
import { QueueModule, QueueWorkers } from '@ws/queue';
import { RecordingsModule } from '@ws/recordings';
import { ServerSessionsModule } from '@ws/server-sessions';
import { ServersModule } from '@ws/servers';
import { SettingsModule } from '@ws/settings';
import { StagingModule } from '@ws/staging';
import { UsersModule } from '@ws/users';
import { UserWebhooksFeed, WebhookDispatcher, WebhooksModule, WorkspaceWebhooks } from '@ws/webhooks';
import { WorkspaceEventLog, WorkspaceEventRelay, WorkspacesModule } from '@ws/workspaces';
import { FleetMetrics } from './metrics/fleet-metrics';
import { WorkerReadiness } from './health/worker-readiness';
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
      imports: [ConfigModule.forRoot(overrides), MetricsModule.forRoot('worker'), LoggingModule.forRoot('worker'), DiscoveryModule, DatabaseModule, SettingsModule, AuthModule, QueueModule, UsersModule, ServersModule, WorkspacesModule, ServerSessionsModule, StagingModule, RecordingsModule, LicensingModule, WebhooksModule],
      providers: [QueueWorkers, WorkspacesProcessor, MaintenanceProcessor, StagingProcessor, WorkspaceEventRelay, WorkspaceEventsProcessor, WorkspaceEventLog, RecordingsProcessor,
        WorkspaceWebhooks, UserWebhooksFeed, WebhookDispatcher, WebhooksProcessor, FleetMetrics, WorkerReadiness],
    };
  }
}
