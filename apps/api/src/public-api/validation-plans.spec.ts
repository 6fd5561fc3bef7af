import 'reflect-metadata';
import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, validateSync } from 'class-validator';
import { acceptedInstance } from '@ws/common';
import { OPERATION_CONTROLLERS } from '../app.module';
import { operationHandlersOf } from './operation-routes';

/**
 * The validation fast path (libs/common validation-plans) against class-transformer + class-validator, on every
 * operation's body DTO and thousands of generated bodies: whatever the plan accepts, the full path accepts too and
 * makes the same instance (same classes, same values). The plan may refuse more (the full path then decides).
 */
type Dto = new () => object;
const FULL_OPTIONS = { whitelist: true, forbidUnknownValues: false, validationError: { target: false, value: false } };

// eslint-disable-next-line @typescript-eslint/no-require-imports -- class-transformer exports its storage only from this file
const { defaultMetadataStorage: types } = require('class-transformer/cjs/storage') as {
  defaultMetadataStorage: { findTypeMetadata(target: unknown, property: string): { typeFunction(): unknown } | undefined };
};
const rules = getMetadataStorage() as unknown as { getTargetValidationMetadatas(t: unknown, s: unknown, a: boolean, g: boolean): Array<{ propertyName: string }> };

/** A deterministic generator (tests stay the same run to run). */
function randomOf(seed: number) {
  let state = seed >>> 0;
  const next = () => ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  return { next, pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] };
}

const SCALARS: readonly unknown[] = [
  '', 'a', 'ada', 'x'.repeat(300), '0123456789abcdef0123456789abcdef', '01234567-89ab-cdef-0123-456789abcdef', 'https://example.test/a', '127.0.0.1',
  'daily', 'total', 'vnc', 'direct', 'rdp', 'ssh', 'kasm', 'none', 'Global Admin', 'user.created', '2026-11-29T12:00:00Z',
  0, 1, -1, 2, 7, 30, 100, 3600, 1.5, 1e12, true, false, null,
];

function bodyFor(type: Dto, random: ReturnType<typeof randomOf>, depth: number): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const names = [...new Set(rules.getTargetValidationMetadatas(type, undefined, false, false).map((r) => r.propertyName))];
  for (const name of names) {
    const roll = random.next();
    if (roll < 0.3) continue;
    const nested = types.findTypeMetadata(type, name)?.typeFunction() as Dto | undefined;
    if (nested && depth < 3 && roll < 0.8) body[name] = random.next() < 0.8 ? bodyFor(nested, random, depth + 1) : [bodyFor(nested, random, depth + 1)];
    else if (roll < 0.9) body[name] = random.pick(SCALARS);
    else body[name] = random.pick([[], [random.pick(SCALARS)], {}, { a: 'b' }, [{ a: 1 }]]);
  }
  if (random.next() < 0.3) body.not_a_field = random.pick(SCALARS);
  return body;
}

describe('validation plans agree with class-transformer + class-validator', () => {
  const dtos = [...new Set(operationHandlersOf(OPERATION_CONTROLLERS).flatMap((h) => h.params.flatMap((p) => (p.kind === 'body' ? [p.type as Dto] : []))))];

  it('every body the plan accepts, the full path accepts, as the same instance', () => {
    let accepted = 0;
    let checked = 0;
    for (const [index, type] of dtos.entries()) {
      const random = randomOf(index + 1);
      for (let i = 0; i < 400; i++) {
        const body = bodyFor(type, random, 0);
        const fast = acceptedInstance(type, JSON.parse(JSON.stringify(body)));
        checked++;
        if (fast === undefined) continue;
        accepted++;
        const full = plainToInstance(type, JSON.parse(JSON.stringify(body)));
        const errors = validateSync(full, FULL_OPTIONS);
        if (errors.length) throw new Error(`${type.name}: the plan accepted ${JSON.stringify(body)}, the full path refused it`);
        expect(fast).toStrictEqual(full);
      }
    }
    // The plan must actually take bodies (else it saves nothing): a good share of the generated ones pass.
    expect(checked).toBeGreaterThan(10_000);
    expect(accepted).toBeGreaterThan(checked / 20);
  });

  it('takes the common bodies: none, a page, a nested reference', () => {
    const list = dtos.find((type) => type.name === 'PageRequest') as Dto;
    expect(acceptedInstance(list, {})).toBeInstanceOf(list);
    expect(acceptedInstance(list, { limit: 10, cursor: 'abc', api_key: 'k' })).toStrictEqual(Object.assign(new list(), { limit: 10, cursor: 'abc' }));
    expect(acceptedInstance(list, { limit: 0 })).toBeUndefined();
    expect(acceptedInstance(list, [])).toBeUndefined();
  });
});
