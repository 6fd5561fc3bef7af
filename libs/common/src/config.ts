import { plainToInstance, Transform } from 'class-transformer';
import { isIP } from 'node:net';
import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Matches, Max, Min, validateSync, ValidateBy } from 'class-validator';

const toInt = ({ value }: { value: unknown }) => (value === undefined || value === '' ? undefined : Number(value));
const toBool = ({ value }: { value: unknown }) => (value === 'true' || value === '1' ? true : value === 'false' || value === '0' || value === '' ? false : value);
/** A key variable: empty (the feature's default) or at least 32 characters. */
const IsEmptyOrSecret = () =>
  ValidateBy({ name: 'isEmptyOrLong', validator: { validate: (v: unknown) => v === '' || (typeof v === 'string' && v.length >= 32), defaultMessage: () => 'must be empty or at least 32 characters' } });
/** An image setting: empty, or a Docker image reference (repository, optional tag, optional digest). */
const IsEmptyOrImageReference = () =>
  Matches(/^([a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_.-]{1,128})?(@sha256:[a-f0-9]{64})?)?$/, { message: 'must be empty or a Docker image reference' });
/** The license feature names (libs/licensing LICENSE_FEATURES, which this library cannot import). */
const LICENSE_FEATURE = '(auto_scaling|branding|session_staging|session_casting|log_forwarding|developer_api|inject_ssh_keys|saml|ldap|session_sharing|login_banner|url_categorization|usage_limit)';

/**
 * Process configuration, read once from the environment at boot. Every field names its variable;
 * a bad value stops the process with a message that names the variable (see loadConfig).
 */
export class AppConfig {
  /** Interface the api listens on. */
  @IsString() API_HOST = '127.0.0.1';
  @Transform(toInt) @IsInt() @Min(0) @Max(65535) API_PORT = 8080;
  /** Address end users' browsers reach the api at; workspace and login urls are built on it. */
  @Matches(/^https?:\/\/[^/\s]+$/, { message: 'must be an http(s) origin without a trailing slash' })
  PUBLIC_BASE_URL = 'http://127.0.0.1:8080';
  @Transform(toInt) @IsInt() @Min(1024) @Max(64 * 1024 * 1024) MAX_BODY_BYTES = 1024 * 1024;
  /** The queue dashboard at /admin/queues (API keys holding Queues Admin, by HTTP Basic); false: not served at all. */
  @Transform(toBool) @IsBoolean() QUEUE_DASHBOARD = true;

  @IsString() DATABASE_HOST = '127.0.0.1';
  @Transform(toInt) @IsInt() @Min(1) @Max(65535) DATABASE_PORT = 5432;
  @IsString() DATABASE_USER = 'postgres';
  @IsOptional() @IsString() DATABASE_PASSWORD?: string;
  @Matches(/^[a-z_][a-z0-9_]{0,62}$/, { message: 'must be a lowercase PostgreSQL identifier' })
  DATABASE_NAME = 'workspace_server';
  @Transform(toInt) @IsInt() @Min(1) @Max(200) DATABASE_POOL_SIZE = 10;
  /**
   * Bound on waiting for PostgreSQL or Redis: connecting, one SQL statement, one Redis command. Past it the
   * request answers 503 with Retry-After instead of hanging while a dependency is down or stalled.
   */
  @Transform(toInt) @IsInt() @Min(100) @Max(120_000) DEPENDENCY_TIMEOUT_MS = 5000;

