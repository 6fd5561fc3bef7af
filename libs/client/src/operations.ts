/** Operations that create something: the client sends an `Idempotency-Key` with each and reuses it on its retries. */
export const CREATING_OPERATIONS = [
  'request_workspace', 'create_user', 'create_session_token', 'join_workspace', 'create_staging_config', 'create_cast_config',
  'create_webhook', 'activate', 'update_egress_credential',
] as const;
