import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { SessionToken } from '@ws/users/session-token.entity';
import { WorkspacesModule } from '@ws/workspaces';
import { StreamGateway } from './stream-gateway';

@Module({ imports: [TypeOrmModule.forFeature([SessionToken]), WorkspacesModule], providers: [StreamGateway], exports: [StreamGateway] })
export class GatewayModule {}
