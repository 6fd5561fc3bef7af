import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validate } from '@readme/openapi-parser';
import { OPERATIONS } from '@ws/auth';
import { CREATING_OPERATIONS as CLIENT_CREATING, PAGED_OPERATIONS as CLIENT_PAGED } from '@workspace-server/client';
import { findRepoRoot } from '../web/web-client';
import { OPENAPI_FILE } from './api-reference';
import { buildOpenApiDocument } from './openapi-document';
import { CREATING_OPERATIONS, PAGED_OPERATIONS } from './openapi-rules';

/**
 * The drift check CI runs: openapi.json and the client's generated types must equal what the code generates now.
 * `npm run openapi` (OPENAPI_WRITE=1) writes both instead of comparing.
 */
const root = findRepoRoot(__dirname);
const CLIENT_TYPES = 'libs/client/src/generated/openapi.ts';
const WRITE = process.env.OPENAPI_WRITE === '1';

type Document = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema> } };
type Operation = { operationId: string; requestBody?: { content: Record<string, { schema: Schema }> }; responses: Record<string, unknown>; parameters?: Array<{ name: string }> };
type Schema = { required?: string[]; properties?: Record<string, Schema>; allOf?: Schema[]; $ref?: string };

describe('OpenAPI document', () => {
  let document: Document;
  let text: string;

  beforeAll(() => {
    document = buildOpenApiDocument(root) as Document;
    text = `${JSON.stringify(document, null, 2)}\n`;
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await validate(JSON.parse(text) as never);
    expect(result.valid ? [] : result.errors).toEqual([]);
    expect(result.specification).toBe('OpenAPI');
  });

  it('documents every operation of the catalog with its permissions and error answers', () => {
    for (const [name, spec] of Object.entries(OPERATIONS)) {
      const operation = document.paths[`/api/public/${name}`]?.post as Operation & { 'x-permissions': string[] };
      expect(operation?.operationId).toBe(name);
      expect(operation['x-permissions']).toEqual([...spec.permissions]);
      for (const status of ['200', '400', '401', '403', '413', '429', '503']) expect(Object.keys(operation.responses)).toContain(status);
    }
  });

  it('requires what the contract requires (samples)', () => {
    const schemas = document.components.schemas;
    const body = (op: string) => (document.paths[`/api/public/${op}`].post.requestBody?.content['application/json'].schema.allOf ?? [])[1]?.$ref?.split('/').pop() as string;
    expect(schemas[body('create_user')].required).toEqual(['target_user']);
    expect(schemas.NewUserFields.required).toEqual(['username']);
    expect(schemas[body('request_workspace')].required ?? []).toEqual([]);
  });

  it('marks the creating operations as taking an Idempotency-Key, and agrees with the client on them and on the paged lists', () => {
    expect([...CLIENT_CREATING].sort()).toEqual([...CREATING_OPERATIONS].sort());
    expect([...CLIENT_PAGED].sort()).toEqual([...PAGED_OPERATIONS].sort());
    for (const name of CREATING_OPERATIONS.filter((op) => op in OPERATIONS)) {
      expect(document.paths[`/api/public/${name}`].post.parameters?.map((p) => p.name)).toContain('Idempotency-Key');
    }
  });

  it(`matches the committed ${OPENAPI_FILE} and ${CLIENT_TYPES} (run npm run openapi after changing a DTO, mapper or route)`, () => {
    const dir = mkdtempSync(join(tmpdir(), 'openapi-'));
    try {
      writeFileSync(join(dir, 'openapi.json'), text);
      execFileSync(process.execPath, [join(root, 'node_modules/openapi-typescript/bin/cli.js'), join(dir, 'openapi.json'), '-o', join(dir, 'openapi.ts')], { stdio: 'pipe', timeout: 120_000 });
      const types = `${CLIENT_TYPES_HEADER}${readFileSync(join(dir, 'openapi.ts'), 'utf8')}`;
      if (WRITE) {
        writeFileSync(join(root, OPENAPI_FILE), text);
        writeFileSync(join(root, CLIENT_TYPES), types);
      }
      expect(readFileSync(join(root, OPENAPI_FILE), 'utf8')).toBe(text);
      expect(readFileSync(join(root, CLIENT_TYPES), 'utf8')).toBe(types);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const CLIENT_TYPES_HEADER = '// Generated from openapi.json by openapi-typescript (npm run openapi). Do not edit.\n';
