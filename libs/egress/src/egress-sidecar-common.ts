/**
 * Shared pieces of the egress sidecar's config builders (egress-sidecar-config.ts): the files' shape, the error of a
 * gateway config that cannot make a tunnel, and validators that keep every value on one line of its own kind.
 */
export interface EgressSidecarFiles {
  /** File name under /etc/egress → content and mode (secrets 0600, root's). */
  files: Record<string, { content: string; mode: number }>;
}

/** A gateway's config that cannot make a tunnel: the launch fails with this message (it names the gateway). */
export class EgressConfigError extends Error {}

/** What a builder reads of a reservation (the entities have more). */
export interface EgressSidecarInput {
  provider: { type: string };
  gateway: { name: string; endpoint: string; config: unknown };
  credential: { username?: string | null; password?: string | null; vpnPrivateKey?: string | null; meshKey?: string | null; customCredential?: string | null };
}

export const CIDR = /^(?:\d{1,3}(?:\.\d{1,3}){3}\/\d{1,2}|[0-9A-Fa-f:]+\/\d{1,3})$/;
export const IP = /^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f:]+)$/;
export const ENDPOINT = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):\d{1,5}$/;

/** Reads a gateway's `config` field by field; every refusal names the gateway. */
export function configReader(input: EgressSidecarInput) {
  const { gateway } = input;
  const bad = (why: string) => new EgressConfigError(`bad configuration of the egress gateway ${gateway.name}: ${why}`);
  const raw = gateway.config ?? {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw bad('config must be an object');
  const config = raw as Record<string, unknown>;
  const list = (name: string, re: RegExp, what: string, fallback?: string[]): string[] => {
    const v = config[name] ?? fallback ?? [];
    const items = typeof v === 'string' ? v.split(',').map((s) => s.trim()).filter(Boolean) : v;
    if (!Array.isArray(items) || items.some((i) => typeof i !== 'string' || !re.test(i))) throw bad(`config.${name} must be ${what}`);
    return items as string[];
  };
  const int = (name: string, fallback: number, max: number): number => {
    const v = config[name] ?? fallback;
    if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > max) throw bad(`config.${name} must be an integer up to ${max}`);
    return v as number;
  };
  const oneOf = <T extends string>(name: string, values: readonly T[], fallback: T): T => {
    const v = config[name] ?? fallback;
    if (!values.includes(v as T)) throw bad(`config.${name} must be one of ${values.join(', ')}`);
    return v as T;
  };
  /** An optional string matching `re` (undefined when absent). */
  const optional = (name: string, re: RegExp, what: string): string | undefined => {
    const v = config[name];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string' || !re.test(v)) throw bad(`config.${name} must be ${what}`);
    return v;
  };
  const endpoint = (): string => {
    if (!ENDPOINT.test(gateway.endpoint ?? '')) throw bad('its endpoint must be host:port');
    return gateway.endpoint;
  };
  return { config, bad, list, int, oneOf, optional, endpoint };
}

/** KEY=value lines (values already validated to hold no newline). */
export function envLines(entries: Record<string, string | number>): string {
  return Object.entries(entries).map(([k, v]) => `${k}=${v}\n`).join('');
}
