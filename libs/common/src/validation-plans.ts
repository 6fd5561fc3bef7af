import { getMetadataStorage, ValidationTypes } from 'class-validator';
import type { ValidationArguments } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';

/**
 * A fast path for validateBody: a body that passes every rule of its DTO is turned into the DTO's instance
 * directly, by a plan made once per class from the same rules (class-validator's metadata, its own validator
 * instances, class-transformer's @Type). That is what class-transformer and class-validator would make of it,
 * without their per-request bookkeeping (about a third of a small request's allocations in the api). The plan
 * only ever accepts: any doubt (a rule fails, a rule kind or decorator it does not model, a value it does not
 * expect) returns undefined, and validateBody runs class-transformer and class-validator as before, which give the
 * answer and the error messages. So a plan may be stricter than the rules, never looser.
 */

type Dto = new () => object;
type Condition = (object: object, value: unknown) => boolean;
interface Constraint {
  instance: { validate(value: unknown, args: ValidationArguments): unknown };
}
interface Check {
  metadata: ValidationMetadata;
  constraints: Constraint[];
}
interface PropertyPlan {
  name: string;
  conditions: Condition[];
  checks: Check[];
  /** The @Type class of a @ValidateNested property. */
  nested: Dto | null;
}
interface Plan {
  properties: PropertyPlan[];
  known: Set<string>;
}

/** class-validator's rule storage, with the methods its executor uses (and validation.ts wraps) typed. */
export type RuleStorage = ReturnType<typeof getMetadataStorage> & {
  getTargetValidationMetadatas(target: unknown, schema: string | undefined, always: boolean, strictGroups: boolean, groups?: string[]): ValidationMetadata[];
  groupByPropertyName(metadata: ValidationMetadata[]): Record<string, ValidationMetadata[]>;
  addValidationMetadata(metadata: ValidationMetadata): void;
};
interface TransformerStorage {
  findTypeMetadata(target: unknown, propertyName: string): { typeFunction(): unknown; options?: { discriminator?: unknown } } | undefined;
  _transformMetadatas: Map<unknown, unknown>;
  _exposeMetadatas: Map<unknown, unknown>;
  _excludeMetadatas: Map<unknown, unknown>;
}
/** class-transformer's decorator storage (its @Type, @Transform, @Expose, @Exclude records). */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- class-transformer exports its storage only from this file
export const { defaultMetadataStorage: transformerStorage } = require('class-transformer/cjs/storage') as { defaultMetadataStorage: TransformerStorage };

let plans = new WeakMap<Dto, Plan | null>();

/** A rule added after plans were made (a class defined late) may change any of them. */
export function forgetPlans(): void {
  plans = new WeakMap();
}
const MODELLED = new Set<string>([ValidationTypes.CUSTOM_VALIDATION, ValidationTypes.NESTED_VALIDATION, ValidationTypes.CONDITIONAL_VALIDATION, ValidationTypes.IS_DEFINED, ValidationTypes.WHITELIST]);

/** The DTO's instance made from `value` when it surely passes every rule; otherwise undefined (then: the full path). */
export function acceptedInstance<T extends object>(type: new () => T, value: unknown): T | undefined {
  return isPlainObject(value) ? (build(type, value, 0) as T | undefined) : undefined;
}

