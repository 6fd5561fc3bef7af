import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { clientCsp, inlineScriptHashes } from './web-client';

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

describe('the page\'s inline scripts in its CSP', () => {
  it('hashes each inline script exactly as written, and no script loaded from a file', () => {
    const html = '<head><script>\n  var a = 1;\n</script><script type="module" src="/app.js"></script><script>b()</script></head>';
    expect(inlineScriptHashes(html)).toEqual([sha256('\n  var a = 1;\n'), sha256('b()')]);
  });

  it('allows the client page\'s one inline script (its early connect call) and no other', () => {
    const html = readFileSync(join(__dirname, '..', '..', '..', 'web', 'public', 'index.html'), 'utf8');
    const hashes = inlineScriptHashes(html);
    expect(hashes).toHaveLength(1);
    const scriptSrc = clientCsp(undefined, hashes).split('; ').find((d) => d.startsWith('script-src '));
    expect(scriptSrc).toBe(`script-src 'self' ${hashes[0]}`);
    expect(clientCsp()).toContain("script-src 'self';");
  });
});
