import * as path from 'node:path';
import ts from 'typescript';

/** A JSON Schema (2020-12, as OpenAPI 3.1 uses it). */
export type JsonSchema = Record<string, unknown>;

/** A route handler whose answer is described: the controller class and the method, by name. */
export interface HandlerRef {
  controller: string;
  method: string;
  /** Name of the component the answer is registered under (`CreateUserResponse`). */
  component: string;
  /** The handler writes the reply itself (`@Res()` without passthrough). */
  raw: boolean;
}

export interface ResponseSchemas {
  /** component name → schema, for the handlers and every named type their answers use. */
  components: Record<string, JsonSchema>;
  /** Handlers whose answer is not JSON: bytes (a Buffer), or written by the handler itself. */
  raw: Set<string>;
}

const MAX_DEPTH = 40;

/**
 * Answers' schemas from the TypeScript types of the route handlers: the awaited return type of each method, as
 * the compiler infers it from the mappers. There is no second description to keep in step: change a mapper and
 * the generated document changes (and the drift test fails until openapi.json is regenerated).
 */
export function responseSchemas(repoRoot: string, controllerFiles: string[], handlers: HandlerRef[]): ResponseSchemas {
  const configPath = path.join(repoRoot, 'tsconfig.json');
  const config = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')); } });
  if (!config) throw new Error(`cannot read ${configPath}`);
  const program = ts.createProgram({ rootNames: controllerFiles, options: { ...config.options, noEmit: true } });
  const checker = program.getTypeChecker();
  const classes = new Map<string, ts.ClassDeclaration>();
  for (const file of controllerFiles) {
    const source = program.getSourceFile(file);
    if (!source) throw new Error(`${file} is not part of the program`);
    source.forEachChild((node) => {
      if (ts.isClassDeclaration(node) && node.name) classes.set(node.name.text, node);
    });
  }
  const converter = new TypeConverter(checker);
  const raw = new Set<string>();
  for (const handler of handlers) {
    const declaration = classes.get(handler.controller);
    if (!declaration) throw new Error(`controller ${handler.controller} not found in ${controllerFiles.length} files`);
    const member = declaration.members.find((m): m is ts.MethodDeclaration => ts.isMethodDeclaration(m) && m.name.getText() === handler.method);
    if (!member) throw new Error(`${handler.controller}.${handler.method} not found`);
    const signature = checker.getSignatureFromDeclaration(member);
    if (!signature) throw new Error(`${handler.controller}.${handler.method} has no signature`);
    const returned = checker.getReturnTypeOfSignature(signature);
    const answer = checker.getAwaitedType(returned) ?? returned;
    const binary = ['Buffer', 'Uint8Array', 'Readable'].includes(answer.getSymbol()?.getName() ?? '');
    if (handler.raw || binary || answer.flags & (ts.TypeFlags.Void | ts.TypeFlags.Undefined | ts.TypeFlags.Never)) {
      raw.add(handler.component);
      continue;
    }
    try {
      converter.components[handler.component] = converter.convert(answer, 0, true);
    } catch (err) {
      throw new Error(`${handler.controller}.${handler.method}: ${(err as Error).message}`);
    }
  }
  return { components: converter.components, raw };
}

class TypeConverter {
  readonly components: Record<string, JsonSchema> = {};
  private readonly named = new Map<ts.Type, string>();

  constructor(private readonly checker: ts.TypeChecker) {}

