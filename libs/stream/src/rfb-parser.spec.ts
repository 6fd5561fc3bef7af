import { Encoding } from './encodings';
import { RfbError } from './errors';
import { PixelFormat, RGBX32 } from './pixel-format';
import { RectInfo, RfbProtocolTracker, UpdateInfo, UpdateRequestInfo } from './rfb-parser';
import {
  byteChunks,
  cat,
  clientMessages as cm,
  filler,
  randomChunks,
  rects,
  serverInit,
  serverMessages as sm,
  u16,
  u32,
  u8,
  update,
  version,
} from './rfb-test-helpers';

interface Harness {
  tracker: RfbProtocolTracker;
  toServer: Buffer[];
  toClient: Buffer[];
  errors: { error: RfbError; direction: string }[];
  rects: RectInfo[];
  updates: UpdateInfo[];
  requests: UpdateRequestInfo[];
  inputs: { kind: string; forwarded: boolean }[];
  pointers: [number, number][];
  resizes: [number, number][];
  serverMessages: string[];
  securityFailures: string[];
  encodings: { requested: number[]; kept: number[] }[];
  server(): Buffer;
  client(): Buffer;
}

function harness(viewOnly = false, preAuthenticated = false): Harness {
  const h: Omit<Harness, 'tracker'> & { tracker?: RfbProtocolTracker } = {
    toServer: [],
    toClient: [],
    errors: [],
    rects: [],
    updates: [],
    requests: [],
    inputs: [],
    pointers: [],
    resizes: [],
    serverMessages: [],
    securityFailures: [],
    encodings: [],
    server: () => Buffer.concat(h.toServer),
    client: () => Buffer.concat(h.toClient),
  };
  h.tracker = new RfbProtocolTracker({
    viewOnly,
    preAuthenticated,
    toServer: (b) => h.toServer.push(Buffer.from(b)),
    toClient: (b) => h.toClient.push(Buffer.from(b)),
    onError: (error, direction) => h.errors.push({ error, direction }),
    events: {
      onRect: (r) => h.rects.push(r),
      onUpdateEnd: (u) => h.updates.push(u),
      onUpdateRequest: (r) => h.requests.push(r),
      onInput: (kind, forwarded) => h.inputs.push({ kind, forwarded }),
      onPointer: (x, y) => h.pointers.push([x, y]),
      onResize: (w, hh) => h.resizes.push([w, hh]),
      onServerMessage: (kind) => h.serverMessages.push(kind),
      onSecurityFailure: (reason) => h.securityFailures.push(reason),
      onEncodings: (requested, kept) => h.encodings.push({ requested, kept }),
    },
  });
  return h as Harness;
}

const feedClient = (h: Harness, data: Buffer, split: (b: Buffer) => Buffer[] = byteChunks) => split(data).forEach((c) => h.tracker.pushFromClient(c));
const feedServer = (h: Harness, data: Buffer, split: (b: Buffer) => Buffer[] = byteChunks) => split(data).forEach((c) => h.tracker.pushFromServer(c));

/** Runs a 3.8 / security None handshake (1-byte chunks) and clears the captured output. */
function handshake38(h: Harness, width = 640, height = 400, pf: PixelFormat = RGBX32): void {
  feedServer(h, version(8));
  feedClient(h, version(8));
  feedServer(h, u8(3, 19, 1, 2)); // VeNCrypt, None, VNC auth
  expect(h.client().subarray(12)).toEqual(u8(2, 1, 2)); // VeNCrypt filtered out
  feedClient(h, u8(1));
  feedServer(h, u32(0)); // SecurityResult OK
  feedClient(h, u8(1)); // ClientInit shared
  feedServer(h, serverInit(width, height, 'desk', pf));
  expect(h.errors).toEqual([]);
  expect(h.tracker.state.serverInitDone).toBe(true);
  h.toServer.length = 0;
  h.toClient.length = 0;
}

