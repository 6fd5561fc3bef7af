export * from './errors';
export * from './stream-demux';
export * from './rfb';
export * from './docker-host';
export * from './container-spec';
export * from './workspace-network';
export * from './docker-hosts';
export * from './agent.module';
