import { Module } from '@nestjs/common';
import { DockerHosts } from './docker-hosts';

@Module({
  providers: [DockerHosts],
  exports: [DockerHosts],
})
export class AgentModule {}
