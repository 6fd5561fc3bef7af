import { vncAuthResponse } from './des';
import { read } from './feeder';
import { ParserRunner } from './parser-runner';
import { acceptWithoutSecurity, negotiateAsClient } from './rfb-handshake';
import { cat, u32, u8, version } from './rfb-test-helpers';

/** Pushes `bytes` one byte at a time (the hardest fragmentation). */
function trickle(runner: ParserRunner, bytes: Buffer): void {
  for (const byte of bytes) runner.push(Buffer.from([byte]));
}

describe('ParserRunner', () => {
  it('runs parsers one after another over fragmented bytes, keeping what the first did not read', async () => {
    const runner = new ParserRunner();
    trickle(runner, Buffer.from('abcdef'));
    expect((await runner.run(read(4), Date.now() + 1000, 'four bytes')).toString()).toBe('abcd');
    expect(runner.pending).toBe(2);
    const next = runner.run(read(3), Date.now() + 1000, 'three bytes');
    runner.push(Buffer.from('g'));
    expect((await next).toString()).toBe('efg');
  });

  it('fails a parser at its deadline, and every later one (the stream position is lost)', async () => {
    const runner = new ParserRunner();
    runner.push(Buffer.from('a'));
    await expect(runner.run(read(2), Date.now() + 20, 'two bytes')).rejects.toMatchObject({ kind: 'timeout', message: 'timed out waiting for two bytes' });
    await expect(runner.run(read(0), Date.now() + 1000, 'nothing')).rejects.toMatchObject({ kind: 'timeout' });
  });

  it('reads what arrived before the end, then fails with the end', async () => {
    const runner = new ParserRunner();
    runner.push(Buffer.from('ab'));
    runner.end(new Error('closed'));
    expect((await runner.run(read(1), Date.now() + 1000, 'a byte')).toString()).toBe('a');
    await expect(runner.run(read(2), Date.now() + 1000, 'two bytes')).rejects.toThrow('closed');
  });

  it('rejects with what the parser threw', async () => {
    const runner = new ParserRunner();
    const failing = (function* () {
      yield* read(1);
      throw new Error('bad byte');
    })();
    const run = runner.run(failing, Date.now() + 1000, 'a byte');
    runner.push(u8(9));
    await expect(run).rejects.toThrow('bad byte');
  });
});

describe('client handshake (negotiateAsClient)', () => {
  it('answers a 3.8 server offering VNC auth with the password, byte by byte', async () => {
    const runner = new ParserRunner();
    const sent: Buffer[] = [];
    const challenge = Buffer.alloc(16, 7);
    const done = runner.run(negotiateAsClient('secret', (bytes) => sent.push(bytes)), Date.now() + 1000, 'the handshake');
    trickle(runner, cat(version(8), u8(2, 1, 2), challenge, u32(0)));
    expect(await done).toEqual({ serverVersion: 'RFB 003.008', flow: 8, securityType: 2 });
    expect(sent).toEqual([Buffer.from('RFB 003.008\n'), u8(2), vncAuthResponse('secret', challenge)]);
  });

  it('replies with the 3.3 flow to a 3.3 server and takes the type it chooses', async () => {
    const runner = new ParserRunner();
    const sent: Buffer[] = [];
    const done = runner.run(negotiateAsClient(undefined, (bytes) => sent.push(bytes)), Date.now() + 1000, 'the handshake');
    runner.push(cat(version(3), u32(1)));
    expect(await done).toMatchObject({ flow: 3, securityType: 1 });
    expect(sent).toEqual([Buffer.from('RFB 003.003\n')]);
  });

  it('fails with the server reason and a stable kind', async () => {
    const runner = new ParserRunner();
    const done = runner.run(negotiateAsClient('wrong', () => undefined), Date.now() + 1000, 'the handshake');
    runner.push(cat(version(8), u8(1, 2), Buffer.alloc(16), u32(1), u32(6), Buffer.from('denied')));
    await expect(done).rejects.toMatchObject({ kind: 'auth_failed', reason: 'denied' });
  });

  it('needs a password when the server offers VNC auth only', async () => {
    const runner = new ParserRunner();
    const done = runner.run(negotiateAsClient(undefined, () => undefined), Date.now() + 1000, 'the handshake');
    runner.push(cat(version(8), u8(1, 2)));
    await expect(done).rejects.toMatchObject({ kind: 'auth_required' });
  });
});

describe('server handshake offering None (acceptWithoutSecurity)', () => {
  it.each([
    [3, [u8(0, 0, 0, 1)]],
    [7, [u8(1, 1)]],
    [8, [u8(1, 1), u32(0)]],
  ] as const)('speaks the %i flow the browser chose', async (minor, answers) => {
    const runner = new ParserRunner();
    const sent: Buffer[] = [];
    const done = runner.run(acceptWithoutSecurity((bytes) => sent.push(bytes)), Date.now() + 1000, 'the handshake');
    trickle(runner, minor === 3 ? version(3) : cat(version(minor), u8(1)));
    await done;
    expect(sent).toEqual([Buffer.from('RFB 003.008\n'), ...answers]);
  });

  it('refuses a browser choosing another security type', async () => {
    const runner = new ParserRunner();
    const done = runner.run(acceptWithoutSecurity(() => undefined), Date.now() + 1000, 'the handshake');
    runner.push(cat(version(8), u8(2)));
    await expect(done).rejects.toMatchObject({ kind: 'protocol' });
  });
});
