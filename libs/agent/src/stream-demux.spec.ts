import { decodeUtf8Prefix, DockerOutputCollector } from './stream-demux';

function frame(stream: number, data: string | Buffer): Buffer {
  const body = Buffer.isBuffer(data) ? data : Buffer.from(data);
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
}

describe('DockerOutputCollector', () => {
  it('separates stdout and stderr', () => {
    const c = new DockerOutputCollector(1024);
    c.push(Buffer.concat([frame(1, 'hello '), frame(2, 'oops'), frame(1, 'world')]));
    expect(c.stdout).toBe('hello world');
    expect(c.stderr).toBe('oops');
    expect(c.stdoutTruncated || c.stderrTruncated).toBe(false);
  });

  it('handles headers and bodies split at every byte', () => {
    const all = Buffer.concat([frame(1, 'abc'), frame(2, 'de'), frame(1, ''), frame(1, 'fgh')]);
    const c = new DockerOutputCollector(1024);
    for (let i = 0; i < all.length; i++) c.push(all.subarray(i, i + 1));
    expect(c.stdout).toBe('abcfgh');
    expect(c.stderr).toBe('de');
  });

  it('caps each stream and counts what was dropped', () => {
    const c = new DockerOutputCollector(5);
    c.push(Buffer.concat([frame(1, '0123'), frame(1, '456789'), frame(2, 'ab')]));
    expect(c.stdout).toBe('01234');
    expect(c.stdoutTruncated).toBe(true);
    expect(c.stdoutBytes).toBe(10);
    expect(c.stderr).toBe('ab');
    expect(c.stderrTruncated).toBe(false);
  });

  it('does not end truncated output in half a character', () => {
    const c = new DockerOutputCollector(4);
    c.push(frame(1, 'abc€'));
    expect(c.stdout).toBe('abc');
  });
});

describe('decodeUtf8Prefix', () => {
  it('keeps complete characters', () => {
    expect(decodeUtf8Prefix(Buffer.from('a€'), true)).toBe('a€');
    expect(decodeUtf8Prefix(Buffer.from('a€').subarray(0, 3), true)).toBe('a');
    expect(decodeUtf8Prefix(Buffer.from('😀').subarray(0, 3), true)).toBe('');
    expect(decodeUtf8Prefix(Buffer.alloc(0), true)).toBe('');
  });
});
