import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Metrics } from '@ws/metrics';

/**
 * Issue 23, point 3: the example alert rules parse and type-check with Prometheus's own `promtool check rules`
 * (Debian's prometheus package, installed by scripts/ensure-test-tools.sh), and every workspace_server_ metric
 * they name is one the services register (a histogram's series by its base name), and documented.
 */
const REPO = join(__dirname, '..', '..');
const RULES = join(REPO, 'deploy', 'prometheus', 'alerts.yml');
const PROMTOOL = ['/usr/bin/promtool', '/usr/local/bin/promtool'].find((p) => existsSync(p));

describe('example alert rules', () => {
  it('pass promtool check rules', () => {
    if (!PROMTOOL) throw new Error('promtool is needed (Debian package prometheus: scripts/ensure-test-tools.sh installs it)');
    const out = execFileSync(PROMTOOL, ['check', 'rules', RULES], { encoding: 'utf8', timeout: 30_000 });
    expect(out).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('name only metrics the services register and the operator documentation lists', () => {
    const registered = new Set(new Metrics().registry.getMetricsAsArray().map((m) => m.name));
    const documented = readFileSync(join(REPO, 'docs', 'operations.md'), 'utf8');
    const expressions = [...readFileSync(RULES, 'utf8').matchAll(/^\s*expr: (.*)$/gm)].map((m) => m[1]);
    const named = [...new Set(expressions.flatMap((e) => e.match(/workspace_server_[a-z_]*[a-z]/g) ?? []))];
    expect(named.length).toBeGreaterThan(3);
    const base = (metric: string) => metric.replace(/_(bucket|sum|count)$/, '');
    expect(named.filter((metric) => !registered.has(base(metric)))).toEqual([]);
    expect(named.filter((metric) => !documented.includes(`\`${base(metric)}\``))).toEqual([]);
  });
});
