export * from './image.entity';
export * from './images.service';
export * from './image.mappers';
export * from './images.module';
export * from './image-settings';