const NOVNC_ENCODINGS = [
  Encoding.CopyRect, 50, Encoding.Tight, Encoding.TightPng, Encoding.ZRLE, 21, Encoding.Hextile, Encoding.RRE, Encoding.Zlib, Encoding.Raw,
  -32 + 6, -256 + 2, Encoding.DesktopSize, Encoding.LastRect, Encoding.QemuExtendedKeyEvent, Encoding.QemuLedState, Encoding.ExtendedDesktopSize,
  Encoding.Xvp, Encoding.Fence, Encoding.ContinuousUpdates, Encoding.DesktopName, Encoding.ExtendedClipboard, Encoding.ExtendedMouseButtons,
  0x574d5664, Encoding.Cursor,
];
const KEPT = [
  Encoding.CopyRect, Encoding.Tight, Encoding.ZRLE, Encoding.Raw, -26, -254, Encoding.DesktopSize, Encoding.LastRect, Encoding.QemuExtendedKeyEvent,
  Encoding.QemuLedState, Encoding.ExtendedDesktopSize, Encoding.Fence, Encoding.ContinuousUpdates, Encoding.DesktopName, Encoding.Cursor,
];

describe('RfbProtocolTracker handshake', () => {
  it('follows 3.8 with VNC auth, forwarding challenge and response, and hands over to passthrough', () => {
    const h = harness();
    feedServer(h, version(8));
    feedClient(h, version(8));
    feedServer(h, u8(1, 2));
    feedClient(h, u8(2));
    const challenge = filler(16, 1);
    const response = filler(16, 2);
    feedServer(h, challenge);
    feedClient(h, response);
    feedServer(h, u32(0));
    feedClient(h, u8(1));
    const init = serverInit(1024, 768, 'büro');
    feedServer(h, init);
    expect(h.client()).toEqual(cat(version(8), u8(1, 2), challenge, u32(0), init));
    expect(h.server()).toEqual(cat(version(8), u8(2), response, u8(1)));
    expect(h.tracker.state).toMatchObject({ minor: 8, securityType: 2, width: 1024, height: 768, name: 'büro', clientInitDone: true, serverInitDone: true });
    expect(h.errors).toEqual([]);
  });

  it('pre-authenticated (the gateway did security on both sides): starts at ClientInit and ServerInit', () => {
    const h = harness(true, true);
    feedClient(h, u8(1)); // ClientInit shared
    const init = serverInit(1280, 720, 'desk');
    feedServer(h, init);
    expect(h.server()).toEqual(u8(1));
    expect(h.client()).toEqual(init);
    expect(h.tracker.state).toMatchObject({ minor: 8, securityType: 1, width: 1280, height: 720, clientInitDone: true, serverInitDone: true });
    // View-only still applies after the handover: a pointer event is dropped, an update request passes.
    feedClient(h, cat(cm.pointer(10, 10, 1), cm.updateRequest(false, 1280, 720)));
    expect(h.server()).toEqual(cat(u8(1), cm.updateRequest(false, 1280, 720)));
    expect(h.inputs).toEqual([{ kind: 'pointer', forwarded: false }]);
    expect(h.errors).toEqual([]);
  });

  it('follows 3.3 (server-chosen security type, no SecurityResult for None)', () => {
    const h = harness();
    feedServer(h, version(3));
    feedClient(h, version(3));
    feedServer(h, u32(1));
    feedClient(h, u8(0));
    feedServer(h, serverInit(800, 600));
    expect(h.tracker.state).toMatchObject({ minor: 3, securityType: 1, width: 800, height: 600 });
    feedClient(h, cm.updateRequest(false, 800, 600));
    expect(h.requests).toHaveLength(1);
    expect(h.errors).toEqual([]);
  });

  it('follows 3.7 with None (no SecurityResult)', () => {
    const h = harness();
    feedServer(h, version(8)); // server 3.8, client picks 3.7
    feedClient(h, version(7));
    feedServer(h, u8(1, 1));
    feedClient(h, u8(1));
    feedClient(h, u8(1));
    feedServer(h, serverInit(320, 200));
    expect(h.tracker.state).toMatchObject({ minor: 7, serverInitDone: true, width: 320 });
    expect(h.errors).toEqual([]);
  });

  it('forwards a 3.8 authentication failure with its reason', () => {
    const h = harness();
    feedServer(h, version(8));
    feedClient(h, version(8));
    feedServer(h, u8(1, 2));
    feedClient(h, u8(2));
    feedServer(h, filler(16));
    feedClient(h, filler(16));
    const reason = Buffer.from('Authentication failure');
    feedServer(h, cat(u32(1), u32(reason.length), reason));
    expect(h.securityFailures).toEqual(['Authentication failure']);
    expect(h.client().subarray(-reason.length - 8)).toEqual(cat(u32(1), u32(reason.length), reason));
  });

  it('answers a server offering only unsupported security types with a proper failure', () => {
    const h = harness();
    feedServer(h, version(8));
    feedClient(h, version(8));
    feedServer(h, u8(2, 19, 18));
    expect(h.errors).toHaveLength(1);
    expect(h.errors[0].error.kind).toBe('unsupported_security');
    const sent = h.client().subarray(12);
    expect(sent[0]).toBe(0);
    const len = sent.readUInt32BE(1);
    expect(sent.subarray(5, 5 + len).toString()).toContain('no security type supported');
  });

  it('switches to passthrough mid-chunk without losing or duplicating bytes', () => {
    const h = harness();
    feedServer(h, version(8), (b) => [b]);
    feedClient(h, cat(version(8), u8(1), u8(1)), (b) => [b]); // pipelined: choice + ClientInit before the list
    expect(h.server()).toEqual(version(8)); // the choice waits for the server's security list
    const tail = cat(sm.bell(), update([rects.raw(0, 0, 2, 2)]));
    const stream = cat(u8(1, 1), u32(0), serverInit(2, 2), tail);
    feedServer(h, stream, (b) => [b]);
    expect(h.server()).toEqual(cat(version(8), u8(1), u8(1)));
    expect(h.client()).toEqual(cat(version(8), stream));
    expect(h.updates).toHaveLength(1);
    feedServer(h, sm.bell(), (b) => [b]);
    expect(h.client()).toEqual(cat(version(8), stream, sm.bell()));
    expect(h.errors).toEqual([]);
  });

  it('rejects a garbage ProtocolVersion', () => {
    const h = harness();
    feedServer(h, Buffer.from('HTTP/1.1 400 '));
    expect(h.errors[0].error.kind).toBe('protocol');
  });
});

