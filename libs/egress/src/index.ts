export * from './egress.entities';
export * from './egress-views';
export * from './egress.mappers';
export * from './egress-catalog.service';
export * from './egress-credentials.service';
export * from './egress-connections.service';
export * from './egress.module';
export * from './dto/egress.requests';
