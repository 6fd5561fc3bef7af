import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AgentModule } from '@ws/agent';
import { Server } from './server.entity';
import { ServerHealth } from './server-health';
import { ServerImage } from './server-image.entity';
import { ServerInventory } from './server-inventory';
import { ImageDistribution } from './image-distribution';
import { ServersService } from './servers.service';

@Module({
  imports: [TypeOrmModule.forFeature([Server, ServerImage]), AgentModule],
  providers: [ServersService, ServerHealth, ServerInventory, ImageDistribution],
  exports: [ServersService, ServerHealth, ServerInventory, ImageDistribution],
})
export class ServersModule {}
