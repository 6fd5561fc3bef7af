export * from './columns';
export * from './database.module';
export { dataSourceOptions } from './data-source';
export { PgNotifications } from './pg-notifications';
export { migrate, ensureDatabase, dropDatabase } from './migrate';
export { findByRef } from './find-by-ref';
export { hydrate, rawQuery, selectColumns } from './raw-query';
