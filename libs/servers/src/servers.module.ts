import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AgentModule } from '@ws/agent/agent.module';
import { Workspace } from '@ws/workspaces/workspace.entity';
import { Server } from './server.entity';
import { ServersService } from './servers.service';

@Module({ imports: [TypeOrmModule.forFeature([Server, Workspace]), AgentModule], providers: [ServersService], exports: [ServersService] })
export class ServersModule {}
