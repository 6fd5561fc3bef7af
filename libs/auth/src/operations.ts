import { Permission } from './permissions';

/**
 * Every operation of the developer API, with the permissions its key must hold (before closure) and
 * whether it writes. A Read Only key is refused every operation with `writes: true`; operations that
 * mint credentials (session tokens, login links, workspace urls) count as writes.
 * Operations marked `idempotent` create something and take an `Idempotency-Key`; others ignore the header.
 * Target-dependent rules (Global Admin targets, running sessions, built-in groups) live in the services.
 */
export interface OperationSpec {
  permissions: readonly Permission[];
  writes: boolean;
  /**
   * A creating operation: it takes an `Idempotency-Key` header (the same key and body replays the first answer and
   * creates nothing; see IdempotencyKeys). Opting an operation in is this one flag.
   */
  idempotent?: true;
}

const AS_USER: Permission[] = ['Users Auth Session', 'User'];

export const OPERATIONS = {
  // Users
  create_user: { permissions: ['Users Create'], writes: true, idempotent: true },
  get_user: { permissions: ['Users View'], writes: false },
  get_users: { permissions: ['Users View'], writes: false },
  update_user: { permissions: ['Users Modify'], writes: true },
  delete_user: { permissions: ['Users Delete', 'Users Modify'], writes: true },
  logout_user: { permissions: ['Users Auth Session'], writes: true },
  get_attributes: { permissions: ['Users View'], writes: false },
  update_user_attributes: { permissions: ['Users Modify'], writes: true },
  // Groups
  add_user_group: { permissions: ['Groups Modify'], writes: true },
  remove_user_group: { permissions: ['Groups Modify'], writes: true },
  // Login and session tokens
  get_login: { permissions: ['Users Auth Session'], writes: true },
  create_session_token: { permissions: ['Users Auth Session'], writes: true, idempotent: true },
  get_session_token: { permissions: ['Users Auth Session'], writes: false },
  get_session_tokens: { permissions: ['Users Auth Session'], writes: false },
  update_session_token: { permissions: ['Users Auth Session'], writes: true },
  delete_session_token: { permissions: ['Users Auth Session'], writes: true },
  delete_session_tokens: { permissions: ['Users Auth Session'], writes: true },
  // Workspaces
  request_workspace: { permissions: AS_USER, writes: true, idempotent: true },
  get_workspace_status: { permissions: AS_USER, writes: true },
  join_workspace: { permissions: AS_USER, writes: true, idempotent: true },
  get_workspaces: { permissions: ['Sessions View'], writes: false },
  destroy_workspace: { permissions: AS_USER, writes: true },
  keepalive: { permissions: AS_USER, writes: true },
  get_workspace_frame_stats: { permissions: AS_USER, writes: false },
  get_workspace_bottleneck_stats: { permissions: AS_USER, writes: false },
  get_workspace_screenshot: { permissions: AS_USER, writes: false },
  exec_command_workspace: { permissions: ['Sessions Modify'], writes: true },
  get_rdp_client_connection_info: { permissions: AS_USER, writes: true },
  // Images, recordings, zones, licensing
  get_images: { permissions: ['Images View'], writes: false },
  get_session_recordings: { permissions: ['Session Recordings View'], writes: false },
  get_sessions_recordings: { permissions: ['Session Recordings View'], writes: false },
  get_zones: { permissions: ['Zones View'], writes: false },
  activate: { permissions: ['Licenses Create'], writes: true, idempotent: true },
  // Staging
  get_staging_configs: { permissions: ['Staging View'], writes: false },
  get_staging_config: { permissions: ['Staging View'], writes: false },
  create_staging_config: { permissions: ['Staging Create'], writes: true, idempotent: true },
  update_staging_config: { permissions: ['Staging Modify'], writes: true },
  delete_staging_config: { permissions: ['Staging Delete'], writes: true },
  // Casting
  get_cast_configs: { permissions: ['Casting View'], writes: false },
  get_cast_config: { permissions: ['Casting View'], writes: false },
  create_cast_config: { permissions: ['Casting Create'], writes: true, idempotent: true },
  update_cast_config: { permissions: ['Casting Modify'], writes: true },
  delete_cast_config: { permissions: ['Casting Delete'], writes: true },
  // Egress
  update_egress_credential: { permissions: ['Egress Credentials Modify', 'Egress Providers Modify'], writes: true, idempotent: true },
  delete_egress_provider_mapping: { permissions: ['Egress Credentials Delete', 'Egress Providers Modify'], writes: true },
  // Webhooks
  create_webhook: { permissions: ['Webhooks Modify'], writes: true, idempotent: true },
  get_webhooks: { permissions: ['Webhooks View'], writes: false },
  update_webhook: { permissions: ['Webhooks Modify'], writes: true },
  delete_webhook: { permissions: ['Webhooks Modify'], writes: true },
  rotate_webhook_secret: { permissions: ['Webhooks Modify'], writes: true },
  get_webhook_deliveries: { permissions: ['Webhooks View'], writes: false },
} as const satisfies Record<string, OperationSpec>;

export type OperationName = keyof typeof OPERATIONS;