  @Matches(/^rediss?:\/\//, { message: 'must be a redis:// or rediss:// url' }) REDIS_URL = 'redis://127.0.0.1:6379';
  /** Prefix for every Redis key and queue of this deployment (tests use their own). */
  @Matches(/^[A-Za-z0-9_.-]{1,64}$/, { message: 'must be 1-64 characters of [A-Za-z0-9_.-]' }) REDIS_PREFIX = 'ws';

  /**
   * Proxies (comma-separated IPs or CIDRs) whose X-Forwarded-For is believed for the client's address. Empty
   * (the default): the socket's address, so a client cannot pick the address its failed logins are counted on.
   */
  @ValidateBy({ name: 'isAddressList', validator: { validate: isAddressList, defaultMessage: () => 'must be comma-separated IP addresses or CIDRs' } })
  TRUSTED_PROXIES = '';
  /**
   * Where the api verifies the captcha token of a cast link with require_recaptcha (form post of secret,
   * response and remoteip; answers JSON {success}). Tests point it at a verify server of their own.
   */
  @Matches(/^https?:\/\/\S+$/, { message: 'must be an http(s) url' }) RECAPTCHA_VERIFY_URL = 'https://www.google.com/recaptcha/api/siteverify';
  /** The captcha script the browser client loads for a cast link with require_recaptcha (told by the cast info route). */
  @Matches(/^https?:\/\/\S+$/, { message: 'must be an http(s) url' }) RECAPTCHA_SCRIPT_URL = 'https://www.google.com/recaptcha/api.js';
  /** Failed authentications one source address may make per AUTH_FAILURE_WINDOW_SECONDS before it gets 429. */
  @Transform(toInt) @IsInt() @Min(1) @Max(1_000_000) AUTH_FAILURES_PER_ADDRESS = 20;
  /** Failed authentications against one api_key (from any address) per window before the key gets 429. */
  @Transform(toInt) @IsInt() @Min(1) @Max(1_000_000) AUTH_FAILURES_PER_KEY = 100;
  @Transform(toInt) @IsInt() @Min(1) @Max(86_400) AUTH_FAILURE_WINDOW_SECONDS = 60;
  /** How long an address or key that went over its limit is refused (429 with Retry-After). */
  @Transform(toInt) @IsInt() @Min(1) @Max(86_400) AUTH_BLOCK_SECONDS = 60;
  /**
   * How long an unknown api_key is remembered (refused without a query). A key created meanwhile evicts it at
   * once through its insert notice; 0 remembers nothing.
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(3600) AUTH_UNKNOWN_KEY_CACHE_SECONDS = 10;
  /**
   * How long a request waits for the first request with the same Idempotency-Key to answer before it is answered
   * 409 "in progress" (then retried by the client).
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(60_000) IDEMPOTENCY_WAIT_MS = 10_000;

  /**
   * Security options that weaken the workspace sandbox which images' run_config may still use (comma-separated;
   * empty: none). Checked when an image is saved and again at launch. Never privileged or no-new-privileges:false.
   */
  @Matches(/^((seccomp=unconfined|apparmor=unconfined|label=disable|systempaths=unconfined)(,(seccomp=unconfined|apparmor=unconfined|label=disable|systempaths=unconfined))*)?$/, {
    message: 'must be a comma-separated list of seccomp=unconfined, apparmor=unconfined, label=disable, systempaths=unconfined (or empty)',
  })
  WORKSPACE_SECURITY_OPTS_ALLOWED = '';

  /** Labels every container this deployment creates, so reconcilers never touch another deployment's. */
  @Matches(/^[A-Za-z0-9_.-]{1,64}$/, { message: 'must be 1-64 characters of [A-Za-z0-9_.-]' }) DEPLOYMENT_ID = 'default';

  /** Object storage for profiles and recordings: file:///abs/path or a relative file:// path. */
  @Matches(/^(file|s3):\/\//, { message: 'must be a file:// or s3:// url' }) STORAGE_URL = 'file://./data/storage';
  /**
   * Key of the HMAC-signed download links of a file:// store (at least 32 characters). Empty (the default): a
   * random key the store keeps in its root as .signing-key, shared by the api and worker using that directory.
   */
  @IsEmptyOrSecret()
  STORAGE_SIGNING_SECRET = '';
  /**
   * Key (at least 32 characters) that encrypts server images' stored passwords (AES-256-GCM, issue 14). Empty (the
   * default): server images can be made, but not with a stored password; changing it makes stored passwords unreadable.
   */
  @IsEmptyOrSecret()
  SERVER_CREDENTIALS_KEY = '';
  /**
   * Docker image of the containers that reach RDP and SSH servers (the bridge: a streamed desktop running xfreerdp or
   * ssh) and relay native RDP clients: the reference desktop image (npm start and npm test set its tag). Empty: RDP and
   * SSH server images cannot be requested (VNC servers need no container).
   */
  @IsEmptyOrImageReference()
  SERVER_BRIDGE_IMAGE = '';
  /**
   * Docker image of the egress sidecars (issue 21): a workspace that joined a gateway whose provider runs in a sidecar
   * (key_pair_tunnel: WireGuard) gets one, and its container joins the sidecar's network namespace. npm start and
   * npm test build it (scripts/build-egress-image.sh). Empty: such launches fail with a message that says so.
   */
  @IsEmptyOrImageReference()
  EGRESS_IMAGE = '';
  /**
   * Network holders per server and port set (docs/decisions/workspaces.md, "Network holders"): small containers kept
   * running on the isolated workspace network, whose namespace a launch's container joins instead of making its own
   * (Docker's network setup is a third of a cold start). 0: off, every container makes its own.
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(64) NETWORK_POOL_SIZE = 0;
  /** The image network holders run (`sleep infinity`, nothing else); empty: EGRESS_IMAGE. Neither set: no holders. */
  @IsEmptyOrImageReference()
  NETWORK_POOL_IMAGE = '';
  /**
   * Docker network of bridge and relay containers. Not the isolated workspace network: they exist to reach servers on
   * private networks. Default `bridge` (Docker's default network); an image restricted to a network uses its own.
   */
  @Matches(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, { message: 'must be a Docker network name' }) SERVER_BRIDGE_NETWORK = 'bridge';
  /**
   * Server images' targets and request overrides on private networks (10/8, 172.16/12, 192.168/16, 100.64/10,
   * fc00::/7): refused unless true. Loopback, link-local and metadata addresses are refused either way.
   */
  @Transform(toBool) @IsBoolean() SERVER_TARGETS_ALLOW_PRIVATE = false;
  /**
   * Server targets allowed although private, loopback or link-local (comma-separated addresses or CIDRs, e.g.
   * 127.0.0.0/8 for a server on the Docker host itself). Cloud metadata, unspecified, multicast and reserved
   * addresses are never allowed. Empty (the default): none.
   */
  @ValidateBy({ name: 'isAddressList', validator: { validate: isAddressList, defaultMessage: () => 'must be comma-separated IP addresses or CIDRs' } })
  SERVER_TARGETS_ALLOW = '';
  /**
   * Webhook receivers (issue 22) on loopback, private and link-local addresses: refused unless true, at
   * create_webhook/update_webhook and again at each delivery after the name is resolved. Cloud metadata, unspecified,
   * multicast and reserved addresses are refused either way.
   */
  @Transform(toBool) @IsBoolean() WEBHOOK_ALLOW_PRIVATE_ADDRESSES = false;
  /** First retry delay of a failed webhook delivery, ms; each further retry waits 4 times longer, at most 6 hours. */
  @Transform(toInt) @IsInt() @Min(10) @Max(3_600_000) WEBHOOK_RETRY_BASE_MS = 5000;
  /** Delivery attempts of one message before it is given up (11 with the defaults: about 25 hours). */
  @Transform(toInt) @IsInt() @Min(1) @Max(50) WEBHOOK_MAX_ATTEMPTS = 11;
  /** Worker: webhook endpoints served at once by one worker process (each endpoint is served by one worker at a time). */
  @Transform(toInt) @IsInt() @Min(1) @Max(1000) WEBHOOK_CONCURRENCY = 32;
  /** How long a credential from get_rdp_client_connection_info admits a new connection to the workspace's RDP relay. */
  @Transform(toInt) @IsInt() @Min(30) @Max(86_400) RDP_CLIENT_CREDENTIAL_TTL_SECONDS = 300;
  /** S3-compatible endpoint for s3:// urls (http(s)://host[:port]); empty: AWS's own endpoint for S3_REGION. */
  @Matches(/^(https?:\/\/[^/\s]+\/?)?$/, { message: 'must be empty or an http(s) origin' }) S3_ENDPOINT = '';
  @Matches(/^[a-z0-9-]{1,32}$/, { message: 'must be a region name such as us-east-1' }) S3_REGION = 'us-east-1';
  /** Path-style addressing (endpoint/bucket/key), which most self-hosted S3-compatible stores need. */
  @Transform(toBool) @IsBoolean() S3_FORCE_PATH_STYLE = false;
  /** Static credentials for s3:// (both or neither); empty: the SDK's default chain (environment, files, instance role). */
  @IsString() S3_ACCESS_KEY_ID = '';
  @IsString() S3_SECRET_ACCESS_KEY = '';
  /** Multipart part size for uploads to s3://; at most two parts are held in memory per upload. */
  @Transform(toInt) @IsInt() @Min(5) @Max(512) S3_PART_SIZE_MB = 8;

  /** Persistent profiles larger than this are not saved (the workspace's status says so); never truncated. */
  @Transform(toInt) @IsInt() @Min(1) @Max(1_048_576) PROFILE_MAX_MB = 2048;
  /**
   * Bandwidth cap of one profile save or restore, MiB/s (0: none), so a large home does not saturate the link
   * to the store for the other workspaces.
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(100_000) PROFILE_SYNC_MAX_MBPS = 0;

  /** Where the gateway spools a recording's segments before they are uploaded (local disk of each api process). */
  @IsString() RECORDING_SPOOL_DIR = './data/recording-spool';
  /** A recording's raw capture is cut into segments of about this size (and at least every RECORDING_SEGMENT_SECONDS). */
  @Transform(toInt) @IsInt() @Min(1) @Max(512) RECORDING_SEGMENT_MB = 16;
  @Transform(toInt) @IsInt() @Min(1) @Max(3600) RECORDING_SEGMENT_SECONDS = 60;
  /** Frames per second of converted recordings. */
  @Transform(toInt) @IsInt() @Min(1) @Max(30) RECORDING_FPS = 5;
  /** Worker: recordings converted at once per worker process (each runs one ffmpeg encode, about one core). */
  @Transform(toInt) @IsInt() @Min(1) @Max(16) RECORDING_CONVERT_CONCURRENCY = 1;
  /** Recordings older than this many days are deleted (0: kept forever). */
  @Transform(toInt) @IsInt() @Min(0) @Max(36_500) RECORDING_RETENTION_DAYS = 30;
  /** Lifetime of pre-authorized recording download links (preauth_download_link), seconds. */
  @Transform(toInt) @IsInt() @Min(10) @Max(7 * 24 * 3600) RECORDING_LINK_TTL_SECONDS = 3600;

  /**
   * Length of one minute of the idle_disconnect client setting, ms. Always 60000 in a deployment; tests shorten it
   * so an idle disconnect happens within seconds. The gateway checks idleness every tenth of it (at most every 5 s).
   */
  @Transform(toInt) @IsInt() @Min(100) @Max(60_000) IDLE_DISCONNECT_MINUTE_MS = 60_000;

  /**
   * Worker: how often every enabled server's Docker engine is pinged (job maintenance.check-server-health). A server
   * that fails a check and its one retry is marked down (placement skips it) until a check succeeds again.
   */
  @Transform(toInt) @IsInt() @Min(200) @Max(600_000) SERVER_HEALTH_INTERVAL_MS = 10_000;
  /** Worker: the bound of one health ping (the retry gets as long again). */
  @Transform(toInt) @IsInt() @Min(100) @Max(60_000) SERVER_HEALTH_TIMEOUT_MS = 3000;

  @IsIn(['error', 'warn', 'log', 'debug', 'verbose']) LOG_LEVEL = 'log';
  /** `json` (one JSON object a line) or `pretty` (for a human); unset: pretty on a terminal, JSON otherwise. */
  @IsOptional() @IsIn(['json', 'pretty']) LOG_FORMAT?: string;
  /** Append the log lines (JSON) to this file instead of writing them to standard output; unset: standard output. */
  @IsOptional() @IsString() LOG_FILE?: string;
  /** Interface of the Prometheus listener (GET /metrics), never the public port's: keep it on a private address. */
  @IsString() METRICS_HOST = '127.0.0.1';
  /** Port of the Prometheus listener; unset: 9464 for the api, 9465 for the worker; 0: no listener. */
  @IsOptional() @Transform(toInt) @IsInt() @Min(0) @Max(65535) METRICS_PORT?: number;
  /** Worker: concurrent jobs per queue in one process. */
  @Transform(toInt) @IsInt() @Min(1) @Max(64) WORKER_CONCURRENCY = 4;
  /**
   * How long a staging pool's refill waits after one of its desktops is handed out, ms (0: at once): the new
   * desktop's boot then does not take the host's CPU while the claimant's page, stream and first picture come up.
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(60_000) STAGING_REFILL_DELAY_MS = 1000;
  /**
   * Worker: a running job's lock, renewed at half this while the worker lives. A job whose worker died is
   * taken over by another worker within about 1.5 times this (lock expiry plus one stall check).
   */
  @Transform(toInt) @IsInt() @Min(1000) @Max(600_000) WORKER_LOCK_MS = 5000;
  /**
   * Worker shutdown (SIGTERM): running jobs get this long to finish; the rest are handed back to the queue
   * for another worker to take at once, and the process exits shortly after.
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(600_000) WORKER_SHUTDOWN_GRACE_MS = 20_000;
  /**
   * Api shutdown (SIGTERM, SIGINT): /api/health answers 503 at once and the api keeps serving this long, so a load
   * balancer's health checks take it out of rotation before it stops taking requests; then requests in flight
   * finish, and only then its connections to PostgreSQL and Redis close. 0 (the default): no wait, for a single api.
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(120_000) API_SHUTDOWN_DRAIN_MS = 0;

  /**
   * Issuer public keys that `activate` verifies activation keys with: comma-separated, each an Ed25519 public key
   * as `license keygen` prints it (raw 32 bytes in base64), an SPKI DER in base64, or a PEM (`\n` escapes allowed).
   * Several allow rotating the issuer key. Empty (the default): no key is accepted and the free tier applies. The
   * api and worker refuse to start when an entry is not an Ed25519 public key.
   */
  @Matches(/^[A-Za-z0-9+/=_\-,\s\\]*$/, { message: 'must be comma-separated Ed25519 public keys (base64 or PEM)' }) LICENSE_PUBLIC_KEYS = '';
  /** Concurrent workspaces (staged included) a deployment without a valid, unexpired license may run: the free tier. */
  @Transform(toInt) @IsInt() @Min(0) @Max(1_000_000) UNLICENSED_SESSION_LIMIT = 5;
  /**
   * License features the free tier has (comma-separated names of the License `features`; empty: none). The API
   * itself (developer_api) is the product, so the default keeps it; staging, casting, SSO and the rest need a license.
   */
  @Matches(new RegExp(`^(${LICENSE_FEATURE}(,${LICENSE_FEATURE})*)?$`), { message: 'must be comma-separated license feature names (or empty)' })
  UNLICENSED_FEATURES = 'developer_api,inject_ssh_keys,session_sharing,login_banner';

  /**
   * Largest file the control panel may upload into a workspace's ~/Uploads, MiB. A declared Content-Length above
   * it is refused (413) before the body is read; uploads stream through, never held in memory.
   */
  @Transform(toInt) @IsInt() @Min(1) @Max(1_048_576) UPLOAD_MAX_MB = 1024;
  /** Largest file of a workspace's ~/Downloads that may be downloaded, MiB (413 above); streamed, never held in memory. */
  @Transform(toInt) @IsInt() @Min(1) @Max(1_048_576) DOWNLOAD_MAX_MB = 1024;
  /** Most entries the Downloads list shows (the rest are left off and the answer says so). */
  @Transform(toInt) @IsInt() @Min(1) @Max(10_000) DOWNLOAD_LIST_MAX = 500;
}

/** The entries of a comma-separated list (TRUSTED_PROXIES, SERVER_TARGETS_ALLOW). */
export function addressList(value: string): string[] {
  return value.split(',').map((entry) => entry.trim()).filter(Boolean);
}

function isAddressList(value: unknown): boolean {
  return typeof value === 'string' && addressList(value).every(isAddressOrCidr);
}

function isAddressOrCidr(entry: string): boolean {
  const [address, bits, ...rest] = entry.split('/');
  const family = isIP(address);
  if (!family || rest.length) return false;
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
}

export class ConfigError extends Error {}

export function loadConfig(env: Record<string, string | undefined> = process.env): AppConfig {
  const known = Object.keys(new AppConfig());
  const source: Record<string, string> = {};
  for (const key of [...known, 'DATABASE_PASSWORD', 'METRICS_PORT', 'LOG_FORMAT', 'LOG_FILE']) {
    const value = env[key];
    if (value !== undefined) source[key] = value;
  }
  const config = plainToInstance(AppConfig, source, { exposeDefaultValues: true });
  const errors = validateSync(config, { forbidUnknownValues: false });
  if (errors.length > 0) {
    const lines = errors.map((e) => `${e.property}=${JSON.stringify(source[e.property] ?? null)}: ${Object.values(e.constraints ?? {}).join('; ')}`);
    throw new ConfigError(`Invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  return config;
}
