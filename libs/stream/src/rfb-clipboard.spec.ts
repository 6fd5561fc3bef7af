import { Encoding } from './encodings';
import { RfbError } from './errors';
import { RfbProtocolTracker, RfbTrackerOptions } from './rfb-parser';
import { byteChunks, cat, clientMessages as cm, randomChunks, rects, s32, serverInit, serverMessages as sm, u32, u8, update } from './rfb-test-helpers';

const EXT_TEXT = 1;
const EXT_CAPS = 1 << 24;
const EXT_REQUEST = 1 << 25;
const EXT_PEEK = 1 << 26;
const EXT_NOTIFY = 1 << 27;
const EXT_PROVIDE = 1 << 28;

/** An extended-clipboard cut-text message (client type 6 or server type 3): the length is negative. */
function extended(type: 3 | 6, flags: number, data: Buffer = Buffer.alloc(0)): Buffer {
  return cat(u8(type, 0, 0, 0), s32(-(4 + data.length)), u32(flags >>> 0), data);
}

interface Harness {
  tracker: RfbProtocolTracker;
  toServer: Buffer[];
  toClient: Buffer[];
  errors: RfbError[];
  inputs: { kind: string; forwarded: boolean }[];
  serverMessages: { kind: string; forwarded: boolean }[];
  updates: number;
}

/** A pre-authenticated tracker past ClientInit/ServerInit with the given switches, output cleared. */
function streaming(options: Partial<Pick<RfbTrackerOptions, 'viewOnly' | 'clipboardUp' | 'clipboardDown'>>): Harness {
  const h: Harness = { toServer: [], toClient: [], errors: [], inputs: [], serverMessages: [], updates: 0 } as unknown as Harness;
  h.tracker = new RfbProtocolTracker({
    viewOnly: false,
    ...options,
    preAuthenticated: true,
    toServer: (b) => h.toServer.push(Buffer.from(b)),
    // Kept as given: a test checks that whole chunks go out as themselves.
    toClient: (b) => h.toClient.push(b),
    onError: (error) => h.errors.push(error),
    events: {
      onInput: (kind, forwarded) => h.inputs.push({ kind, forwarded }),
      onServerMessage: (kind, _bytes, forwarded) => h.serverMessages.push({ kind, forwarded }),
      onUpdateEnd: () => h.updates++,
    },
  });
  h.tracker.pushFromClient(u8(1));
  h.tracker.pushFromServer(serverInit(640, 400));
  h.tracker.pushFromClient(cm.setEncodings([Encoding.Raw, Encoding.ZRLE, Encoding.Tight, Encoding.DesktopSize, Encoding.ExtendedClipboard]));
  expect(h.errors).toEqual([]);
  h.toServer.length = 0;
  h.toClient.length = 0;
  return h;
}

const splits: [string, (b: Buffer) => Buffer[]][] = [
  ['1-byte chunks', byteChunks],
  ...[1, 2, 3, 4, 5].map((seed) => [`random chunks (seed ${seed})`, (b: Buffer) => randomChunks(b, seed, 9)] as [string, (b: Buffer) => Buffer[]]),
  ['larger random chunks', (b: Buffer) => randomChunks(b, 6, 300)],
  ['one chunk', (b: Buffer) => [b]],
];

describe('clipboard up (ClientCutText from the browser)', () => {
  const before = [cm.key(true, 0x61), cm.pointer(0, 1, 2)];
  const after = [cm.updateRequest(true, 640, 400), cm.key(false, 0x61)];

  it.each(splits)('clipboardUp=false drops classic ClientCutText exactly and forwards the rest (%s)', (_name, split) => {
    const h = streaming({ clipboardUp: false });
    const data = cat(...before, cm.cutText('secret from the browser'), cm.cutText(''), ...after);
    split(data).forEach((c) => h.tracker.pushFromClient(c));
    expect(h.errors).toEqual([]);
    expect(Buffer.concat(h.toServer)).toEqual(cat(...before, ...after));
    expect(h.inputs).toEqual([
      { kind: 'key', forwarded: true },
      { kind: 'pointer', forwarded: true },
      { kind: 'clipboard', forwarded: false },
      { kind: 'clipboard', forwarded: false },
      { kind: 'key', forwarded: true },
    ]);
  });

  it('clipboardUp=true forwards classic ClientCutText', () => {
    const h = streaming({ clipboardUp: true });
    const data = cat(cm.cutText('allowed'), ...after);
    byteChunks(data).forEach((c) => h.tracker.pushFromClient(c));
    expect(Buffer.concat(h.toServer)).toEqual(data);
    expect(h.inputs[0]).toEqual({ kind: 'clipboard', forwarded: true });
  });

  it.each(splits)('extended-clipboard forms (caps, request, peek, notify, provide) are dropped whatever the switch (%s)', (_name, split) => {
    for (const clipboardUp of [true, false]) {
      const h = streaming({ clipboardUp });
      const forms = [
        extended(6, EXT_CAPS | EXT_TEXT, u32(1024 * 1024)),
        extended(6, EXT_REQUEST | EXT_TEXT),
        extended(6, EXT_PEEK),
        extended(6, EXT_NOTIFY | EXT_TEXT),
        extended(6, EXT_PROVIDE | EXT_TEXT, Buffer.from('zlib-compressed text would be here, 40 b')),
      ];
      split(cat(...before, ...forms, ...after)).forEach((c) => h.tracker.pushFromClient(c));
      expect(h.errors).toEqual([]);
      expect(Buffer.concat(h.toServer)).toEqual(cat(...before, ...after));
      expect(h.inputs.filter((i) => i.kind === 'clipboard')).toEqual(forms.map(() => ({ kind: 'clipboard', forwarded: false })));
    }
  });

  it('view-only drops ClientCutText even when clipboardUp is on', () => {
    const h = streaming({ viewOnly: true, clipboardUp: true });
    h.tracker.pushFromClient(cat(cm.cutText('joiner'), cm.updateRequest(true, 640, 400)));
    expect(Buffer.concat(h.toServer)).toEqual(cm.updateRequest(true, 640, 400));
  });
});

