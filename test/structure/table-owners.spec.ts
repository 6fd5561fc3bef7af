import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/**
 * One owner per table: each table belongs to the library that declares its entity (`@Entity('name')`). Raw SQL
 * in production code may name another library's table only to read it (FROM, JOIN), never to change it
 * (UPDATE, INSERT INTO, DELETE FROM), and the workspaces library's tables are named in SQL nowhere else at all:
 * other libraries read and change workspaces through the functions @ws/workspaces exports.
 */
const ROOT = resolve(__dirname, '..', '..');
/** Tables only their owner's SQL may name, reads included. */
const CLOSED_LIBRARIES = ['workspaces'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.spec.ts') && !name.includes('test-helpers') ? [path] : [];
  });
}

const libraryOf = (path: string) => relative(ROOT, path).split('/')[1];
const productionFiles = () => [
  ...readdirSync(join(ROOT, 'libs')).flatMap((lib) => sourceFiles(join(ROOT, 'libs', lib, 'src'))),
  ...readdirSync(join(ROOT, 'apps')).filter((app) => app !== 'web').flatMap((app) => sourceFiles(join(ROOT, 'apps', app, 'src'))),
];

/** table → owning library, from the entity declarations. */
function owners(): Map<string, string> {
  const found = new Map<string, string>();
  for (const path of productionFiles().filter((p) => relative(ROOT, p).startsWith('libs/'))) {
    for (const [, table] of readFileSync(path, 'utf8').matchAll(/@Entity\('([a-z_]+)'\)/g)) found.set(table, libraryOf(path));
  }
  return found;
}

/** Each SQL mention of a table in a file: the keyword before it and the table. Upper-case keywords only, so prose does not count. */
export function sqlMentions(text: string): Array<{ keyword: string; table: string }> {
  return [...text.matchAll(/\b(FROM|JOIN|UPDATE|INSERT INTO|DELETE FROM)\s+"?([a-z_]+)"?/g)].map(([, keyword, table]) => ({ keyword, table }));
}

/** Where a file breaks the rule, as `file: KEYWORD table (owner)` lines. */
export function breaches(file: string, text: string, tableOwners: Map<string, string>): string[] {
  const place = relative(ROOT, file);
  const reader = place.startsWith('libs/') ? libraryOf(file) : `app ${place.split('/')[1]}`;
  return sqlMentions(text).flatMap(({ keyword, table }) => {
    const owner = tableOwners.get(table);
    if (!owner || owner === reader) return [];
    const writes = keyword !== 'FROM' && keyword !== 'JOIN';
    return writes || CLOSED_LIBRARIES.includes(owner) ? [`${place}: ${keyword} ${table} (owned by ${owner})`] : [];
  });
}

describe('one owner per table', () => {
  const tableOwners = owners();

  it('knows the owners from the entities', () => {
    expect(tableOwners.get('workspaces')).toBe('workspaces');
    expect(tableOwners.get('staging_configs')).toBe('staging');
    expect(tableOwners.get('users')).toBe('users');
  });

  it('no production SQL changes another library\'s table or names the workspaces library\'s tables outside it', () => {
    expect(productionFiles().flatMap((file) => breaches(file, readFileSync(file, 'utf8'), tableOwners))).toEqual([]);
  });

  it('catches a planted breach of each kind (the check can fail)', () => {
    const staging = join(ROOT, 'libs', 'staging', 'src', 'planted.ts');
    expect(breaches(staging, "db.query('SELECT id FROM workspaces WHERE id = $1')", tableOwners)).toEqual(['libs/staging/src/planted.ts: FROM workspaces (owned by workspaces)']);
    expect(breaches(staging, "db.query('UPDATE users SET locked = true')", tableOwners)).toEqual(['libs/staging/src/planted.ts: UPDATE users (owned by users)']);
    expect(breaches(staging, "db.query('DELETE FROM images')", tableOwners)).toEqual(['libs/staging/src/planted.ts: DELETE FROM images (owned by images)']);
    // Reading a lower library's table is allowed, and so is every mention in the owner's own code.
    expect(breaches(staging, "db.query('SELECT 1 FROM images i JOIN servers s ON true')", tableOwners)).toEqual([]);
    expect(breaches(join(ROOT, 'libs', 'workspaces', 'src', 'planted.ts'), "db.query('UPDATE workspaces SET status = $1')", tableOwners)).toEqual([]);
  });
});
