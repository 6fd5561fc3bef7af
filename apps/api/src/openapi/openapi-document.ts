import 'reflect-metadata';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RequestMethod, Type } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA, RESPONSE_PASSTHROUGH_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
// eslint-disable-next-line @typescript-eslint/no-require-imports -- class-transformer exports its storage only from this file
const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as { defaultMetadataStorage: unknown };
import { getMetadataStorage, ValidationTypes } from 'class-validator';
import { validationMetadatasToSchemas } from 'class-validator-jsonschema';
import { closure, OPERATION_KEY, OPERATIONS, OperationName } from '@ws/auth';
import { API_CONTROLLERS } from '../app.module';
import { JsonSchema, responseSchemas } from './response-schemas';
import { BINARY_ANSWERS, CREATING_OPERATIONS, DOCUMENT_INFO, errorAnswers, PAGED_OPERATIONS } from './openapi-rules';

const REF = '#/components/schemas/';
const ERROR = 'ErrorAnswer';
const CREDENTIALS = 'ApiCredentials';

interface Route {
  controller: Type<unknown>;
  method: string;
  httpMethod: string;
  /** OpenAPI path (`/api/client/cast/{key}/info`). */
  path: string;
  operation: OperationName | null;
  body: Type<unknown> | null;
  pathParams: string[];
  queryParams: string[];
  /** Writes the reply itself (`@Res()` without passthrough): the answer is not the method's return value. */
  rawReply: boolean;
}

/**
 * The OpenAPI 3.1 document of the api, generated: routes and permissions from the controllers' decorators and
 * the operation catalog, request bodies from the DTOs' class-validator metadata (class-validator-jsonschema),
 * answers from the handlers' TypeScript return types (response-schemas.ts). `npm run openapi` writes it to
 * openapi.json; the api serves that file (the compiler is not part of a running api).
 */
export function buildOpenApiDocument(repoRoot: string): Record<string, unknown> {
  const routes = discoverRoutes();
  const requestComponents = requestSchemas(routes.map((r) => r.body).filter((b): b is Type<unknown> => b !== null));
  const handlers = routes.map((r) => ({ controller: r.controller.name, method: r.method, component: componentName(r), raw: r.rawReply }));
  const controllerFiles = findControllerFiles(repoRoot);
  const answers = responseSchemas(repoRoot, controllerFiles, handlers);

  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of [...routes].sort((a, b) => a.path.localeCompare(b.path) || a.httpMethod.localeCompare(b.httpMethod))) {
    (paths[route.path] ??= {})[route.httpMethod] = describeRoute(route, answers.raw.has(componentName(route)));
  }
  const components = { ...requestComponents, ...answers.components };
  for (const name of Object.keys(requestComponents)) {
    if (name in answers.components) throw new Error(`schema name ${name} is both a request DTO and an answer type; rename one`);
  }
  return {
    openapi: '3.1.0',
    info: DOCUMENT_INFO,
    servers: [{ url: '/', description: 'this api' }],
    tags: [...new Set(routes.map(tagOf))].sort().map((name) => ({ name })),
    paths,
    components: {
      schemas: sortKeys({
        ...components,
        [CREDENTIALS]: {
          type: 'object',
          description: 'Every operation\'s body carries the API key (an HTTP Basic Authorization header is accepted instead).',
          properties: { api_key: { type: 'string' }, api_key_secret: { type: 'string' } },
          required: ['api_key', 'api_key_secret'],
        },
        [ERROR]: {
          type: 'object',
          description: 'Every failure. A few carry more fields (get_workspace_status while starting: operational_status, …).',
          properties: { error_message: { type: 'string' }, error_id: { type: 'string', description: 'only on a 500: the id in the log' } },
          required: ['error_message'],
        },
      }),
      securitySchemes: { basic: { type: 'http', scheme: 'basic', description: 'api_key:api_key_secret, instead of the body fields' } },
    },
  };
}

