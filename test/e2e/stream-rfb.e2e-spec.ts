/**
 * Real integration test of libs/stream against x11vnc on an Xvfb display (loopback only):
 * screenshots (captureJpeg, with and without VNC auth) and the websocket ↔ VNC proxy (RfbSession),
 * including view-only input dropping proven by counters and by the X server's pointer position.
 * Needs Xvfb, x11vnc, xsetroot and xdotool (scripts/ensure-test-tools.sh installs them); without xdotool the X
 * pointer checks are skipped, except under CI=true, where the suite fails.
 */
import { ChildProcess, execFile, spawn } from 'child_process';
import { accessSync, constants, existsSync, rmSync, writeFileSync } from 'fs';
import { AddressInfo } from 'net';
import { tmpdir } from 'os';
import { delimiter, join } from 'path';
import { decode } from 'jpeg-js';
import WebSocket, { WebSocketServer, createWebSocketStream } from 'ws';
import { Encoding, RfbClient, RfbError, RfbSession, RfbSessionRegistry, captureJpeg } from '@ws/stream';
import { freePort, prerequisite } from './harness';

const WIDTH = 640;
const HEIGHT = 400;
const PASSWORD = 'e2e-pass';

function onPath(bin: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, bin), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** The X pointer checks read and move the pointer with xdotool. */
const POINTER_CHECKS = prerequisite(onPath('xdotool'), 'xdotool (the X pointer checks)', 'scripts/ensure-test-tools.sh installs Debian\'s xdotool');