describe('RfbProtocolTracker client → server', () => {
  const sequence = () => [
    cm.setPixelFormat(RGBX32),
    cm.setEncodings(NOVNC_ENCODINGS),
    cm.updateRequest(false, 640, 400),
    cm.key(true, 0x61),
    cm.pointer(1, 10, 20),
    cm.cutText('hello clipboard'),
    cm.qemuKey(true, 0x61, 30),
    cm.setDesktopSize(800, 600, 1),
    cm.updateRequest(true, 640, 400),
  ];

  it('forwards everything (1-byte chunks), rewriting SetEncodings to parseable encodings', () => {
    const h = harness(false);
    handshake38(h);
    const msgs = sequence();
    feedClient(h, cat(...msgs));
    expect(h.errors).toEqual([]);
    const expected = [...msgs];
    expected[1] = cm.setEncodings(KEPT);
    expect(h.server()).toEqual(cat(...expected));
    expect(h.encodings).toEqual([{ requested: NOVNC_ENCODINGS, kept: KEPT }]);
    expect(h.tracker.state.encodings).toEqual(KEPT);
    expect(h.inputs).toEqual([
      { kind: 'key', forwarded: true },
      { kind: 'pointer', forwarded: true },
      { kind: 'clipboard', forwarded: true },
      { kind: 'key', forwarded: true },
      { kind: 'resize', forwarded: true },
    ]);
    expect(h.requests.map((r) => r.incremental)).toEqual([false, true]);
    expect(h.pointers).toEqual([[10, 20]]);
  });

  it('drops input in view-only mode (random fragmentation) and forwards the rest', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const h = harness(true);
      handshake38(h);
      const msgs = sequence();
      feedClient(h, cat(...msgs), (b) => randomChunks(b, seed, 7));
      expect(h.errors).toEqual([]);
      expect(h.server()).toEqual(cat(msgs[0], cm.setEncodings(KEPT), msgs[2], msgs[8]));
      expect(h.inputs.every((i) => !i.forwarded)).toBe(true);
      expect(h.inputs.map((i) => i.kind)).toEqual(['key', 'pointer', 'clipboard', 'key', 'resize']);
      expect(h.pointers).toEqual([]); // a view-only pointer is nobody's: never reported (nor recorded)
    }
  });

  it('streams a large ClientCutText without waiting for all of it', () => {
    const h = harness(false);
    handshake38(h);
    const text = 'x'.repeat(100_000);
    const msg = cm.cutText(text);
    feedClient(h, msg.subarray(0, 50_000));
    expect(h.server().length).toBe(50_000); // header + first part already forwarded
    feedClient(h, msg.subarray(50_000), (b) => [b]);
    expect(h.server().equals(msg)).toBe(true);
  });

  it('closes on an unknown client message type', () => {
    const h = harness(false);
    handshake38(h);
    feedClient(h, u8(149, 1, 0, 0, 0, 0, 0, 0, 0, 0));
    expect(h.errors).toHaveLength(1);
    expect(h.errors[0]).toMatchObject({ direction: 'client' });
    expect(h.errors[0].error.message).toContain('unknown client message type 149');
  });

  it('forwards EnableContinuousUpdates and fences once negotiated, from a view-only joiner too (they are not input)', () => {
    for (const viewOnly of [false, true]) {
      for (const seed of [1, 2, 3]) {
        const h = harness(viewOnly);
        handshake38(h);
        const fence = cm.fence(0x80000001, Buffer.from('ping'));
        const msgs = cat(cm.setEncodings([Encoding.Tight, Encoding.Fence, Encoding.ContinuousUpdates]), cm.enableContinuousUpdates(true, 640, 400), fence, cm.updateRequest(true, 640, 400));
        feedClient(h, msgs, (b) => randomChunks(b, seed, 5));
        expect(h.errors).toEqual([]);
        expect(h.server().equals(msgs)).toBe(true);
        expect(h.inputs).toEqual([]);
      }
    }
  });

  it('refuses EnableContinuousUpdates and fences that were not negotiated, and a fence longer than 64 bytes', () => {
    const cases: Array<[Buffer, string]> = [
      [cm.enableContinuousUpdates(true, 640, 400), 'continuous updates were not negotiated'],
      [cm.fence(1), 'fences were not negotiated'],
      [cat(cm.setEncodings([Encoding.Fence]), cm.fence(1, Buffer.alloc(65))), '65-byte payload'],
    ];
    for (const [data, message] of cases) {
      const h = harness(false);
      handshake38(h);
      feedClient(h, data);
      expect(h.errors).toHaveLength(1);
      expect(h.errors[0].error.message).toContain(message);
    }
  });
});