function discoverRoutes(): Route[] {
  const routes: Route[] = [];
  const seen = new Set<string>();
  for (const controller of API_CONTROLLERS as Array<Type<unknown>>) {
    const base = first(Reflect.getMetadata(PATH_METADATA, controller) as string | string[] | undefined) ?? '';
    const prototype = controller.prototype as Record<string, unknown>;
    for (const method of Object.getOwnPropertyNames(prototype)) {
      if (method === 'constructor' || typeof prototype[method] !== 'function') continue;
      const handler = prototype[method] as object;
      const sub = Reflect.getMetadata(PATH_METADATA, handler) as string | string[] | undefined;
      const verb = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod | undefined;
      if (sub === undefined || verb === undefined) continue;
      const joined = `/${[base, first(sub) ?? ''].filter((p) => p && p !== '/').join('/')}`.replace(/\/+/g, '/');
      if (joined.includes('*')) continue; // signed storage links: not an integrator's route
      const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, method) ?? {}) as Record<string, { index: number; data?: unknown }>;
      const types = (Reflect.getMetadata('design:paramtypes', prototype, method) ?? []) as Array<Type<unknown>>;
      let body: Type<unknown> | null = null;
      const pathParams: string[] = [];
      let rawReply = false;
      const queryParams: string[] = [];
      for (const [key, arg] of Object.entries(args)) {
        const kind = Number(key.split(':')[0]);
        if (kind === RouteParamtypes.BODY && arg.data === undefined && hasValidation(types[arg.index])) body = types[arg.index];
        if (kind === RouteParamtypes.PARAM && typeof arg.data === 'string') pathParams.push(arg.data);
        if (kind === RouteParamtypes.QUERY && typeof arg.data === 'string') queryParams.push(arg.data);
        if (kind === RouteParamtypes.RESPONSE && !Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, controller, method)) rawReply = true;
      }
      const openApiPath = joined.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      const httpMethod = RequestMethod[verb].toLowerCase();
      const key = `${httpMethod} ${openApiPath}`;
      if (seen.has(key)) throw new Error(`two handlers for ${key}`);
      seen.add(key);
      const operation = (Reflect.getMetadata(OPERATION_KEY, handler) as OperationName | undefined) ?? null;
      routes.push({ controller, method, httpMethod, path: openApiPath, operation, body, pathParams: [...new Set(pathParams)].sort(), queryParams: [...new Set(queryParams)].sort(), rawReply });
    }
  }
  const documented = new Set(routes.map((r) => r.operation));
  const missing = Object.keys(OPERATIONS).filter((name) => !documented.has(name as OperationName));
  if (missing.length) throw new Error(`operations in the catalog without a route: ${missing.join(', ')}`);
  return routes;
}

function describeRoute(route: Route, raw: boolean): Record<string, unknown> {
  const op = route.operation;
  const answer = raw
    ? { description: 'The bytes themselves', content: { [binaryType(route)]: { schema: { type: 'string', contentMediaType: binaryType(route) } } } }
    : { description: 'Success', content: { 'application/json': { schema: { $ref: REF + componentName(route) } } } };
  const parameters: Array<Record<string, unknown>> = [
    ...route.pathParams.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
    ...route.queryParams.map((name) => ({ name, in: 'query', required: false, schema: { type: 'string' } })),
  ];
  const description: string[] = [];
  const extra: Record<string, unknown> = {};
  if (op) {
    const spec = OPERATIONS[op];
    const needed = [...closure(spec.permissions)].sort();
    description.push(`Permissions: ${spec.permissions.join(' and ')}` + (needed.length > spec.permissions.length ? ` (with what they depend on: ${needed.join(', ')})` : '') + '.');
    if (spec.writes) description.push('Refused to a Read Only key.');
    if (PAGED_OPERATIONS.includes(op)) description.push('Paged: send `limit` (and `cursor` from the previous answer\'s `next_cursor`); without `limit` the whole list.');
    extra['x-permissions'] = [...spec.permissions];
    extra['x-permissions-closure'] = needed;
    extra['x-writes'] = spec.writes;
    if (CREATING_OPERATIONS.includes(op)) {
      description.push('Idempotent with an `Idempotency-Key` header: a retry with the same key and body replays the first answer.');
      parameters.push({ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', maxLength: 255 }, description: 'Any unique string (a UUID); reuse it when retrying the same request.' });
    }
  } else {
    description.push('Browser-client route: no API key (a session JWT, a cast link or a cookie authenticates it).');
  }
  const requestSchema = op
    ? (route.body ? { allOf: [{ $ref: REF + CREDENTIALS }, { $ref: REF + route.body.name }] } : { $ref: REF + CREDENTIALS })
    : (route.body ? { $ref: REF + route.body.name } : null);
  const errors = errorAnswers(route.operation, route.path, route.httpMethod);
  return {
    operationId: op ?? `${route.controller.name.replace(/Controller$/, '')}_${route.method}`.replace(/^./, (c) => c.toLowerCase()),
    tags: [tagOf(route)],
    summary: op ?? `${route.httpMethod.toUpperCase()} ${route.path}`,
    description: description.join(' '),
    ...extra,
    ...(parameters.length ? { parameters } : {}),
    ...(requestSchema ? { requestBody: { required: true, content: { 'application/json': { schema: requestSchema } } } } : {}),
    ...(op ? { security: [{}, { basic: [] }] } : {}),
    responses: {
      [route.httpMethod === 'post' && !op && route.path.endsWith('/uploads') ? '201' : '200']: answer,
      ...Object.fromEntries(errors.map(([status, why]) => [String(status), {
        description: why,
        ...(status === 429 || status === 503 ? { headers: { 'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer' } } } } : {}),
        content: { 'application/json': { schema: { $ref: REF + ERROR } } },
      }])),
    },
  };
}

