import { checkDownload, downloadPath, signDownload } from './signing';

describe('signed file:// download links', () => {
  const secret = Buffer.alloc(32, 7);
  const now = 1_800_000_000;
  const expires = String(now + 60);
  const signature = signDownload(secret, 'recordings/r1.webm', Number(expires));

  it('accepts its own signature before expiry', () => {
    expect(signature).toMatch(/^[0-9a-f]{64}$/);
    expect(checkDownload(secret, 'recordings/r1.webm', expires, signature, now)).toEqual({ ok: true });
    expect(checkDownload(secret, 'recordings/r1.webm', expires, signature, now + 60)).toEqual({ ok: true });
  });

  it('refuses it once expired', () => {
    expect(checkDownload(secret, 'recordings/r1.webm', expires, signature, now + 61)).toEqual({ ok: false, reason: 'expired' });
  });

  it('refuses another key, another expiry, another secret, or a changed signature', () => {
    expect(checkDownload(secret, 'recordings/r2.webm', expires, signature, now)).toEqual({ ok: false, reason: 'invalid' });
    expect(checkDownload(secret, 'recordings/r1.webm', String(now + 3600), signature, now)).toEqual({ ok: false, reason: 'invalid' });
    expect(checkDownload(Buffer.alloc(32, 8), 'recordings/r1.webm', expires, signature, now)).toEqual({ ok: false, reason: 'invalid' });
    const flipped = (signature[0] === 'a' ? 'b' : 'a') + signature.slice(1);
    expect(checkDownload(secret, 'recordings/r1.webm', expires, flipped, now)).toEqual({ ok: false, reason: 'invalid' });
  });

  it('calls a forged link invalid even when its expiry has passed (expiry is only told for genuine links)', () => {
    expect(checkDownload(secret, 'recordings/r1.webm', String(now - 10), '0'.repeat(64), now)).toEqual({ ok: false, reason: 'invalid' });
  });

  it.each([
    [undefined, signature],
    [expires, undefined],
    ['-1', signature],
    ['1e10', signature],
    [[expires], signature],
    [expires, signature.toUpperCase()],
    [expires, signature.slice(0, 63)],
    [expires, `${signature}00`],
  ])('refuses malformed query values (%j, %j)', (exp, sig) => {
    expect(checkDownload(secret, 'recordings/r1.webm', exp, sig, now)).toEqual({ ok: false, reason: 'invalid' });
  });

  it('refuses keys that are not valid object keys', () => {
    const forged = signDownload(secret, '../x', Number(expires));
    expect(checkDownload(secret, '../x', expires, forged, now)).toEqual({ ok: false, reason: 'invalid' });
  });

  it('builds paths of encoded segments', () => {
    expect(downloadPath('a/b+c@d.bin')).toBe('/api/storage/a/b%2Bc%40d.bin');
  });
});
