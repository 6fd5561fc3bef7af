import { EventEmitter } from 'events';
import type { Socket } from 'net';
import type WebSocket from 'ws';
import { Encoding } from './encodings';
import { RGBX32 } from './pixel-format';
import { RfbSession, RfbSessionRegistry, RfbSessionOptions } from './rfb-proxy';
import { cat, clientMessages as cm, rects, serverInit, u32, u8, update, version } from './rfb-test-helpers';

class FakeWs extends EventEmitter {
  readyState = 1;
  bufferedAmount = 0;
  binaryType = 'nodebuffer';
  sent: Buffer[] = [];
  pings: Buffer[] = [];
  closedWith: { code: number; reason: string } | undefined;
  pausedCount = 0;
  send(data: Buffer): void {
    this.sent.push(Buffer.from(data));
  }
  ping(data: Buffer): void {
    this.pings.push(Buffer.from(data));
  }
  close(code: number, reason: string): void {
    this.closedWith = { code, reason };
    this.readyState = 3;
    this.emit('close', code);
  }
  terminate(): void {
    this.readyState = 3;
  }
  pause(): void {
    this.pausedCount++;
  }
  resume(): void {
    this.pausedCount--;
  }
  fromBrowser(data: Buffer): void {
    this.emit('message', data, true);
  }
}

