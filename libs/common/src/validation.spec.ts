import 'reflect-metadata';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, IsString, MaxLength, registerDecorator, ValidateNested } from 'class-validator';
import { ApiError } from './errors';
import { ApiValidationPipe, findJsonProblem, MAX_JSON_DEPTH, unstorableTextReason } from './validation';

/** `{"a":{"a":…}}` nested `levels` deep (the outer object is level 1), built without recursion. */
function nestedObjects(levels: number, leaf: unknown = 1): unknown {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}

describe('unstorableTextReason', () => {
  it.each([
    ['plain text', 'ada lovelace'],
    ['an empty string', ''],
    ['text outside the BMP (a proper surrogate pair)', 'smile \u{1F600} ok'],
    ['other control characters', '\u0001\u001f\t\n'],
  ])('accepts %s', (_what, text) => {
    expect(unstorableTextReason(text)).toBeNull();
  });

  it.each([
    ['a NUL', 'x\u0000', 'contains a NUL character'],
    ['a NUL alone', '\u0000', 'contains a NUL character'],
    ['a lone high surrogate at the end', 'ab\uD83D', 'contains a lone UTF-16 surrogate (not valid Unicode)'],
    ['a lone high surrogate before a letter', '\uD83Dx', 'contains a lone UTF-16 surrogate (not valid Unicode)'],
    ['a lone low surrogate', 'x\uDE00', 'contains a lone UTF-16 surrogate (not valid Unicode)'],
    ['a low surrogate before a high one (reversed pair)', '\uDE00\uD83D', 'contains a lone UTF-16 surrogate (not valid Unicode)'],
  ])('refuses %s', (_what, text, reason) => {
    expect(unstorableTextReason(text)).toBe(reason);
  });
});