  convert(type: ts.Type, depth: number, inline = false): JsonSchema {
    if (depth > MAX_DEPTH) throw new Error(`type nested deeper than ${MAX_DEPTH}: ${this.checker.typeToString(type)}`);
    const f = type.flags;
    if (f & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return {};
    if (f & ts.TypeFlags.Never) return { not: {} };
    if (f & ts.TypeFlags.Boolean) return { type: 'boolean' };
    if (f & ts.TypeFlags.BooleanLiteral) return { type: 'boolean', const: this.checker.typeToString(type) === 'true' };
    if (f & ts.TypeFlags.StringLiteral) return { type: 'string', const: (type as ts.StringLiteralType).value };
    if (f & ts.TypeFlags.NumberLiteral) return { type: 'number', const: (type as ts.NumberLiteralType).value };
    if (f & (ts.TypeFlags.String | ts.TypeFlags.TemplateLiteral)) return { type: 'string' };
    if (f & ts.TypeFlags.Number) return { type: 'number' };
    if (f & ts.TypeFlags.Null) return { type: 'null' };
    if (f & ts.TypeFlags.EnumLiteral && type.isUnion()) return this.union(type.types, depth);
    if (type.isUnion()) return this.union(type.types, depth);
    if (type.isIntersection()) return { allOf: type.types.map((t) => this.convert(t, depth + 1)) };
    if (this.checker.isTupleType(type)) {
      const items = this.checker.getTypeArguments(type as ts.TypeReference).map((t) => this.convert(t, depth + 1));
      return { type: 'array', prefixItems: items, minItems: items.length, maxItems: items.length };
    }
    if (this.checker.isArrayType(type)) {
      const [item] = this.checker.getTypeArguments(type as ts.TypeReference);
      return { type: 'array', items: this.convert(item, depth + 1) };
    }
    if (f & ts.TypeFlags.Object) return this.object(type, depth, inline);
    throw new Error(`no JSON schema for the type ${this.checker.typeToString(type)}`);
  }

  private union(members: readonly ts.Type[], depth: number): JsonSchema {
    const present = members.filter((t) => !(t.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Void)));
    // `boolean` inside a union shows up as `true | false`.
    const trueFalse = present.filter((t) => t.flags & ts.TypeFlags.BooleanLiteral);
    const rest = trueFalse.length === 2 ? present.filter((t) => !(t.flags & ts.TypeFlags.BooleanLiteral)) : present;
    const schemas = rest.map((t) => this.convert(t, depth + 1));
    if (trueFalse.length === 2) schemas.push({ type: 'boolean' });
    const strings = schemas.filter((s) => s.type === 'string' && 'const' in s);
    const others = schemas.filter((s) => !(s.type === 'string' && 'const' in s));
    if (strings.length > 1) others.unshift({ type: 'string', enum: strings.map((s) => s.const).sort() });
    else others.unshift(...strings);
    if (others.length === 1) return others[0];
    const simple = others.every((s) => typeof s.type === 'string' && Object.keys(s).length === 1);
    if (simple) return { type: [...new Set(others.map((s) => s.type as string))] };
    const nullable = others.filter((s) => s.type === 'null');
    const nonNull = others.filter((s) => s.type !== 'null');
    if (nullable.length && nonNull.length === 1 && typeof nonNull[0].type === 'string' && !('$ref' in nonNull[0])) {
      return { ...nonNull[0], type: [nonNull[0].type, 'null'] };
    }
    return { anyOf: others };
  }

  private object(type: ts.Type, depth: number, inline: boolean): JsonSchema {
    const symbol = type.aliasSymbol ?? type.getSymbol();
    const name = symbol?.getName();
    if (name === 'Date') return { type: 'string', format: 'date-time' };
    const nameable = !inline && name && !name.startsWith('__') && !(type.aliasTypeArguments?.length) && !((type as ts.TypeReference).typeArguments?.length);
    if (nameable) {
      const known = this.named.get(type);
      if (known) return { $ref: `#/components/schemas/${known}` };
      let component = name;
      for (let n = 2; component in this.components; n++) component = `${name}${n}`;
      this.named.set(type, component);
      this.components[component] = {};
      this.components[component] = this.shape(type, depth);
      return { $ref: `#/components/schemas/${component}` };
    }
    return this.shape(type, depth);
  }

  private shape(type: ts.Type, depth: number): JsonSchema {
    const properties: Record<string, JsonSchema> = {};
    const required: string[] = [];
    for (const property of this.checker.getPropertiesOfType(type)) {
      const propertyType = this.checker.getTypeOfSymbol(property);
      if (propertyType.getCallSignatures().length || property.getName().startsWith('__@')) continue;
      // `{ a: X } | { b: Y }` literals are normalised to carry `b?: undefined` in the first member: nothing to describe.
      if (propertyType.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Void)) continue;
      const optional = (property.flags & ts.SymbolFlags.Optional) !== 0
        || (propertyType.isUnion() && propertyType.types.some((t) => t.flags & ts.TypeFlags.Undefined))
        || (propertyType.flags & ts.TypeFlags.Undefined) !== 0;
      try {
        properties[property.getName()] = this.convert(propertyType, depth + 1);
      } catch (err) {
        throw new Error(`${property.getName()}: ${(err as Error).message}`);
      }
      if (!optional) required.push(property.getName());
    }
    const schema: JsonSchema = { type: 'object', properties };
    if (required.length) schema.required = required;
    const [index] = this.checker.getIndexInfosOfType(type);
    if (index) schema.additionalProperties = this.convert(index.type, depth + 1);
    else schema.additionalProperties = false;
    return schema;
  }
}