class FakeSocket extends EventEmitter {
  written: Buffer[] = [];
  writableLength = 0;
  destroyed = false;
  ended = false;
  paused = false;
  setNoDelay(): void {}
  write(data: Buffer): boolean {
    this.written.push(Buffer.from(data));
    return true;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  end(): void {
    this.ended = true;
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close');
  }
  fromServer(data: Buffer): void {
    this.emit('data', data);
  }
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function open(options: RfbSessionOptions = {}) {
  const ws = new FakeWs();
  const socket = new FakeSocket();
  const session = new RfbSession(ws as unknown as WebSocket, socket as unknown as Socket, { pingIntervalMs: 60_000, ...options });
  // Handshake 3.8 / None.
  socket.fromServer(version(8));
  ws.fromBrowser(version(8));
  socket.fromServer(u8(1, 1));
  ws.fromBrowser(u8(1));
  socket.fromServer(u32(0));
  ws.fromBrowser(u8(1));
  socket.fromServer(serverInit(640, 400));
  ws.fromBrowser(cat(cm.setPixelFormat(RGBX32), cm.setEncodings([Encoding.Tight, Encoding.Hextile, Encoding.Raw, Encoding.DesktopSize])));
  return { ws, socket, session };
}

const afterCleanup: RfbSession[] = [];
afterEach(() => afterCleanup.splice(0).forEach((s) => s.close('test over')));

describe('RfbSession', () => {
  it('bridges both directions and keeps frame statistics', () => {
    const { ws, socket, session } = open({ workspaceId: 'w1', userId: 'u1' });
    afterCleanup.push(session);
    ws.fromBrowser(cm.updateRequest(false, 640, 400));
    const u1 = update([rects.raw(0, 0, 640, 10), rects.tightFill(0, 10, 640, 390)]);
    socket.fromServer(u1.subarray(0, 1000));
    socket.fromServer(u1.subarray(1000));
    ws.fromBrowser(cm.updateRequest(true, 640, 400));
    const u2 = update([rects.tightFill(0, 0, 64, 40)]);
    socket.fromServer(u2);

    const fromServer = Buffer.concat(socket.written);
    expect(fromServer.subarray(-10)).toEqual(cm.updateRequest(true, 640, 400));
    expect(fromServer.includes(cm.setEncodings([Encoding.Tight, Encoding.Raw, Encoding.DesktopSize]))).toBe(true);
    expect(Buffer.concat(ws.sent).subarray(-u1.length - u2.length).equals(cat(u1, u2))).toBe(true);

    const stats = session.stats();
    expect(stats).toMatchObject({ workspaceId: 'w1', userId: 'u1', phase: 'streaming', resx: 640, resy: 400, updates: 2, changed: 1, viewOnly: false });
    expect(stats.client).toMatch(/^[0-9a-f]{8}$/);
    expect(stats.encodings.raw).toMatchObject({ count: 1, area: 6400, bytes: 12 + 6400 * 4 });
    expect(stats.encodings.tight).toMatchObject({ count: 2, area: 640 * 390 + 64 * 40, bytes: 2 * (12 + 1 + 3) });
    expect(stats.bytesToClient).toBe(stats.bytesFromServer);
    expect(stats.bytesFromClient - stats.bytesToServer).toBe(4); // Hextile removed from SetEncodings
    expect(stats.server_time).not.toBeNull();
    expect(stats.updateRate).toBeGreaterThan(0);
    expect(stats.encodingsRequested).toEqual([Encoding.Tight, Encoding.Hextile, Encoding.Raw, Encoding.DesktopSize]);
    expect(stats.encodingsNegotiated).toEqual([Encoding.Tight, Encoding.Raw, Encoding.DesktopSize]);
    expect(session.bottleneck()).toHaveLength(4);
  });

  it('drops input in view-only mode and counts it', () => {
    const { ws, socket, session } = open({ viewOnly: true });
    afterCleanup.push(session);
    const before = Buffer.concat(socket.written).length;
    ws.fromBrowser(cat(cm.pointer(1, 5, 5), cm.key(true, 0x61), cm.cutText('secret'), cm.updateRequest(true, 640, 400)));
    expect(Buffer.concat(socket.written).subarray(before)).toEqual(cm.updateRequest(true, 640, 400));
    expect(session.stats().inputDropped).toEqual({ key: 1, pointer: 1, clipboard: 1, resize: 0, total: 3 });
    expect(session.stats().inputForwarded.total).toBe(0);
  });

  it('clipboard switches: counts what was cut out of each direction', () => {
    const { ws, socket, session } = open({ clipboardUp: false, clipboardDown: false });
    afterCleanup.push(session);
    const sentBefore = Buffer.concat(ws.sent).length;
    const cut = cat(u8(3, 0, 0, 0), u32(6), Buffer.from('secret'));
    const u1 = update([rects.tightFill(0, 0, 64, 40)]);
    socket.fromServer(cat(cut, u1, cut));
    expect(Buffer.concat(ws.sent).subarray(sentBefore)).toEqual(u1);
    ws.fromBrowser(cm.cutText('up'));
    expect(session.stats().clipboardDown).toEqual({ forwarded: 0, dropped: 2 });
    expect(session.stats().inputDropped.clipboard).toBe(1);
  });

  it('idle time: reset by key, pointer and clipboard input (dropped or not), not by a resize', async () => {
    const { ws, session } = open({ clipboardUp: false });
    afterCleanup.push(session);
    await waitFor('some idle time', () => session.idleMs() >= 200);
    ws.fromBrowser(cm.setDesktopSize(640, 400, 1));
    expect(session.idleMs()).toBeGreaterThanOrEqual(200);
    const idle = session.idleMs();
    ws.fromBrowser(cm.cutText('dropped, but the user is there'));
    expect(session.idleMs()).toBeLessThan(idle);
  });

  it('closes with an application close code when given one', () => {
    const { ws, session } = open();
    session.close('Disconnected after 5 minutes without input', 'proxy', undefined, 4001);
    expect(ws.closedWith).toEqual({ code: 4001, reason: 'Disconnected after 5 minutes without input' });
  });

  it('pauses the VNC socket while the browser backlog is above the high-water mark', async () => {
    const { ws, socket, session } = open({ highWaterBytes: 1000 });
    afterCleanup.push(session);
    ws.bufferedAmount = 5000;
    socket.fromServer(update([rects.raw(0, 0, 10, 10)]));
    expect(socket.paused).toBe(true);
    expect(session.stats().paused).toBe(true);
    ws.bufferedAmount = 400; // at or below low water (500)
    await waitFor('resume', () => !socket.paused);
    expect(session.stats().paused).toBe(false);
  });

  it('closes when the browser never drains (bounded pause)', async () => {
    const { ws, socket, session } = open({ highWaterBytes: 1000, maxPausedMs: 50 });
    ws.bufferedAmount = 5000;
    socket.fromServer(update([rects.raw(0, 0, 10, 10)]));
    await waitFor('close', () => session.closed);
    expect(session.closeReason?.reason).toContain('did not drain');
    expect(ws.closedWith?.code).toBe(1011);
    expect(socket.ended || socket.destroyed).toBe(true);
  });

  it('measures the websocket ping round trip', () => {
    // Fake clocks (timers and performance.now): the round trip and the interval are exact on a loaded machine.
    jest.useFakeTimers();
    try {
      const { ws, session } = open({ pingIntervalMs: 10 });
      afterCleanup.push(session);
      expect(ws.pings).toHaveLength(1); // first ping at start
      jest.advanceTimersByTime(5);
      ws.emit('pong', ws.pings[0]);
      expect(session.stats().pingMs).toBe(5);
      expect(session.stats().pingAvgMs).toBe(5);
      jest.advanceTimersByTime(5);
      expect(ws.pings).toHaveLength(2);
      ws.emit('pong', Buffer.from('nope')); // unmatched pongs are ignored
      expect(session.stats().pingMs).toBe(5);
      expect(session.bottleneck()[2]).toBe(10);
    } finally {
      jest.useRealTimers();
    }
  });

  it('propagates close in both directions, once', () => {
    const a = open();
    const reasons: string[] = [];
    a.session.onClose((info) => reasons.push(`${info.initiator}: ${info.reason}`));
    a.socket.emit('end');
    expect(a.ws.closedWith?.code).toBe(1000);
    expect(reasons).toEqual(['server: VNC server closed the connection']);

    const b = open();
    b.ws.emit('close', 1001);
    expect(b.socket.ended).toBe(true);
    expect(b.session.closeReason).toMatchObject({ initiator: 'client' });
    b.session.close('again');
    expect(b.session.closeReason?.reason).toContain('1001');
  });

  it('closes with 1002 on a protocol error and on text frames', () => {
    const a = open();
    a.ws.fromBrowser(u8(77));
    expect(a.ws.closedWith?.code).toBe(1002);
    expect(a.ws.closedWith?.reason).toContain('unknown client message type 77');

    const b = open();
    b.ws.emit('message', Buffer.from('hello'), false);
    expect(b.session.closed).toBe(true);
    expect(b.ws.closedWith?.code).toBe(1002);
  });
});

describe('RfbSessionRegistry', () => {
  it('selects sessions by client selector and forgets closed ones', () => {
    const registry = new RfbSessionRegistry();
    const owner1 = open({ userId: 'owner', clientId: 'aaaa0001' }).session;
    const owner2 = open({ userId: 'owner', clientId: 'aaaa0002' }).session;
    const guest = open({ userId: 'guest', clientId: 'bbbb0001' }).session;
    const other = open({ userId: 'owner', clientId: 'cccc0001' }).session;
    registry.add('w1', owner1);
    registry.add('w1', owner2);
    registry.add('w1', guest);
    registry.add('w2', other);
    const ids = (list: RfbSession[]) => list.map((s) => s.id).sort();
    expect(ids(registry.select('w1', 'none', 'owner'))).toEqual([]);
    expect(ids(registry.select('w1', 'auto', 'owner'))).toEqual(['aaaa0001', 'aaaa0002']);
    expect(ids(registry.select('w1', 'auto'))).toEqual([]);
    expect(ids(registry.select('w1', 'all'))).toEqual(['aaaa0001', 'aaaa0002', 'bbbb0001']);
    expect(ids(registry.select('w1', 'bbbb0001'))).toEqual(['bbbb0001']);
    expect(ids(registry.select('w1', 'cccc0001'))).toEqual([]); // other workspace
    expect(registry.get('cccc0001')?.id).toBe('cccc0001');
    guest.close('bye');
    expect(ids(registry.list('w1'))).toEqual(['aaaa0001', 'aaaa0002']);
    expect(registry.closeAll('w1', 'workspace stopped')).toBe(2);
    expect(registry.count('w1')).toBe(0);
    expect(registry.remove('w2', other)).toBe(true);
    other.close('done');
  });
});
