import { ValidationError, ValidationPipe } from '@nestjs/common';
import { ValidateIf } from 'class-validator';
import { ApiError, ErrorCode } from './errors';

/** Flattens class-validator errors into "target_user.username must be a string; …". */
export function describeValidationErrors(errors: ValidationError[], parent = ''): string[] {
  const out: string[] = [];
  for (const error of errors) {
    const path = parent ? `${parent}.${error.property}` : error.property;
    for (const message of Object.values(error.constraints ?? {})) {
      out.push(message.startsWith(error.property) ? path + message.slice(error.property.length) : `${path}: ${message}`);
    }
    if (error.children?.length) out.push(...describeValidationErrors(error.children, path));
  }
  return out;
}

/** Unknown fields are ignored (every body also carries api_key and api_key_secret); known ones are checked. */
export function apiValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    transform: true,
    forbidUnknownValues: false,
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => new ApiError(ErrorCode.InvalidRequest, describeValidationErrors(errors).join('; ')),
  });
}

/** May be omitted, but when present (even null) must pass the other validators: for non-nullable fields. */
export const Settable = () => ValidateIf((_object: object, value: unknown) => value !== undefined);

/**
 * Deepest nesting a request body may have (the body object is level 1). Our DTOs need 3; recursive
 * validation of thousands of levels overflows the stack, so anything deeper is refused before it.
 */
export const MAX_JSON_DEPTH = 32;

/** A NUL, or a UTF-16 surrogate without its partner (it would reach the database as U+FFFD). */
// eslint-disable-next-line no-control-regex -- finding NUL is the point
const UNSTORABLE_TEXT = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why PostgreSQL cannot store `text` faithfully (it refuses NUL, and lone surrogates get mangled), or null. */
export function unstorableTextReason(text: string): string | null {
  const found = UNSTORABLE_TEXT.exec(text);
  if (!found) return null;
  return found[0] === '\u0000' ? 'contains a NUL character' : 'contains a lone UTF-16 surrogate (not valid Unicode)';
}

/** What is wrong with a parsed JSON body, and where (`target_user.username`, `environment.PATH`, `a[2]`, `(body)`). */
export interface JsonProblem {
  path: string;
  problem: string;
}

interface PendingValue {
  value: unknown;
  key: string | number | null;
  parent: PendingValue | null;
  depth: number;
}

/** JSON.parse keeps `__proto__` as an own key; copied by assignment (as class-transformer does) it swaps a prototype. */
const PROTOTYPE_KEY = '__proto__';
const SHOWN_KEY_CHARS = 64;
const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/**
 * Walks a parsed JSON value once, without recursion (so any depth is safe to inspect), and reports the first
 * thing no operation accepts: nesting deeper than `maxDepth`, text PostgreSQL cannot store (in values and in
 * keys), or a `__proto__` key. Null when the value is fine.
 */
export function findJsonProblem(root: unknown, maxDepth = MAX_JSON_DEPTH): JsonProblem | null {
  const pending: PendingValue[] = [{ value: root, key: null, parent: null, depth: 0 }];
  while (pending.length) {
    const item = pending.pop() as PendingValue;
    const { value } = item;
    if (typeof value === 'string') {
      const reason = unstorableTextReason(value);
      if (reason) return { path: jsonPath(item), problem: reason };
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    const depth = item.depth + 1;
    if (depth > maxDepth) return { path: jsonPath(item), problem: `is nested deeper than ${maxDepth} levels` };
    if (Array.isArray(value)) {
      for (let index = value.length - 1; index >= 0; index--) pending.push({ value: value[index], key: index, parent: item, depth });
      continue;
    }
    const keys = Object.keys(value);
    for (let index = keys.length - 1; index >= 0; index--) {
      const key = keys[index];
      const keyReason = unstorableTextReason(key);
      if (keyReason) return { path: jsonPath(item), problem: `has a key that ${keyReason}` };
      if (key === PROTOTYPE_KEY) return { path: jsonPath(item), problem: `has a key ${PROTOTYPE_KEY}, which is not allowed` };
      pending.push({ value: (value as Record<string, unknown>)[key], key, parent: item, depth });
    }
  }
  return null;
}

/** `a.b[2].c`; keys that are not plain names are quoted (escaped, and shortened: they come from the client). */
function jsonPath(item: PendingValue): string {
  const keys: Array<string | number> = [];
  for (let at: PendingValue | null = item; at && at.key !== null; at = at.parent) keys.push(at.key);
  let path = '';
  for (const key of keys.reverse()) {
    if (typeof key === 'number') path += `[${key}]`;
    else if (PLAIN_KEY.test(key)) path += path ? `.${key}` : key;
    else path += `[${JSON.stringify(key.length > SHOWN_KEY_CHARS ? `${key.slice(0, SHOWN_KEY_CHARS)}…` : key)}]`;
  }
  return path || '(body)';
}