describe('findJsonProblem', () => {
  it('accepts an ordinary body', () => {
    const body = { api_key: 'k', target_user: { username: 'ada', locked: false, phone: null }, environment: { PATH: '/bin' }, list: [1, 'two', { three: 3 }] };
    expect(findJsonProblem(body)).toBeNull();
  });

  it('names the field path of a NUL in a nested string', () => {
    expect(findJsonProblem({ api_key: 'k', target_user: { username: 'ada', first_name: 'A\u0000' } })).toEqual({
      path: 'target_user.first_name', problem: 'contains a NUL character',
    });
  });

  it('names the top-level field of a NUL in the api key', () => {
    expect(findJsonProblem({ api_key: 'x\u0000', api_key_secret: 'y' })).toEqual({ path: 'api_key', problem: 'contains a NUL character' });
  });

  it('names array elements by index', () => {
    expect(findJsonProblem({ exec_config: { args: ['ok', 'bad\uD800'] } })).toEqual({
      path: 'exec_config.args[1]', problem: 'contains a lone UTF-16 surrogate (not valid Unicode)',
    });
  });

  it('quotes keys that are not plain names, escaping and shortening them', () => {
    expect(findJsonProblem({ 'a b': { c: '\u0000' } })?.path).toBe('["a b"].c');
    const long = 'k'.repeat(500);
    const path = findJsonProblem({ [long]: '\u0000' })?.path as string;
    expect(path).toBe(`["${'k'.repeat(64)}…"]`);
  });

  it('refuses keys with a NUL or a lone surrogate, naming the object that holds them (the key is not echoed)', () => {
    expect(findJsonProblem({ target_user: { 'user\u0000name': 'ada' } })).toEqual({ path: 'target_user', problem: 'has a key that contains a NUL character' });
    expect(findJsonProblem({ '\uDC00': 1 })).toEqual({ path: '(body)', problem: 'has a key that contains a lone UTF-16 surrogate (not valid Unicode)' });
  });

  it('refuses a __proto__ key, which JSON.parse keeps as an own property', () => {
    const parsed = JSON.parse('{"target_user":{"__proto__":{"username":"x"}}}') as unknown;
    expect(findJsonProblem(parsed)).toEqual({ path: 'target_user', problem: 'has a key __proto__, which is not allowed' });
  });

  it('refuses a constructor key, which would hide a DTO\'s class from its validation', () => {
    expect(findJsonProblem({ target_user: { constructor: { name: 'x' }, username: 'u' } })).toEqual({ path: 'target_user', problem: 'has a key constructor, which is not allowed' });
    expect(findJsonProblem({ constructor: 1 })).toEqual({ path: '(body)', problem: 'has a key constructor, which is not allowed' });
  });

  it(`accepts exactly ${MAX_JSON_DEPTH} levels and refuses one more, naming where`, () => {
    expect(findJsonProblem(nestedObjects(MAX_JSON_DEPTH))).toBeNull();
    const problem = findJsonProblem(nestedObjects(MAX_JSON_DEPTH + 1));
    expect(problem).toEqual({ path: Array(MAX_JSON_DEPTH).fill('a').join('.'), problem: `is nested deeper than ${MAX_JSON_DEPTH} levels` });
  });

  it('counts arrays as levels too', () => {
    let value: unknown = [];
    for (let i = 1; i < MAX_JSON_DEPTH; i++) value = [value];
    expect(findJsonProblem({ x: value })).toEqual({ path: `x${'[0]'.repeat(MAX_JSON_DEPTH - 1)}`, problem: `is nested deeper than ${MAX_JSON_DEPTH} levels` });
  });

  it('inspects 100,000 levels without overflowing the stack (no recursion)', () => {
    const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`) as unknown;
    expect(findJsonProblem(deep)?.problem).toBe(`is nested deeper than ${MAX_JSON_DEPTH} levels`);
    expect(findJsonProblem(deep, 200_000)).toBeNull();
  });

  it('takes a custom depth limit', () => {
    expect(findJsonProblem({ a: { b: 1 } }, 2)).toBeNull();
    expect(findJsonProblem({ a: { b: {} } }, 2)).toEqual({ path: 'a.b', problem: 'is nested deeper than 2 levels' });
  });

  it('finds a problem after many fine siblings (a wide body is walked to the end)', () => {
    const wide: Record<string, string> = {};
    for (let i = 0; i < 10_000; i++) wide[`k${i}`] = 'fine';
    wide.k9999 = 'late\u0000';
    expect(findJsonProblem({ wide })).toEqual({ path: 'wide.k9999', problem: 'contains a NUL character' });
  });
});

describe('ApiValidationPipe', () => {
  class Inner {
    @IsString() @MaxLength(5) name!: string;
  }
  class Outer {
    @IsInt() @IsOptional() count?: number;
    @ValidateNested() @Type(() => Inner) inner!: Inner;
  }
  const pipe = new ApiValidationPipe();
  const body = (value: unknown, metatype: unknown = Outer) => pipe.transform(value, { type: 'body', metatype: metatype as never });
  const refusal = (validate: () => unknown) => {
    let error: unknown = null;
    try {
      validate();
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ApiError);
    return (error as ApiError).message;
  };

  it('answers the DTO instance without unknown fields, and refuses what breaks a rule, nested too (every time)', async () => {
    for (let round = 0; round < 3; round++) {
      const made = body({ api_key: 'k', count: 2, inner: { name: 'ada', extra: true } });
      expect(made).toBeInstanceOf(Outer);
      expect(made).toEqual({ count: 2, inner: { name: 'ada' } });
      expect((made as Outer).inner).toBeInstanceOf(Inner);
      expect(refusal(() => body({ count: 'two', inner: { name: 'far too long' } }))).toBe('count must be an integer number; inner.name must be shorter than or equal to 5 characters');
    }
  });

  it('leaves other parameters alone', async () => {
    expect(pipe.transform('abc', { type: 'param', metatype: String })).toBe('abc');
    expect(pipe.transform({ x: 1 }, { type: 'custom', metatype: Outer })).toEqual({ x: 1 });
  });

  it('checks a rule declared after earlier validations of its class (remembered rules are forgotten)', async () => {
    class Growing {
      @IsString() name!: string;
    }
    expect(body({ name: 'a', tag: 3 }, Growing)).toEqual({ name: 'a' });
    IsString()(Growing.prototype, 'tag');
    expect(refusal(() => body({ name: 'a', tag: 3 }, Growing))).toBe('tag must be a string');
  });

  it('refuses a DTO with an asynchronous rule, nested too, instead of skipping the rule', () => {
    class Slow {
      name!: string;
    }
    registerDecorator({ name: 'slow', async: true, target: Slow, propertyName: 'name', validator: { validate: async () => false } });
    class Holder {
      @ValidateNested() @Type(() => Slow) inner!: Slow;
    }
    expect(() => body({ inner: { name: 'a' } }, Holder)).toThrow('Slow.name has an asynchronous rule');
  });
});
