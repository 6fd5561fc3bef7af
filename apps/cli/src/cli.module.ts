import { DynamicModule, Module } from '@nestjs/common';
import { AuthModule } from '@ws/auth';
import { ConfigModule } from '@ws/common';
import { DatabaseModule } from '@ws/database';
import { EgressModule } from '@ws/egress';
import { LicensingModule } from '@ws/licensing';
import { QueueModule } from '@ws/queue';
import { ServersModule } from '@ws/servers';
import { SettingsModule } from '@ws/settings';
import { WebhooksModule } from '@ws/webhooks';
import { WorkspacesModule } from '@ws/workspaces';
import { ZonesModule } from '@ws/zones';

/** What the operator's commands need: no HTTP, no queue workers. Configuration is read when it is built. */
@Module({})
export class CliModule {
  static forRoot(): DynamicModule {
    return { module: CliModule, imports: [ConfigModule.forRoot(), DatabaseModule, SettingsModule, AuthModule, QueueModule, WorkspacesModule, ZonesModule, ServersModule, LicensingModule, EgressModule, WebhooksModule] };
  }
}
