/** Operations that create something: the client sends an `Idempotency-Key` with each and reuses it on its retries. */
export const CREATING_OPERATIONS = [
  'request_workspace', 'create_user', 'create_session_token', 'join_workspace', 'create_staging_config', 'create_cast_config',
  'create_webhook', 'activate', 'update_egress_credential',
] as const;

/** Lists that take `limit` and `cursor` and answer `next_cursor`: `client.paginate(...)` walks them. */
export const PAGED_OPERATIONS = [
  'get_users', 'get_workspaces', 'get_images', 'get_cast_configs', 'get_staging_configs', 'get_session_tokens', 'get_webhooks', 'get_webhook_deliveries',
] as const;