/** Request DTO schemas, with every class they reference, keyed by class name (names must be unique). */
function requestSchemas(bodies: Array<Type<unknown>>): Record<string, JsonSchema> {
  const all = validationMetadatasToSchemas({
    refPointerPrefix: REF,
    classTransformerMetadataStorage: defaultMetadataStorage as never,
    additionalConverters: {
      isEnvironment: { type: 'object', additionalProperties: { type: 'string' }, description: 'environment variables: name → value' },
    },
  }) as Record<string, JsonSchema>;
  assertUniqueNames();
  const nullable = optionalProperties();
  const out: Record<string, JsonSchema> = {};
  const pending = [...new Set(bodies.map((b) => b.name))];
  while (pending.length) {
    const name = pending.pop() as string;
    if (name in out) continue;
    const schema = all[name];
    if (!schema) throw new Error(`no class-validator metadata for ${name}`);
    const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
    for (const [property, propertySchema] of Object.entries(properties)) {
      if (nullable.get(name)?.has(property)) properties[property] = orNull(propertySchema);
    }
    out[name] = schema;
    for (const match of JSON.stringify(schema).matchAll(/"#\/components\/schemas\/([A-Za-z0-9_]+)"/g)) pending.push(match[1]);
  }
  return out;
}

/** `@IsOptional()` lets null through (the other validators are skipped): the schema says so. */
function optionalProperties(): Map<string, Set<string>> {
  const storage = getMetadataStorage() as unknown as { validationMetadatas: Map<Type<unknown>, Array<{ type: string; name?: string; propertyName: string }>> };
  const out = new Map<string, Set<string>>();
  for (const [target, metas] of storage.validationMetadatas) {
    for (const meta of metas) {
      if (meta.type !== ValidationTypes.CONDITIONAL_VALIDATION || meta.name !== 'isOptional') continue;
      // Subclasses inherit the property: mark it on every class whose prototype chain holds the target.
      for (const [other] of storage.validationMetadatas) {
        if (other === target || other.prototype instanceof target) {
          if (!out.has(other.name)) out.set(other.name, new Set());
          out.get(other.name)?.add(meta.propertyName);
        }
      }
    }
  }
  return out;
}

function orNull(schema: JsonSchema): JsonSchema {
  if (typeof schema.type === 'string') return { ...schema, type: [schema.type, 'null'] };
  if ('$ref' in schema) return { anyOf: [schema, { type: 'null' }] };
  return schema;
}

function assertUniqueNames(): void {
  const storage = getMetadataStorage() as unknown as { validationMetadatas: Map<Type<unknown>, unknown> };
  const byName = new Map<string, Type<unknown>>();
  for (const [target] of storage.validationMetadatas) {
    const other = byName.get(target.name);
    if (other && other !== target) throw new Error(`two validated classes are named ${target.name}; the document names schemas by class`);
    byName.set(target.name, target);
  }
}

function hasValidation(type: Type<unknown> | undefined): type is Type<unknown> {
  if (!type) return false;
  const storage = getMetadataStorage();
  return storage.getTargetValidationMetadatas(type, '', true, false).length > 0;
}

function binaryType(route: Route): string {
  return (route.operation && BINARY_ANSWERS[route.operation]) || 'application/octet-stream';
}

function componentName(route: Route): string {
  const base = route.operation ?? `${route.controller.name.replace(/Controller$/, '')}_${route.method}`;
  return `${base.split(/[_-]/).map((part) => part.charAt(0).toUpperCase() + part.slice(1)).join('')}Response`;
}

function tagOf(route: Route): string {
  return route.controller.name.replace(/Controller$/, '').replace(/([a-z])([A-Z])/g, '$1 $2');
}

function findControllerFiles(repoRoot: string): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.controller.ts')) files.push(full);
    }
  };
  walk(path.join(repoRoot, 'apps/api/src'));
  return files.sort();
}

function first<T>(value: T | T[] | undefined): T | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function sortKeys<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}
