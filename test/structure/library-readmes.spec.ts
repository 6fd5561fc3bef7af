import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Issue 20, point 7: every library says what it is, in a README short enough to be read (≤ 40 lines). */
const LIBS = join(__dirname, '..', '..', 'libs');
const MAX_LINES = 40;

describe('library READMEs', () => {
  // Not the libraries dependency-rules.spec.ts plants for a moment (`planted<pid>`), which a run two files at a time may see.
  const libs = readdirSync(LIBS, { withFileTypes: true }).filter((d) => d.isDirectory() && !/^planted\d+$/.test(d.name)).map((d) => d.name);

  it.each(libs)('libs/%s has a README.md of at most 40 lines', (lib) => {
    const path = join(LIBS, lib, 'README.md');
    expect(existsSync(path)).toBe(true);
    const lines = readFileSync(path, 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(MAX_LINES);
  });
});
