import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AgentModule } from '@ws/agent';
import { Server } from './server.entity';
import { ServersService } from './servers.service';

@Module({ imports: [TypeOrmModule.forFeature([Server]), AgentModule], providers: [ServersService], exports: [ServersService] })
export class ServersModule {}
