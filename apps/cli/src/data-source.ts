import { DataSource } from 'typeorm';
import { loadConfig } from '@ws/common';
import { dataSourceOptions } from '@ws/database';
import { ALL_ENTITIES } from './entities';

/** For the typeorm CLI: migration:generate and the migration check compare every area's entities with the migrations. */
export default new DataSource(dataSourceOptions(loadConfig(), undefined, ALL_ENTITIES));
