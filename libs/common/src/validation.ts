import type { ArgumentMetadata, PipeTransform } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, ValidateIf, type ValidationError, ValidationTypes, type ValidatorOptions, validateSync } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';
import { ApiError, ErrorCode } from './errors';
import { acceptedInstance, forgetPlans, type RuleStorage, transformerStorage } from './validation-plans';

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

/** Parameters of these types are not validated (as Nest's ValidationPipe leaves them). */
const UNVALIDATED_TYPES: ReadonlySet<unknown> = new Set([String, Boolean, Number, Array, Object, Buffer, Date]);
const VALIDATOR_OPTIONS: ValidatorOptions = { whitelist: true, forbidUnknownValues: false, validationError: { target: false, value: false } };

/**
 * The DTOs' rules (class-validator) on a request body, as Nest's ValidationPipe with `whitelist` and `transform`:
 * unknown fields are dropped (every body also carries api_key and api_key_secret), known ones are checked, and the
 * answer is the DTO's instance. Nest's pipe also guards against what a multipart or socket value may hold (binary
 * values, sparse arrays, prototype keys); our bodies are JSON objects that parseBody has already vetted
 * (findJsonProblem refuses `__proto__` and `constructor` keys), so that per-request walk is skipped. Synchronous:
 * every rule of ours is (assertSynchronousRules), and an awaited validation costs a request a chain of promises.
 */
export function validateBody<T extends object>(type: new () => T, value: unknown): T {
  rememberRuleLookups();
  assertSynchronousRules(type);
  // Most bodies pass: their instance is made by the DTO's plan; the rest (and their error messages) go the full way.
  const accepted = acceptedInstance(type, value);
  if (accepted) return accepted;
  const instance = plainToInstance(type, value ?? {}) as T;
  const errors = validateSync(instance, VALIDATOR_OPTIONS);
  if (errors.length) throw new ApiError(ErrorCode.InvalidRequest, describeValidationErrors(errors).join('; '));
  return instance;
}

/** validateBody as Nest's pipe, for Nest's own routes (the operation routes call validateBody directly). */
export class ApiValidationPipe implements PipeTransform {
  transform(value: unknown, metadata: ArgumentMetadata): unknown {
    const type = metadata.metatype;
    if (metadata.type === 'custom' || !type || UNVALIDATED_TYPES.has(type)) return value;
    return validateBody(type as new () => object, value);
  }
}

const checkedClasses = new WeakSet<object>();

/**
 * validateSync skips asynchronous rules (it would pass what they refuse): a DTO class with one, or with a nested
 * class that has one, is a programming error, found on its first validation.
 */
export function assertSynchronousRules(type: object): void {
  if (checkedClasses.has(type)) return;
  const storage = getMetadataStorage();
  const pending: object[] = [type];
  const seen = new Set<object>();
  while (pending.length) {
    const target = pending.pop() as object;
    if (seen.has(target)) continue;
    seen.add(target);
    for (const rule of storage.getTargetValidationMetadatas(target as new () => object, '', true, false)) {
      if (rule.type === ValidationTypes.CUSTOM_VALIDATION && rule.constraintCls) {
        const asynchronous = storage.getTargetValidatorConstraints(rule.constraintCls).some((constraint) => constraint.async);
        if (asynchronous) throw new Error(`${(target as { name?: string }).name}.${rule.propertyName} has an asynchronous rule; request bodies are validated synchronously`);
      }
      const nested = rule.type === ValidationTypes.NESTED_VALIDATION ? transformerStorage.findTypeMetadata(target, rule.propertyName)?.typeFunction() : undefined;
      if (typeof nested === 'function') pending.push(nested);
    }
  }
  checkedClasses.add(type);
}

let rememberingRules = false;

/**
 * class-validator finds a class's rules, on every validation of every nested object, by testing the class against
 * every class that has rules (for inherited ones) and grouping them anew: with the api's few hundred DTOs that cost
 * a third of a small body's validation. The answers are remembered per class and options; a rule added later (a
 * class defined after the first request) forgets them all, so an answer is never stale.
 */
function rememberRuleLookups(): void {
  if (rememberingRules) return;
  rememberingRules = true;
  const storage = getMetadataStorage() as RuleStorage;
  const lookup = storage.getTargetValidationMetadatas.bind(storage);
  const group = storage.groupByPropertyName.bind(storage);
  const add = storage.addValidationMetadata.bind(storage);
  let rules = new Map<unknown, Map<string, ValidationMetadata[]>>();
  let grouped = new WeakMap<ValidationMetadata[], Record<string, ValidationMetadata[]>>();
  storage.getTargetValidationMetadatas = (target, schema, always, strictGroups, groups) => {
    if (groups?.length) return lookup(target, schema, always, strictGroups, groups);
    let byOptions = rules.get(target);
    if (!byOptions) rules.set(target, (byOptions = new Map()));
    const key = `${schema}\0${always}\0${strictGroups}`;
    let found = byOptions.get(key);
    if (!found) byOptions.set(key, (found = lookup(target, schema, always, strictGroups, groups)));
    return found;
  };
  storage.groupByPropertyName = (metadata) => {
    let found = grouped.get(metadata);
    if (!found) grouped.set(metadata, (found = group(metadata)));
    return found;
  };
  storage.addValidationMetadata = (metadata) => {
    rules = new Map();
    grouped = new WeakMap();
    forgetPlans();
    add(metadata);
  };
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

/**
 * Keys no body may have. JSON.parse keeps `__proto__` as an own key; copied by assignment (as class-transformer
 * does) it swaps a prototype. An own `constructor` copied onto a DTO instance hides its class from class-validator,
 * which would then check nothing in that object.
 */
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor']);
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
      if (FORBIDDEN_KEYS.has(key)) return { path: jsonPath(item), problem: `has a key ${key}, which is not allowed` };
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
