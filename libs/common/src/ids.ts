import { createHash, randomBytes, randomUUID } from 'node:crypto';

/**
 * Identifiers are UUIDs in the database and 32 lowercase hex characters on the wire.
 * Input accepts either layout, in any case.
 */
const HEX32 = /^[0-9a-f]{32}$/i;
const DASHED = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function newId(): string {
  return randomUUID();
}

/** The database form (dashed, lowercase) of a wire id, or null when it is not an id at all. */
export function parseId(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  if (DASHED.test(value)) return value.toLowerCase();
  if (HEX32.test(value)) {
    const v = value.toLowerCase();
    return `${v.slice(0, 8)}-${v.slice(8, 12)}-${v.slice(12, 16)}-${v.slice(16, 20)}-${v.slice(20)}`;
  }
  return null;
}

export function toWireId(uuid: string): string;
export function toWireId(uuid: string | null | undefined): string | null;
export function toWireId(uuid: string | null | undefined): string | null {
  return uuid ? uuid.replace(/-/g, '') : null;
}

/** A high-entropy random string for secrets and opaque keys (hex, `bytes` * 8 bits). */
export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString('hex');
}

export const sha256 = (value: string): string => createHash('sha256').update(value).digest('hex');
