export * from './server.entity';
export * from './servers.service';
export * from './servers.module';
