import type { OperationName } from '@ws/auth';

export const DOCUMENT_INFO = {
  title: 'workspace-server developer API',
  version: '1.0.0',
  description: [
    'Every operation is `POST /api/public/<operation>` with a JSON body that carries `api_key` and `api_key_secret`',
    '(or an HTTP Basic Authorization header). Failures answer `{"error_message": …}`; 429 and 503 carry `Retry-After`.',
    'Routes under `/api/client` and `/api/stream` are the browser client\'s. Generated from the code (`npm run openapi`).',
  ].join(' '),
  license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
};

/**
 * Operations that create something: an `Idempotency-Key` header makes a retry safe (issue 22). The client
 * (libs/client) keeps the same list; apps/api/src/openapi/openapi.spec.ts checks the two agree.
 */
export const CREATING_OPERATIONS: readonly string[] = [
  'request_workspace', 'create_user', 'create_session_token', 'join_workspace', 'create_staging_config', 'create_cast_config',
  'create_webhook', 'activate', 'update_egress_credential',
];

/** Lists that take `limit` and `cursor` and answer `next_cursor` (issue 22). */
export const PAGED_OPERATIONS: readonly string[] = [
  'get_users', 'get_workspaces', 'get_images', 'get_cast_configs', 'get_staging_configs', 'get_session_tokens', 'get_webhooks', 'get_webhook_deliveries',
];

/** Operations that answer bytes rather than JSON, by media type (the others: application/octet-stream). */
export const BINARY_ANSWERS: Partial<Record<string, string>> = { get_workspace_screenshot: 'image/jpeg' };

type ErrorAnswer = [status: number, why: string];

const COMMON: ErrorAnswer[] = [
  [400, 'A field is missing, of the wrong type or out of range, or an id names nothing (the message names the field)'],
  [401, 'Missing, unknown, expired or revoked API key, or a wrong secret'],
  [403, 'The key lacks a permission the operation or its target needs'],
  [413, 'The body is larger than the api accepts'],
  [429, 'Too many failed authentications from this address or for this key; see Retry-After'],
  [503, 'PostgreSQL, Redis or a Docker host is unavailable, or no server has room; see Retry-After'],
];

/** The error answers a route may give, by the codes its services throw (docs/errors.md has the mapping). */
export function errorAnswers(operation: OperationName | null, path: string, method: string): ErrorAnswer[] {
  const answers = [...COMMON];
  // Reads of catalog data never conflict; writes and anything about a live workspace (not running yet, gone) may.
  const writes = operation !== null && (!/^get_/.test(operation) || /workspace_|rdp/.test(operation));
  if (operation === null || writes) answers.push([409, 'The request conflicts with the current state (a duplicate, a workspace not running, an Idempotency-Key reused with another body)']);
  if (operation === null) {
    answers.push([404, 'The link, workspace or file names nothing']);
    if (method === 'post' && !path.endsWith('/uploads')) answers.push([415, 'The body is not application/json']);
  }
  return answers.sort(([a], [b]) => a - b);
}