describe('clipboard down (ServerCutText towards the browser)', () => {
  const u1 = update([rects.raw(0, 0, 8, 4), rects.zrle(0, 4, 64, 64, 500)]);
  const u2 = update([rects.tightJpeg(0, 0, 32, 32, 300), rects.desktopSize(800, 600)]);
  const u3 = update([]);
  const cut1 = sm.cutText('copied inside the workspace');
  const cut2 = sm.cutText('');
  const cut3 = sm.cutText('x'.repeat(5000));
  // Cut texts at the start, between updates, back to back, next to a bell and a colour map, and at the end.
  const stream = [cut1, u1, sm.bell(), cut2, cut3, u2, sm.colourMap(2), cut1, u3, cut2];
  const kept = stream.filter((m) => m !== cut1 && m !== cut2 && m !== cut3);

  it.each(splits)('clipboardDown=false cuts every ServerCutText out at message boundaries (%s)', (_name, split) => {
    const h = streaming({ clipboardDown: false });
    split(cat(...stream)).forEach((c) => h.tracker.pushFromServer(c));
    expect(h.errors).toEqual([]);
    expect(Buffer.concat(h.toClient)).toEqual(cat(...kept));
    expect(h.updates).toBe(3);
    expect(h.serverMessages.filter((m) => m.kind === 'cuttext')).toEqual(Array(5).fill({ kind: 'cuttext', forwarded: false }));
    expect(h.serverMessages.filter((m) => m.kind !== 'cuttext').every((m) => m.forwarded)).toBe(true);
  });

  it.each(splits)('clipboardDown=false also cuts an extended-clipboard ServerCutText (%s)', (_name, split) => {
    const h = streaming({ clipboardDown: false });
    const data = cat(u1, extended(3, EXT_CAPS | EXT_TEXT, u32(4096)), extended(3, EXT_NOTIFY | EXT_TEXT), extended(3, EXT_PROVIDE | EXT_TEXT, Buffer.from('compressed')), u3);
    split(data).forEach((c) => h.tracker.pushFromServer(c));
    expect(h.errors).toEqual([]);
    expect(Buffer.concat(h.toClient)).toEqual(cat(u1, u3));
  });

  it('clipboardDown=true passes the stream through whole, chunk for chunk', () => {
    const h = streaming({ clipboardDown: true });
    const chunks = randomChunks(cat(...stream), 7, 50);
    chunks.forEach((c) => h.tracker.pushFromServer(c));
    expect(h.toClient).toHaveLength(chunks.length);
    h.toClient.forEach((c, i) => expect(c).toBe(chunks[i]));
    expect(h.serverMessages.filter((m) => m.kind === 'cuttext').every((m) => m.forwarded)).toBe(true);
  });

  it('filtered, a chunk without cut text still goes out as the same buffer (so pooled read buffers come back)', () => {
    const h = streaming({ clipboardDown: false });
    const whole = cat(u1, sm.bell(), u2);
    h.tracker.pushFromServer(whole);
    expect(h.toClient).toHaveLength(1);
    expect(h.toClient[0]).toBe(whole);
    // A chunk with a cut text in the middle goes out as the runs around it, in one call each.
    h.toClient.length = 0;
    h.tracker.pushFromServer(cat(u3, cut1, u3));
    expect(h.toClient).toHaveLength(2);
    expect(Buffer.concat(h.toClient)).toEqual(cat(u3, u3));
  });

  it('filtering starts right after ServerInit, in the same chunk, without repeating or losing a byte', () => {
    for (const split of splits.map(([, f]) => f)) {
      const toClient: Buffer[] = [];
      const tracker = new RfbProtocolTracker({
        viewOnly: false, clipboardDown: false, preAuthenticated: true,
        toServer: () => undefined, toClient: (b) => toClient.push(Buffer.from(b)), onError: (e) => { throw e; },
      });
      tracker.pushFromClient(u8(1));
      tracker.pushFromClient(cm.setEncodings([Encoding.Raw, Encoding.ZRLE, Encoding.Tight, Encoding.DesktopSize]));
      const init = serverInit(640, 400);
      split(cat(init, cut1, u1, cut2, u3)).forEach((c) => tracker.pushFromServer(c));
      expect(Buffer.concat(toClient)).toEqual(cat(init, u1, u3));
    }
  });

  it('an extended ServerCutText that was passed through is a protocol error (it cannot be taken back)', () => {
    const h = streaming({ clipboardDown: true });
    h.tracker.pushFromServer(extended(3, EXT_NOTIFY | EXT_TEXT));
    expect(h.errors).toHaveLength(1);
    expect(h.errors[0].message).toContain('extended clipboard');
  });
});