describe('RfbProtocolTracker server → client', () => {
  function streamingHarness(pf: PixelFormat = RGBX32, encodings = KEPT) {
    const h = harness();
    handshake38(h, 640, 400);
    feedClient(h, cat(cm.setPixelFormat(pf), cm.setEncodings(encodings), cm.updateRequest(false, 640, 400)));
    return h;
  }

  function sampleStream(): { data: Buffer; updates: number } {
    const u1 = update([
      rects.raw(0, 0, 16, 8),
      rects.copyRect(16, 0, 16, 8, 0, 0),
      rects.zrle(0, 8, 64, 64, 3000),
      rects.tightFill(64, 0, 32, 32),
      rects.tightJpeg(96, 0, 32, 32, 100), // 1-byte compact length
      rects.tightJpeg(128, 0, 64, 64, 5000), // 2-byte compact length
      rects.tightJpeg(192, 0, 200, 200, 20000), // 3-byte compact length
      rects.tightBasicCopy(0, 100, 2, 1, 0), // 6 bytes < 12: sent raw
      rects.tightBasicCopy(0, 110, 40, 40, 900),
      rects.tightBasicPalette(0, 200, 30, 10, 2, 40), // 1 bit/pixel: 4*10 = 40 bytes
      rects.tightBasicPalette(0, 220, 3, 3, 2, 0), // 1*3 = 3 bytes < 12: raw
      rects.tightBasicPalette(0, 230, 20, 20, 5, 77), // 8 bits/pixel
      rects.tightBasicGradient(0, 260, 10, 10, 150),
      rects.cursor(5, 5, 17, 9),
    ]);
    const u2 = update([rects.desktopSize(800, 600)]);
    const u3 = cat(sm.colourMap(3), sm.bell(), sm.cutText('server clipboard'), update([rects.raw(0, 0, 200, 100)]));
    const u4 = update([rects.tightFill(0, 0, 400, 300), rects.lastRect()], 0xffff);
    const u5 = update([rects.extendedDesktopSize(1024, 768, 2), rects.desktopName('renamed'), rects.zrle(0, 0, 1024, 768, 10)]);
    const u6 = update([]);
    return { data: cat(u1, u2, u3, u4, u5, u6), updates: 6 };
  }

  it('forwards bytes unchanged and sizes every rect, whatever the fragmentation', () => {
    const { data, updates } = sampleStream();
    for (const [seed, max] of [[1, 1], [2, 5], [3, 64], [4, 4096], [5, 100_000]]) {
      const h = streamingHarness();
      const chunks = max === 1 ? byteChunks(data) : randomChunks(data, seed, max);
      feedServer(h, data, () => chunks);
      expect(h.errors).toEqual([]);
      expect(h.client().equals(data)).toBe(true);
      expect(h.updates).toHaveLength(updates);
      const byEncoding = (e: number) => h.rects.filter((r) => r.encoding === e);
      expect(byEncoding(Encoding.Tight)).toHaveLength(11);
      expect(byEncoding(Encoding.ZRLE).map((r) => r.bytes)).toEqual([12 + 4 + 3000, 12 + 4 + 10]);
      expect(byEncoding(Encoding.Raw).map((r) => r.bytes)).toEqual([12 + 16 * 8 * 4, 12 + 200 * 100 * 4]);
      expect(byEncoding(Encoding.Cursor)[0].bytes).toBe(12 + 17 * 9 * 4 + 3 * 9);
      expect(h.resizes).toEqual([[800, 600], [1024, 768]]);
      expect(h.tracker.state).toMatchObject({ width: 1024, height: 768, name: 'renamed' });
      expect(h.serverMessages).toEqual(['colourmap', 'bell', 'cuttext']);
      // LastRect ended the 0xFFFF update after two rects.
      expect(h.updates[3].rects).toBe(2);
      expect(h.updates[5].rects).toBe(0);
      // Pixel area counts pixel encodings only (not the cursor).
      expect(h.updates[0].pixelArea).toBe(16 * 8 + 16 * 8 + 64 * 64 + 32 * 32 * 2 + 64 * 64 + 200 * 200 + 2 + 40 * 40 + 300 + 9 + 400 + 100);
      // Total update bytes = stream bytes minus the three non-update messages.
      const total = h.updates.reduce((s, u) => s + u.bytes, 0);
      expect(total).toBe(data.length - sm.colourMap(3).length - 1 - sm.cutText('server clipboard').length);
    }
  });

  it('uses 2-byte TPIXELs for Tight and 2-byte pixels for Raw/Cursor after SetPixelFormat 16 bpp', () => {
    const rgb565: PixelFormat = { bitsPerPixel: 16, depth: 16, bigEndian: false, trueColour: true, redMax: 31, greenMax: 63, blueMax: 31, redShift: 11, greenShift: 5, blueShift: 0 };
    const h = streamingHarness(rgb565);
    const data = update([
      rects.tightFill(0, 0, 10, 10, 2),
      rects.tightBasicCopy(0, 0, 3, 1, 0, 2), // 6 bytes raw
      rects.tightBasicPalette(0, 0, 10, 10, 4, 50, 2),
      rects.raw(0, 0, 5, 5, 2),
      rects.cursor(0, 0, 9, 2, 2),
    ]);
    feedServer(h, data, (b) => randomChunks(b, 9, 3));
    expect(h.errors).toEqual([]);
    expect(h.updates).toHaveLength(1);
    expect(h.rects.map((r) => r.bytes)).toEqual([12 + 1 + 2, 12 + 1 + 6, 12 + 3 + 8 + 1 + 50, 12 + 50, 12 + 9 * 2 * 2 + 2 * 2]);
  });

  it('24-bit TPIXEL needs depth 24 and 8-bit channels; 32 bpp depth 32 uses 4 bytes', () => {
    const pf32: PixelFormat = { ...RGBX32, depth: 32 };
    const h = streamingHarness(pf32);
    feedServer(h, update([rects.tightFill(0, 0, 10, 10, 4)]));
    expect(h.errors).toEqual([]);
    expect(h.rects[0].bytes).toBe(12 + 1 + 4);
  });

  it('follows EndOfContinuousUpdates and fences between updates, whatever the fragmentation', () => {
    const data = cat(sm.endOfContinuousUpdates(), update([rects.raw(0, 0, 4, 4)]), sm.fence(0x80000002, Buffer.from('abc')), sm.fence(0), update([rects.raw(4, 4, 4, 4)]));
    for (const seed of [1, 2, 3]) {
      const h = streamingHarness();
      feedServer(h, data, (b) => randomChunks(b, seed, 6));
      expect(h.errors).toEqual([]);
      expect(h.client().equals(data)).toBe(true);
      expect(h.updates).toHaveLength(2);
      expect(h.serverMessages).toEqual(['end_of_continuous_updates', 'fence', 'fence']);
    }
  });

  it('refuses EndOfContinuousUpdates and fences from a server when the browser did not ask for them', () => {
    for (const [data, message] of [[sm.endOfContinuousUpdates(), 'continuous updates were not negotiated'], [sm.fence(0), 'fences were not negotiated']] as const) {
      const h = streamingHarness(RGBX32, [Encoding.Raw, Encoding.Tight]);
      feedServer(h, data);
      expect(h.errors).toHaveLength(1);
      expect(h.errors[0].error.message).toContain(message);
    }
  });

  it('rejects an encoding that was never negotiated (e.g. Hextile)', () => {
    const h = streamingHarness();
    feedServer(h, update([cat(u16(0), u16(0), u16(16), u16(16), u32(Encoding.Hextile)), u8(0)]));
    expect(h.errors).toHaveLength(1);
    expect(h.errors[0]).toMatchObject({ direction: 'server' });
    expect(h.errors[0].error.message).toContain('encoding 5');
  });

  it('rejects an unknown server message type and an invalid Tight control byte', () => {
    const h1 = streamingHarness();
    feedServer(h1, u8(99));
    expect(h1.errors[0].error.message).toContain('unknown server message type 99');
    const h2 = streamingHarness();
    feedServer(h2, update([cat(rects.tightFill(0, 0, 1, 1).subarray(0, 12), u8(0xa0))]));
    expect(h2.errors[0].error.message).toContain('Tight compression control');
  });

  it('reports rect timing from the arrival of the header to the arrival of the last payload byte', () => {
    let clock = 1000;
    const toClient: Buffer[] = [];
    const rectsSeen: RectInfo[] = [];
    const t = new RfbProtocolTracker({
      viewOnly: false,
      toServer: () => undefined,
      toClient: (b) => toClient.push(b),
      onError: (e) => {
        throw e;
      },
      now: () => clock,
      events: { onRect: (r) => rectsSeen.push(r) },
    });
    t.pushFromServer(version(8));
    t.pushFromClient(version(8));
    t.pushFromServer(u8(1, 1));
    t.pushFromClient(u8(1));
    t.pushFromServer(u32(0));
    t.pushFromClient(u8(1));
    t.pushFromServer(serverInit(100, 100));
    t.pushFromClient(cm.setEncodings([Encoding.Raw, Encoding.ZRLE]));
    const data = update([rects.raw(0, 0, 10, 10), rects.zrle(0, 0, 10, 10, 100)]);
    t.pushFromServer(data.subarray(0, 20)); // t=1000: header + 4 rect-header bytes... (4 + 16)
    clock = 1007;
    t.pushFromServer(data.subarray(20, 300)); // raw payload continues
    clock = 1012;
    t.pushFromServer(data.subarray(300, 420)); // raw ends (4+12+400 = 416), ZRLE header starts
    clock = 1030;
    t.pushFromServer(data.subarray(420));
    expect(rectsSeen.map((r) => r.timeMs)).toEqual([12, 18]);
  });
});
