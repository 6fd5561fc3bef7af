import { Global, Module } from '@nestjs/common';
import { JobProducer } from './job-producer';
import { RedisConnections } from './redis-connections';

@Global()
@Module({ providers: [RedisConnections, JobProducer], exports: [RedisConnections, JobProducer] })
export class QueueModule {}
