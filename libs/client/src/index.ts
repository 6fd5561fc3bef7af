// @workspace-server/client: the typed client of the developer API. Nothing here imports server code.
export { ClientCore, createClient, parseRetryAfter, WorkspaceApiError } from './client';
export type { CallOptions, ClientOptions, ItemOf, OperationMethods, OperationName, PagedOperation, RequestOf, ResponseOf, RetryPolicy, WorkspaceClient } from './client';
export { CREATING_OPERATIONS, PAGED_OPERATIONS } from './operations';
export type { components, operations, paths } from './generated/openapi';
