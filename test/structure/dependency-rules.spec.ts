import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/**
 * The library rules of .dependency-cruiser.cjs (npm run lint) really fail: a violation of each is planted in
 * temporary files inside the tree, the checker runs on them, and each rule must be reported for its plant.
 */
const ROOT = resolve(__dirname, '..', '..');
const CLI = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
const TAG = `planted${process.pid}`;

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

/**
 * Runs the checker on these paths once: the violations it reports, and how many are errors, which is the exit code
 * `npm run lint` gets from it (its err output exits with that count; the json output always exits 0).
 */
function depcruise(paths: string[]): { errors: number; violations: Violation[] } {
  const run = spawnSync(process.execPath, [CLI, '--config', '.dependency-cruiser.cjs', '--output-type', 'json', ...paths], { cwd: ROOT, encoding: 'utf8', timeout: 120_000, maxBuffer: 256 * 1024 ** 2 });
  const report = JSON.parse(run.stdout) as { summary: { error: number; violations: Violation[] } };
  return { errors: report.summary.error, violations: report.summary.violations };
}

/** The plants: a file path (relative to the root) and what it contains; each names the rule it breaks. */
const PLANTS: Record<string, Array<[string, string]>> = {
  'infrastructure-points-up': [[`libs/common/src/${TAG}-up.ts`, "export { WorkspacesModule } from '@ws/workspaces';\n"]],
  'identity-points-up': [[`libs/users/src/${TAG}-up.ts`, "export { StagingModule } from '@ws/staging';\n"]],
  'feature-points-up': [[`libs/staging/src/${TAG}-up.ts`, "export { AppModule } from '../../../apps/api/src/app.module';\n"]],
  'no-cycle': [
    [`libs/zones/src/${TAG}-a.ts`, `import { b } from './${TAG}-b';\nexport const a = () => b;\n`],
    [`libs/zones/src/${TAG}-b.ts`, `import { a } from './${TAG}-a';\nexport const b = () => a;\n`],
  ],
  'library-through-its-index': [[`libs/staging/src/${TAG}-deep.ts`, "export { Workspace } from '../../workspaces/src/workspace.entity';\n"]],
  'apps-and-tests-through-the-index': [[`apps/cli/src/${TAG}-deep.ts`, "export { Workspace } from '../../../libs/workspaces/src/workspace.entity';\n"]],
  'every-library-has-a-layer': [
    [`libs/${TAG}/src/index.ts`, 'export const unplaced = 1;\n'],
    [`libs/staging/src/${TAG}-new.ts`, `export { unplaced } from '../../${TAG}/src';\n`],
  ],
  'client-stands-alone': [[`libs/client/src/${TAG}-server.ts`, "export { ErrorCode } from '@ws/common';\n"]],
  'server-code-does-not-use-the-client': [[`libs/workspaces/src/${TAG}-client.ts`, "export { CREATING_OPERATIONS } from '@workspace-server/client';\n"]],
  resolvable: [[`libs/casting/src/${TAG}-alias.ts`, "export { Workspace } from '@ws/workspaces/workspace.entity';\n"]],
};

describe('library rules (npm run lint)', () => {
  const written: string[] = [];
  beforeAll(() => {
    for (const [path, text] of Object.values(PLANTS).flat()) {
      mkdirSync(dirname(join(ROOT, path)), { recursive: true });
      writeFileSync(join(ROOT, path), text);
      written.push(path);
    }
  });
  afterAll(() => {
    for (const path of written) rmSync(join(ROOT, path), { force: true });
    rmSync(join(ROOT, 'libs', TAG), { recursive: true, force: true });
  });

  it('fails on each planted violation, naming its rule and its file', () => {
    const { errors, violations } = depcruise(written);
    expect(errors).toBeGreaterThan(0);
    for (const [rule, files] of Object.entries(PLANTS)) {
      const reported = violations.filter((v) => v.rule.name === rule).map((v) => v.from);
      expect({ rule, reported: reported.some((from) => files.some(([path]) => from === path)) }).toEqual({ rule, reported: true });
    }
  });

  it('passes on the tree as it is, with no exception listed', () => {
    const { errors, violations } = depcruise(['apps', 'libs', 'test', 'bench'].filter((dir) => !dir.includes(TAG)));
    expect(violations.filter((v) => !v.from.includes(TAG) && !v.to.includes(TAG))).toEqual([]);
    // The planted files of the other test are still there while this one runs: only they may be reported.
    expect(errors === 0 || violations.every((v) => v.from.includes(TAG) || v.to.includes(TAG))).toBe(true);
  });
});