function build(type: Dto, source: Record<string, unknown>, depth: number): object | undefined {
  const plan = planOf(type);
  if (!plan || depth > 8) return undefined;
  // As class-transformer (a new instance, the body's values over its initial ones) and then class-validator's
  // whitelist (every property without a rule removed, initial ones too).
  const instance = new type() as Record<string, unknown>;
  for (const key of Object.keys(instance)) if (!plan.known.has(key)) delete instance[key];
  for (const key of Object.keys(source)) if (plan.known.has(key)) instance[key] = copied(source[key]);
  for (const property of plan.properties) {
    let value = instance[property.name];
    if (property.nested && value !== null && typeof value === 'object') {
      const made = nestedValue(property.nested, value, depth);
      if (made === undefined) return undefined;
      instance[property.name] = value = made;
    }
    if (!property.conditions.every((condition) => condition(instance, value))) {
      // Skipped by its conditions, a nested object would keep what the whitelist strips: let the full path make it.
      if (property.nested && value !== null && typeof value === 'object') return undefined;
      continue;
    }
    for (const { metadata, constraints } of property.checks) {
      const args: ValidationArguments = { targetName: type.name, property: metadata.propertyName, object: instance, value, constraints: metadata.constraints };
      const each = metadata.each && Array.isArray(value);
      for (const constraint of constraints) {
        const passed = each ? (value as unknown[]).every((item) => constraint.instance.validate(item, args) === true) : constraint.instance.validate(value, args) === true;
        if (!passed) return undefined;
      }
    }
    // A nested rule wants an object (or an array of them); undefined skips it.
    if (property.nested && value !== undefined && (value === null || typeof value !== 'object')) return undefined;
  }
  return instance;
}

/** A @ValidateNested @Type property's value: an instance of its class, or an array of them; undefined: not sure. */
function nestedValue(type: Dto, value: object, depth: number): object | undefined {
  if (!Array.isArray(value)) return isPlainObject(value) ? build(type, value, depth + 1) : undefined;
  const items: object[] = [];
  for (const item of value) {
    const made = isPlainObject(item) ? build(type, item, depth + 1) : undefined;
    if (made === undefined) return undefined;
    items.push(made);
  }
  return items;
}

/** A JSON value as class-transformer hands on one without @Type: arrays and objects copied, all the way down. */
function copied(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(copied);
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) copy[key] = copied((value as Record<string, unknown>)[key]);
  return copy;
}

/** An object as JSON.parse makes one (of any realm: its prototype is an Object.prototype). */
function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as object | null;
  return prototype !== null && Object.getPrototypeOf(prototype) === null;
}

function planOf(type: Dto): Plan | null {
  let plan = plans.get(type);
  if (plan === undefined) plans.set(type, (plan = makePlan(type)));
  return plan;
}

/** The plan of a DTO class, or null when it has anything the plan does not model (groups, transforms, other rule kinds). */
function makePlan(type: Dto): Plan | null {
  for (let target: unknown = type; typeof target === 'function' && target !== Function.prototype; target = Object.getPrototypeOf(target)) {
    if (transformerStorage._transformMetadatas.has(target) || transformerStorage._exposeMetadatas.has(target) || transformerStorage._excludeMetadatas.has(target)) return null;
  }
  const storage = getMetadataStorage() as RuleStorage;
  // The lookup class-validator's executor makes for an instance of `type` (no schema, groups or `always`).
  const rules = storage.getTargetValidationMetadatas(type, undefined, false, false, undefined);
  const grouped = storage.groupByPropertyName(rules);
  const properties: PropertyPlan[] = [];
  for (const [name, metadatas] of Object.entries(grouped)) {
    const property: PropertyPlan = { name, conditions: [], checks: [], nested: null };
    let nestedRule = false;
    for (const metadata of metadatas) {
      if (!MODELLED.has(metadata.type) || (metadata.groups?.length ?? 0) > 0 || metadata.always) return null;
      if (metadata.type === ValidationTypes.CONDITIONAL_VALIDATION) property.conditions.push(metadata.constraints[0] as Condition);
      else if (metadata.type === ValidationTypes.NESTED_VALIDATION) nestedRule = true;
      else if (metadata.type !== ValidationTypes.WHITELIST) {
        const constraints: Constraint[] = storage.getTargetValidatorConstraints(metadata.constraintCls);
        if (constraints.length === 0) return null;
        property.checks.push({ metadata, constraints });
      }
    }
    const typed = transformerStorage.findTypeMetadata(type, name);
    // @Type and @ValidateNested together, or neither: anything else the full path decides.
    if (typed?.options?.discriminator || !!typed !== nestedRule) return null;
    if (typed) {
      const nested = typed.typeFunction();
      if (typeof nested !== 'function') return null;
      property.nested = nested as Dto;
    }
    properties.push(property);
  }
  return { properties, known: new Set(properties.map((p) => p.name)) };
}
