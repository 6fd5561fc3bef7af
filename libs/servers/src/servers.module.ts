import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AgentModule } from '@ws/agent';
import { Server } from './server.entity';
import { ServerHealth } from './server-health';
import { ServersService } from './servers.service';

@Module({ imports: [TypeOrmModule.forFeature([Server]), AgentModule], providers: [ServersService, ServerHealth], exports: [ServersService, ServerHealth] })
export class ServersModule {}