async function waitFor<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 20_000, intervalMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, timeout: 10_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${cmd} ${args.join(' ')} failed: ${error.message} ${stderr}`));
      else resolve(stdout);
    });
  });
}

interface Proc {
  child: ChildProcess;
  output: () => string;
}

const processes: Proc[] = [];

function start(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): Proc {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.on('error', (e) => keep(Buffer.from(`spawn error: ${e.message}`)));
  const proc = { child, output: () => out };
  processes.push(proc);
  return proc;
}

const exited = (p: Proc) => p.child.exitCode !== null || p.child.signalCode !== null;

async function stop(p: Proc): Promise<void> {
  if (exited(p)) return;
  const gone = new Promise<void>((r) => p.child.once('exit', () => r()));
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 5000);
  await gone;
  clearTimeout(timer);
}

let display = '';

async function startXvfb(): Promise<void> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const n = 50 + Math.floor(Math.random() * 50);
    if (existsSync(`/tmp/.X11-unix/X${n}`) || existsSync(`/tmp/.X${n}-lock`)) continue;
    // -br: with Xvfb 21's default root background ("None"), xsetroot -solid has no visible effect.
    const xvfb = start('Xvfb', [`:${n}`, '-screen', '0', `${WIDTH}x${HEIGHT}x24`, '-nolisten', 'tcp', '-br']);
    const ready = await waitFor(`Xvfb :${n}`, () => (exited(xvfb) ? 'exited' : existsSync(`/tmp/.X11-unix/X${n}`) ? 'ready' : undefined), 15_000);
    if (ready === 'ready') {
      display = `:${n}`;
      return;
    }
  }
  throw new Error('could not start Xvfb on a free display :50-:99');
}

/** Starts x11vnc on a free loopback port and waits for its PORT= banner. */
async function startX11vnc(extra: string[]): Promise<number> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const vnc = start('x11vnc', ['-display', display, '-localhost', '-rfbport', String(port), '-forever', '-shared', ...extra]);
    const banner = await waitFor(`x11vnc banner on ${port}`, () => (exited(vnc) ? 'exited' : vnc.output().includes(`PORT=${port}`) ? 'ready' : undefined), 30_000);
    if (banner === 'ready') return port;
  }
  throw new Error(`x11vnc did not start: ${processes[processes.length - 1]?.output().slice(-2000)}`);
}

const setRoot = (colour: string) => run('xsetroot', ['-solid', colour], { DISPLAY: display });

async function mouseLocation(): Promise<{ x: number; y: number } | undefined> {
  if (!POINTER_CHECKS) return undefined;
  const out = await run('xdotool', ['getmouselocation'], { DISPLAY: display });
  const m = /x:(\d+) y:(\d+)/.exec(out);
  return m ? { x: Number(m[1]), y: Number(m[2]) } : undefined;
}

/** Mean RGB of a (2r+1)² block of an RGBA image. */
function meanRgb(data: Uint8Array, width: number, cx: number, cy: number, r = 2): number[] {
  const sum = [0, 0, 0];
  let n = 0;
  for (let y = cy - r; y <= cy + r; y++) {
    for (let x = cx - r; x <= cx + r; x++) {
      for (let c = 0; c < 3; c++) sum[c] += data[(y * width + x) * 4 + c];
      n++;
    }
  }
  return sum.map((s) => s / n);
}

const near = (rgb: number[], hex: string, tolerance: number) => {
  const target = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return rgb.every((v, i) => Math.abs(v - target[i]) <= tolerance);
};

let rawPort = 0; // x11vnc -nopw -nocursor: screenshots and the Raw proxy client
let authPort = 0; // x11vnc -passwd
let cursorPort = 0; // x11vnc -nopw with cursor shape updates: Tight/ZRLE/Cursor through the proxy

beforeAll(async () => {
  const missing = ['Xvfb', 'x11vnc', 'xsetroot'].filter((bin) => !onPath(bin));
  if (missing.length) throw new Error(`missing ${missing.join(', ')}: run scripts/ensure-test-tools.sh (apt-installs xvfb x11vnc x11-xserver-utils)`);
  await startXvfb();
  if (POINTER_CHECKS) await run('xdotool', ['mousemove', '630', '390'], { DISPLAY: display });
  rawPort = await startX11vnc(['-nopw', '-nocursor']);
  authPort = await startX11vnc(['-passwd', PASSWORD, '-nocursor']);
  cursorPort = await startX11vnc(['-nopw']);
  // Painted after x11vnc started: x11vnc (0.9.16) never sends a root background that was already there
  // when it started (windows are fine). captureJpeg's settle phase then picks up this change, which x11vnc
  // only notices once a client is connected (it does not poll without clients).
  await setRoot('#336699');
});

afterAll(async () => {
  await Promise.all(processes.splice(0).reverse().map(stop));
});

describe('captureJpeg against x11vnc', () => {
  it('returns a 300x188 JPEG of the #336699 desktop', async () => {
    const shot = await captureJpeg('127.0.0.1', rawPort, { width: 300, timeoutMs: 20_000 });
    expect(shot).toMatchObject({ width: 300, height: 188, sourceWidth: WIDTH, sourceHeight: HEIGHT });
    expect(shot.jpeg.subarray(0, 2).toString('hex')).toBe('ffd8');
    const img = decode(shot.jpeg, { useTArray: true });
    expect([img.width, img.height]).toEqual([300, 188]);
    const centre = meanRgb(img.data, img.width, 150, 94);
    expect(near(centre, '#336699', 10)).toBe(true);
  });

  it('authenticates with VNC Authentication (DES) and reports a wrong password as auth_failed', async () => {
    const shot = await captureJpeg('127.0.0.1', authPort, { width: 64, password: PASSWORD, timeoutMs: 20_000 });
    expect([shot.width, shot.height]).toEqual([64, 40]);
    const error = await captureJpeg('127.0.0.1', authPort, { width: 64, password: 'wrong', timeoutMs: 20_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RfbError);
    expect((error as RfbError).kind).toBe('auth_failed');
    await expect(captureJpeg('127.0.0.1', authPort, { timeoutMs: 20_000 })).rejects.toMatchObject({ kind: 'auth_required' });
  });

  it('reports a closed port as connection_refused', async () => {
    await expect(captureJpeg('127.0.0.1', await freePort(), { timeoutMs: 5000 })).rejects.toMatchObject({ kind: 'connection_refused' });
  });
});

describe('RfbSession proxy against x11vnc', () => {
  const registry = new RfbSessionRegistry();
  let wss: WebSocketServer;
  let wsPort = 0;
  const opened: Promise<RfbSession | Error>[] = [];
  const sockets: WebSocket[] = [];

  beforeAll(async () => {
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((r) => wss.once('listening', () => r()));
    wsPort = (wss.address() as AddressInfo).port;
    wss.on('connection', (ws, req) => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const port = Number(url.searchParams.get('port'));
      const opening = RfbSession.open(ws, '127.0.0.1', port, {
        viewOnly: url.searchParams.get('viewOnly') === '1',
        workspaceId: 'ws-e2e',
        userId: url.searchParams.get('user') ?? 'owner',
        pingIntervalMs: 200,
        connectTimeoutMs: 5000,
      }).then(
        (session) => {
          registry.add('ws-e2e', session);
          return session;
        },
        (error: Error) => error,
      );
      opened.push(opening);
    });
  });

  afterAll(async () => {
    for (const s of sockets) s.terminate();
    registry.closeAll('ws-e2e', 'test over');
    await new Promise<void>((r) => wss.close(() => r()));
  });

  async function connect(query: Record<string, string>): Promise<{ ws: WebSocket; session: RfbSession }> {
    const ws = new WebSocket(`ws://127.0.0.1:${wsPort}/?${new URLSearchParams(query)}`);
    sockets.push(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const index = opened.length - 1;
    const result = await waitFor('the proxy session', () => opened[index]);
    const session = await result;
    if (session instanceof Error) throw session;
    return { ws, session };
  }

  it('bridges a Raw client: handshake, frames, stats, changed after drawing, input forwarded', async () => {
    const { ws, session } = await connect({ port: String(rawPort), user: 'owner' });
    const client = await RfbClient.fromStream(createWebSocketStream(ws), { timeoutMs: 20_000 });
    expect([client.info.width, client.info.height]).toEqual([WIDTH, HEIGHT]);
    const frame = await client.captureFrame({ timeoutMs: 20_000, settleMs: 1000 });
    expect(near(meanRgb(frame.data, frame.width, 320, 200), '#336699', 0)).toBe(true);

    let stats = session.stats();
    expect(stats).toMatchObject({ resx: WIDTH, resy: HEIGHT, phase: 'streaming', viewOnly: false });
    expect(stats.updates).toBeGreaterThan(0);
    expect(stats.bytesToClient).toBeGreaterThan(WIDTH * HEIGHT * 4);
    expect(stats.bytesToServer).toBeGreaterThan(0);
    expect(stats.encodings.raw.count).toBeGreaterThan(0);
    expect(stats.encodingsNegotiated).toEqual([Encoding.Raw, Encoding.CopyRect, Encoding.DesktopSize]);
    expect(stats.server_time).not.toBeNull();

    // Draw, then follow incremental updates until the new colour arrives.
    const updatesBefore = stats.updates;
    await setRoot('#cc3300');
    await waitFor('the new background through the proxy', async () => {
      const { frame: f } = await client.update({ incremental: true, timeoutMs: 20_000 });
      return near(meanRgb(f.data, f.width, 320, 200), '#cc3300', 0) || undefined;
    });
    stats = session.stats();
    expect(stats.updates).toBeGreaterThan(updatesBefore);
    expect(stats.changed).toBeGreaterThan(0);
    expect(stats.changed).toBeLessThanOrEqual(100);

    // Input is forwarded: counters, and the X pointer really moves (checked with xdotool).
    client.sendPointerEvent(123, 77, 0);
    client.sendKeyEvent(true, 0xffe1); // Shift_L
    client.sendKeyEvent(false, 0xffe1);
    await waitFor('forwarded input', () => session.stats().inputForwarded.total === 3 || undefined);
    expect(session.stats().inputForwarded).toMatchObject({ pointer: 1, key: 2 });
    expect(session.stats().inputDropped.total).toBe(0);
    if (POINTER_CHECKS) await waitFor('the X pointer at 123,77', async () => {
      const at = await mouseLocation();
      return (at?.x === 123 && at.y === 77) || undefined;
    });

    // Ping RTT and bottleneck figures.
    await waitFor('a ping round trip', () => session.stats().pingMs !== null || undefined);
    const figures = session.bottleneck();
    expect(figures).toHaveLength(4);
    for (const f of figures) expect(f >= 0 && f <= 10).toBe(true);

    // Registry selection.
    expect(registry.select('ws-e2e', 'auto', 'owner').map((s) => s.id)).toEqual([session.id]);
    expect(registry.select('ws-e2e', 'auto', 'someone-else')).toEqual([]);
    expect(registry.select('ws-e2e', session.id).map((s) => s.id)).toEqual([session.id]);
    expect(registry.select('ws-e2e', 'none')).toEqual([]);

    // Closing the browser side closes the VNC side and unregisters the session.
    await client.close();
    await waitFor('the session to close', () => session.closed || undefined);
    expect(session.closeReason?.initiator).toBe('client');
    expect(registry.list('ws-e2e')).not.toContain(session);
  });

  it('view-only: pointer/key/clipboard are dropped (counters, bytes, X pointer unchanged)', async () => {
    if (POINTER_CHECKS) await run('xdotool', ['mousemove', '40', '30'], { DISPLAY: display });
    const { ws, session } = await connect({ port: String(rawPort), viewOnly: '1', user: 'viewer' });
    const client = await RfbClient.fromStream(createWebSocketStream(ws), { timeoutMs: 20_000 });
    await client.captureFrame({ timeoutMs: 20_000 });
    const bytesBefore = session.stats().bytesToServer;

    client.sendPointerEvent(300, 200, 1);
    client.sendKeyEvent(true, 0x61);
    client.sendKeyEvent(false, 0x61);
    client.sendClientCutText('not for you');
    // A non-incremental request is answered at once: a barrier proving the server processed everything before it.
    await client.update({ incremental: false, timeoutMs: 20_000 });
    const stats = session.stats();
    expect(stats.inputDropped).toEqual({ key: 2, pointer: 1, clipboard: 1, resize: 0, total: 4 });
    expect(stats.inputForwarded.total).toBe(0);
    expect(stats.bytesToServer - bytesBefore).toBe(10); // only the FramebufferUpdateRequest reached x11vnc
    expect(stats.bytesFromClient - stats.bytesToServer).toBeGreaterThan(0);
    if (POINTER_CHECKS) expect(await mouseLocation()).toEqual({ x: 40, y: 30 });

    // Viewer sessions are not the owner's: 'auto' for the owner does not include them, 'all' does.
    expect(registry.select('ws-e2e', 'auto', 'owner')).not.toContain(session);
    expect(registry.select('ws-e2e', 'all')).toContain(session);
    await client.close();
    await waitFor('the session to close', () => session.closed || undefined);
  });

  it('follows Tight, ZRLE and cursor updates from x11vnc without losing sync', async () => {
    const { ws, session } = await connect({ port: String(cursorPort) });
    // A hand-rolled noVNC-like client: it requests what noVNC requests and lets the proxy do the parsing.
    let received = Buffer.alloc(0);
    ws.on('message', (d: Buffer) => {
      received = Buffer.concat([received, d]);
    });
    const take = async (n: number) => {
      await waitFor(`${n} bytes from the proxy`, () => received.length >= n || undefined);
      const out = received.subarray(0, n);
      received = received.subarray(n);
      return out;
    };
    const send = (...parts: Buffer[]) => ws.send(Buffer.concat(parts));
    const u16 = (v: number) => Buffer.from([v >> 8, v & 0xff]);
    const s32 = (v: number) => {
      const b = Buffer.alloc(4);
      b.writeInt32BE(v, 0);
      return b;
    };
    expect((await take(12)).toString()).toMatch(/^RFB 003\.00\d\n$/);
    send(Buffer.from('RFB 003.008\n'));
    const count = (await take(1))[0];
    expect([...(await take(count))]).toContain(1);
    send(Buffer.from([1]));
    expect((await take(4)).readUInt32BE(0)).toBe(0);
    send(Buffer.from([1]));
    const init = await take(24);
    await take(init.readUInt32BE(20));
    const fbur = (incremental: boolean) => Buffer.concat([Buffer.from([3, incremental ? 1 : 0]), u16(0), u16(0), u16(WIDTH), u16(HEIGHT)]);
    const wanted = [Encoding.Tight, Encoding.ZRLE, Encoding.Hextile, Encoding.CopyRect, Encoding.Raw, -32 + 6, -256 + 2, Encoding.DesktopSize, Encoding.LastRect, Encoding.Cursor, Encoding.ExtendedClipboard];
    send(Buffer.from([2, 0]), u16(wanted.length), ...wanted.map(s32), fbur(false));
    await waitFor('a first update', () => session.stats().updates > 0 || undefined);
    expect(session.stats().encodingsNegotiated).toEqual([Encoding.Tight, Encoding.ZRLE, Encoding.CopyRect, Encoding.Raw, -26, -254, Encoding.DesktopSize, Encoding.LastRect, Encoding.Cursor]);

    // Solid colours (Tight fill), a plaid and random noise (Tight basic: palette filter + zlib data).
    const noise = join(tmpdir(), `stream-rfb-noise-${process.pid}.xbm`);
    const bits = Array.from({ length: (96 / 8) * 96 }, () => `0x${Math.floor(Math.random() * 256).toString(16).padStart(2, '0')}`);
    writeFileSync(noise, `#define noise_width 96\n#define noise_height 96\nstatic char noise_bits[] = {\n${bits.join(',')}};\n`);
    const drawings: [string, string[]][] = [
      ['#118844', ['-solid', '#118844']],
      ['plaid', ['-mod', '4', '4', '-fg', '#ff0000', '-bg', '#0000ff']],
      ['noise', ['-bitmap', noise, '-fg', '#ffcc00', '-bg', '#003366']],
      ['#336699', ['-solid', '#336699']],
    ];
    try {
      for (const [name, args] of drawings) {
        const before = session.stats().updates;
        await run('xsetroot', args, { DISPLAY: display });
        send(fbur(true));
        await waitFor(`an update after drawing ${name}`, () => session.stats().updates > before || undefined);
      }
    } finally {
      rmSync(noise, { force: true });
    }
    // Same again with ZRLE preferred.
    const zrleFirst = [Encoding.ZRLE, Encoding.CopyRect, Encoding.Raw, Encoding.DesktopSize, Encoding.Cursor];
    send(Buffer.from([2, 0]), u16(zrleFirst.length), ...zrleFirst.map(s32), fbur(false));
    await waitFor('a ZRLE rect', () => (session.stats().encodings.zrle?.count ?? 0) > 0 || undefined);

    const stats = session.stats();
    expect(session.closed).toBe(false);
    expect(stats.encodings.tight?.count ?? 0).toBeGreaterThan(0);
    expect(stats.encodings.tight.bytes).toBeGreaterThan(1000); // more than fills: palette/zlib rects were sized too
    expect(stats.changed).toBeGreaterThan(0);
    expect(stats.bytesToClient).toBe(stats.bytesFromServer);
    // Every byte of every update is accounted to some rect (+4 per update header).
    const rectBytes = Object.values(stats.encodings).reduce((s, e) => s + e.bytes, 0);
    expect(rectBytes + 4 * stats.updates).toBeLessThanOrEqual(stats.bytesFromServer);
    ws.close();
    await waitFor('the session to close', () => session.closed || undefined);
  });

  it('closes the websocket with a typed error when the VNC server is unreachable', async () => {
    const deadPort = await freePort();
    const ws = new WebSocket(`ws://127.0.0.1:${wsPort}/?port=${deadPort}`);
    sockets.push(ws);
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const result = await waitFor('the open attempt', () => opened[opened.length - 1]);
    const error = await result;
    expect(error).toBeInstanceOf(RfbError);
    expect((error as RfbError).kind).toBe('connection_refused');
    expect(await closed).toBe(1011);
  });
});
