import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { RecordingCaptureModule } from '@ws/recordings';
import { ServerSessionsModule } from '@ws/server-sessions';
import { SessionToken } from '@ws/users';
import { WorkspacesModule } from '@ws/workspaces';
import { AudioGateway } from './audio-gateway';
import { StreamAdmission } from './stream-admission';
import { StreamGateway } from './stream-gateway';
import { DesktopConnections } from './desktop-connections';

@Module({ imports: [TypeOrmModule.forFeature([SessionToken]), WorkspacesModule, ServerSessionsModule, RecordingCaptureModule], providers: [StreamAdmission, StreamGateway, AudioGateway, DesktopConnections], exports: [StreamGateway, DesktopConnections] })
export class GatewayModule {}
