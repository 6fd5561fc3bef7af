// What other libraries and the apps use of @ws/database; everything else is internal to it.
export { BigIntColumn, CreatedAt, NumericColumn, TimestampColumn, UpdatedAt } from './columns';
export { dataSourceOptions } from './data-source';
export { DatabaseModule } from './database.module';
export { findByRef } from './find-by-ref';
export { dropDatabase, migrate } from './migrate';
export { isLockNotAvailable, isLockWaitTimeout } from './lock-waits';
export { PgNotifications } from './pg-notifications';
export { builtOnce, hydrate, rawQuery, selectColumns } from './raw-query';
export {
  creationOrder, DEFAULT_PAGE_LIMIT, decodeCursor, encodeCursor, inIdOrder, keysetPage, listPage, MAX_PAGE_LIMIT, pageOf, PageRequest,
  type KeysetKey, type KeysetList, type Page, type PageAnswer,
} from './keyset-pages';
