import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { RecordingCaptureModule } from '@ws/recordings';
import { SessionToken } from '@ws/users';
import { WorkspacesModule } from '@ws/workspaces';
import { AudioGateway } from './audio-gateway';
import { StreamAdmission } from './stream-admission';
import { StreamGateway } from './stream-gateway';

@Module({ imports: [TypeOrmModule.forFeature([SessionToken]), WorkspacesModule, RecordingCaptureModule], providers: [StreamAdmission, StreamGateway, AudioGateway], exports: [StreamGateway] })
export class GatewayModule {}
