/**
 * The recording decoder on what a real VNC server sends: each VNC server of the reference desktop image
 * (WS_TEST_DESKTOP_IMAGE, published on 127.0.0.1): Xvnc, the default, and x11vnc, which an image may still choose. A hand-made RFB client records the server's bytes from ServerInit on, with timing, in
 * the capture format while the screen changes; the capture is then replayed by RfbReplayDecoder and its last
 * framebuffer compared with a fresh Raw-only capture (RfbClient) of the same screen, and converted to WebM.
 * Two captures: one preferring Tight (with a JPEG quality hint) in 32 bpp little-endian RGBX, one preferring
 * ZRLE in 32 bpp big-endian BGRX (so the 3-byte CPIXEL is the wire's low bytes of a big-endian pixel).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { Socket, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { randomSecret } from '@ws/common';
import { DockerHost, LABELS, buildContainerSpec, ensureWorkspaceNetwork } from '@ws/agent';
import { Encoding, PixelFormat, RGBX32, RfbClient, encodePixelFormat, vncAuthResponse } from '@ws/stream';
import { CAPTURE_MAGIC, CaptureRecordKind, RfbReplayDecoder, convertCapture, encodeCaptureRecord, probeVideo, readCaptureRecords } from '@ws/recordings';
import { launchChromium } from './browser';
import { desktopImage } from './harness';

const deploymentId = `e2e-recdec-${randomSecret(6)}`;
const host = DockerHost.fromEndpoint({ endpoint: 'unix:///var/run/docker.sock', name: 'local-e2e' });
const PASSWORD = 'rec-pass';
const WIDTH = 640;
const HEIGHT = 400;

const BGRX32_BE: PixelFormat = { bitsPerPixel: 32, depth: 24, bigEndian: true, trueColour: true, redMax: 255, greenMax: 255, blueMax: 255, redShift: 16, greenShift: 8, blueShift: 0 };
const JPEG_QUALITY_8 = -24;
const COMPRESS_LEVEL_6 = -250;

async function waitFor<T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let delay = 25;
  for (let attempt = 0; attempt < 100_000; attempt++) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 200);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/**
 * An RFB client speaking the protocol by hand and recording every server byte after the handshake as capture
 * records, the way the stream gateway does; a live decoder of the same bytes lets the test wait for what is shown.
 */
class RecordingClient {
  private readonly socket: Socket;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private wake: (() => void) | undefined;
  private closed: Error | undefined;
  private capturing = false;
  private startedAt = 0;
  readonly records: Buffer[] = [];
  readonly live = new RfbReplayDecoder();
  lastDataAt = 0;
  serverBytes = 0;

  private constructor(port: number) {
    this.socket = connect({ host: '127.0.0.1', port });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('close', () => this.end(new Error('VNC server closed the connection')));
    this.socket.on('error', (error) => this.end(error));
  }

  private end(error: Error): void {
    this.closed ??= error;
    this.wake?.();
  }

  private now(): number {
    return Math.round(performance.now() - this.startedAt);
  }

  private onData(chunk: Buffer): void {
    if (this.capturing) {
      this.record(chunk);
      return;
    }
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    this.wake?.();
  }

  private record(chunk: Buffer): void {
    this.records.push(encodeCaptureRecord(CaptureRecordKind.Server, this.now(), chunk));
    this.live.push(chunk);
    this.serverBytes += chunk.length;
    this.lastDataAt = performance.now();
  }

  private async read(n: number, deadline: number): Promise<Buffer> {
    while (this.pendingBytes < n) {
      if (this.closed) throw this.closed;
      if (Date.now() > deadline) throw new Error(`timed out reading ${n} bytes of the handshake`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    const all = Buffer.concat(this.pending);
    this.pending = [all.subarray(n)];
    this.pendingBytes = all.length - n;
    return all.subarray(0, n);
  }

  /** Version 3.8, VNC authentication, ClientInit shared; the capture starts with ServerInit. */
  static async connect(port: number, pixelFormat: PixelFormat, encodings: number[]): Promise<RecordingClient> {
    const client = new RecordingClient(port);
    const deadline = Date.now() + 20_000;
    expect((await client.read(12, deadline)).toString('latin1')).toMatch(/^RFB 003\.00\d\n$/);
    client.socket.write('RFB 003.008\n');
    const types = [...(await client.read((await client.read(1, deadline))[0], deadline))];
    expect(types).toContain(2);
    client.socket.write(Buffer.from([2]));
    client.socket.write(vncAuthResponse(PASSWORD, await client.read(16, deadline)));
    expect((await client.read(4, deadline)).readUInt32BE(0)).toBe(0);
    client.socket.write(Buffer.from([1]));
    const init = await client.read(24, deadline);
    const name = await client.read(init.readUInt32BE(20), deadline);
    // From here on every server byte is recorded, starting with ServerInit at 0 ms.
    client.startedAt = performance.now();
    client.capturing = true;
    client.record(Buffer.concat([init, name]));
    const early = Buffer.concat(client.pending);
    client.pending = [];
    client.pendingBytes = 0;
    if (early.length) client.record(early);
    client.setPixelFormat(pixelFormat);
    const setEncodings = Buffer.alloc(4 + 4 * encodings.length);
    setEncodings[0] = 2;
    setEncodings.writeUInt16BE(encodings.length, 2);
    encodings.forEach((e, i) => setEncodings.writeInt32BE(e, 4 + 4 * i));
    client.socket.write(setEncodings);
    client.requestUpdate(false);
    return client;
  }

  setPixelFormat(pf: PixelFormat): void {
    const format = encodePixelFormat(pf);
    this.records.push(encodeCaptureRecord(CaptureRecordKind.PixelFormat, this.now(), format));
    this.live.setPixelFormat(format);
    this.socket.write(Buffer.concat([Buffer.from([0, 0, 0, 0]), format]));
  }

  requestUpdate(incremental: boolean): void {
    const msg = Buffer.alloc(10);
    msg[0] = 3;
    msg[1] = incremental ? 1 : 0;
    msg.writeUInt16BE(this.live.width, 6);
    msg.writeUInt16BE(this.live.height, 8);
    this.socket.write(msg);
  }

  /** Ends the capture: the End record, then the segments (split in two, as a long session would be). */
  finish(): { segments: Buffer[]; durationMs: number } {
    this.capturing = false;
    const durationMs = this.now();
    this.socket.destroy();
    const all = [...this.records, encodeCaptureRecord(CaptureRecordKind.End, durationMs)];
    const half = Math.ceil(all.length / 2);
    return { segments: [Buffer.concat([CAPTURE_MAGIC, ...all.slice(0, half)]), Buffer.concat([CAPTURE_MAGIC, ...all.slice(half)])], durationMs };
  }

  /** The live framebuffer's pixel (x, y) as "rrggbb". */
  pixel(x: number, y: number): string {
    const fb = this.live.framebuffer;
    return fb.data.subarray((y * fb.width + x) * 4, (y * fb.width + x) * 4 + 3).toString('hex');
  }
}

/** Replays a capture's segments through a fresh decoder, as the conversion job reads them. */
async function replay(segments: Buffer[]): Promise<RfbReplayDecoder> {
  const decoder = new RfbReplayDecoder();
  for await (const r of readCaptureRecords(segments.map((s) => Readable.from([s])))) {
    if (r.kind === CaptureRecordKind.Server) decoder.push(r.payload);
    else if (r.kind === CaptureRecordKind.PixelFormat) decoder.setPixelFormat(r.payload);
  }
  return decoder;
}

interface Difference {
  /** Pixels whose largest channel difference exceeds the tolerance. */
  count: number;
  /** Their bounding box (empty when count is 0). */
  box: { width: number; height: number };
  meanAbs: number;
}

function compare(a: Buffer, b: Buffer, width: number, tolerance: number): Difference {
  let count = 0;
  let sum = 0;
  let [minX, minY, maxX, maxY] = [Infinity, Infinity, -1, -1];
  for (let i = 0; i < a.length; i += 4) {
    const d = Math.max(Math.abs(a[i] - b[i]), Math.abs(a[i + 1] - b[i + 1]), Math.abs(a[i + 2] - b[i + 2]));
    sum += Math.abs(a[i] - b[i]) + Math.abs(a[i + 1] - b[i + 1]) + Math.abs(a[i + 2] - b[i + 2]);
    if (d <= tolerance) continue;
    count++;
    const p = i / 4;
    const x = p % width;
    const y = Math.floor(p / width);
    [minX, minY, maxX, maxY] = [Math.min(minX, x), Math.min(minY, y), Math.max(maxX, x), Math.max(maxY, y)];
  }
  return { count, box: count ? { width: maxX - minX + 1, height: maxY - minY + 1 } : { width: 0, height: 0 }, meanAbs: sum / ((a.length / 4) * 3) };
}

/** Plays the video in Chromium's <video>: its size, duration and the colour of pixel (x, y) of the last frame. */
async function playInChromium(path: string, x: number, y: number): Promise<{ width: number; height: number; duration: number; rgb: number[] }> {
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const src = `data:video/webm;base64,${(await readFile(path)).toString('base64')}`;
    await page.setContent('<video id="v" muted preload="auto"></video><canvas id="c"></canvas>');
    return await page.evaluate(
      async ({ src, x, y }) => {
        const video = document.getElementById('v') as HTMLVideoElement;
        const once = (event: string) =>
          new Promise<void>((resolve, reject) => {
            video.addEventListener(event, () => resolve(), { once: true });
            video.addEventListener('error', () => reject(new Error(`video error ${video.error?.code} ${video.error?.message}`)), { once: true });
          });
        const loaded = once('loadeddata');
        video.src = src;
        await loaded;
        const seeked = once('seeked');
        // 'seeked' can come before the frame is presented (a busy machine then draws black): wait for the frame too,
        // bounded, since a paused video presents the seeked frame once.
        const presented = new Promise<void>((resolve) => {
          video.requestVideoFrameCallback(() => resolve());
          setTimeout(resolve, 10_000);
        });
        video.currentTime = Math.max(0, video.duration - 0.1);
        await seeked;
        await presented;
        const canvas = document.getElementById('c') as HTMLCanvasElement;
        canvas.width = video.videoWidth;
        canvas.height = video.videoHeight;
        const context = canvas.getContext('2d') as CanvasRenderingContext2D;
        context.drawImage(video, 0, 0);
        return { width: video.videoWidth, height: video.videoHeight, duration: video.duration, rgb: [...context.getImageData(x, y, 1, 1).data.slice(0, 3)] };
      },
      { src, x, y },
    );
  } finally {
    await browser.close();
  }
}

describe.each(['xvnc', 'x11vnc'])('recording decoder against %s', (vncServer) => {
  let containerId = '';
  let port = 0;
  let workDir = '';

  beforeAll(async () => {
    const image = desktopImage();
    await ensureWorkspaceNetwork(host);
    const spec = buildContainerSpec({
      workspace: { id: `e2e-${randomSecret(8)}`, cores: 1, memory: 1024 * 1024 * 1024, token: PASSWORD },
      image: { name: image, xRes: WIDTH, yRes: HEIGHT, attributes: [{ category: 'port_map', name: 'vnc', value: '5900/tcp' }] },
      server: { publishHost: '127.0.0.1' },
      deploymentId,
      environment: { WS_VNC_SERVER: vncServer },
    });
    containerId = (await host.createWorkspaceContainer(spec)).containerId;
    await host.start(containerId);
    port = (await host.inspect(containerId)).hostPorts.vnc;
    await host.waitForRfb('127.0.0.1', port, { timeoutMs: 60_000 });
    workDir = await mkdtemp(join(tmpdir(), 'recording-decoder-e2e-'));
  }, 180_000);

  afterAll(async () => {
    for (const c of await host.listByLabels({ [LABELS.deploymentId]: deploymentId })) await host.remove(c.id);
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  /** Runs a shell command as the desktop user (DISPLAY=:1 is the image's default). */
  const sh = async (cmd: string) => {
    const result = await host.exec(containerId, { cmd, timeoutMs: 20_000 });
    expect({ cmd, exitCode: result.exitCode, stderr: result.stderr }).toEqual({ cmd, exitCode: 0, stderr: '' });
  };

  /**
   * Records while the root window changes colour and an xterm opens and prints, until the screen is quiet; then
   * compares the replayed capture with a Raw-only capture of the same screen and converts it.
   */
  async function recordAndCompare(pixelFormat: PixelFormat, encodings: number[], rootColour: string, preferred: number): Promise<void> {
    const lastColour = rootColour.split('').reverse().join('');
    const client = await RecordingClient.connect(port, pixelFormat, encodings);
    const poll = setInterval(() => client.requestUpdate(true), 40);
    try {
      await waitFor('the first full frame', () => (client.live.stats.rects > 0 ? true : undefined));
      await sh(`xsetroot -solid '#${rootColour}'`);
      // The top-left corner of the root window (the first xterm sits at +40+40 and reaches the bottom right) shows the new colour in the capture.
      await waitFor(`#${rootColour} in the capture`, () => (client.pixel(3, 3) === rootColour ? true : undefined)).catch((e: Error) => {
        throw new Error(`${e.message}: the corner shows #${client.pixel(3, 3)}, ${client.serverBytes} bytes, ${JSON.stringify([...client.live.stats.encodings])}`);
      });
      const before = Buffer.from(client.live.framebuffer.data);
      const xterm = `xterm -geometry 50x8+260+230 -bg '#${rootColour}' -fg yellow -title rec-${rootColour} -e sh -c 'ls -la /usr/bin | head -40; seq 1 200 | tr "\\n" " "; exec sleep 600'`;
      await host.exec(containerId, { cmd: xterm, wait: false });
      // A 50x8 character window (~30000 pixels) in this test's own colour over whatever was there.
      await waitFor('the new xterm in the capture', () => (compare(before, client.live.framebuffer.data, WIDTH, 0).count > 10_000 ? true : undefined));
      await sh(`xsetroot -solid '#${lastColour}'`);
      await waitFor(`#${lastColour} in the capture`, () => (client.pixel(3, 3) === lastColour ? true : undefined));
      // Quiet: no server bytes for a second, while incremental requests keep asking.
      await waitFor('a quiet screen', () => (performance.now() - client.lastDataAt > 1000 ? true : undefined), 30_000);
    } finally {
      clearInterval(poll);
    }
    const { segments, durationMs } = client.finish();

    const decoder = await replay(segments);
    expect(decoder.stats.encodings.get(preferred)).toBeGreaterThan(0);
    expect([decoder.width, decoder.height]).toEqual([WIDTH, HEIGHT]);
    expect(decoder.framebuffer.data.equals(client.live.framebuffer.data)).toBe(true);

    const reference = await RfbClient.connect('127.0.0.1', port, { password: PASSWORD });
    let frame: Buffer;
    try {
      frame = (await reference.captureFrame({ settleMs: 1000, timeoutMs: 20_000 })).data;
    } finally {
      await reference.close();
    }
    // Pixel-exact except where the server draws the pointer into a Raw-only client's frame (the recording client took
    // the pointer shape as a Cursor pseudo-rect): the differing pixels must fit one cursor-sized box. With JPEG
    // rects in the capture, channels may differ by a JPEG-sized tolerance, and the mean difference stays small.
    const jpeg = decoder.stats.jpegRects > 0;
    const diff = compare(decoder.framebuffer.data, frame, WIDTH, jpeg ? 48 : 0);
    expect({ box: diff.box.width <= 64 && diff.box.height <= 64, diff }).toEqual({ box: true, diff });
    expect(diff.meanAbs).toBeLessThan(jpeg ? 3 : 0.5);

    const video = await convertCapture({ segments: segments.map((s) => Readable.from([s])), durationMs, fps: 5, workDir });
    const probe = await probeVideo(video.videoPath);
    expect({ codec: probe.codec, width: probe.width, height: probe.height }).toEqual({ codec: 'vp8', width: WIDTH, height: HEIGHT });
    expect(Math.abs(probe.durationSeconds - durationMs / 1000)).toBeLessThanOrEqual(1);
    expect(video.thumbnailJpeg.subarray(0, 2).toString('hex')).toBe('ffd8');

    // Chromium plays it, and its last frame shows the last root colour (within VP8's loss).
    const played = await playInChromium(video.videoPath, 3, 3);
    expect({ width: played.width, height: played.height }).toEqual({ width: WIDTH, height: HEIGHT });
    expect(Math.abs(played.duration - durationMs / 1000)).toBeLessThanOrEqual(1);
    const expected = [0, 2, 4].map((i) => parseInt(lastColour.slice(i, i + 2), 16));
    expect({ rgb: played.rgb, near: played.rgb.every((v, i) => Math.abs(v - expected[i]) <= 24) }).toEqual({ rgb: played.rgb, near: true });
  }

  it('replays a Tight capture (32 bpp RGBX, JPEG allowed) to the screen a Raw client sees', async () => {
    const encodings = [Encoding.Tight, Encoding.ZRLE, Encoding.CopyRect, Encoding.Raw, Encoding.DesktopSize, Encoding.Cursor, Encoding.LastRect, JPEG_QUALITY_8, COMPRESS_LEVEL_6];
    await recordAndCompare(RGBX32, encodings, '7a3355', Encoding.Tight);
  }, 180_000);

  it('replays a ZRLE capture (32 bpp big-endian BGRX) to the screen a Raw client sees', async () => {
    const encodings = [Encoding.ZRLE, Encoding.Tight, Encoding.CopyRect, Encoding.Raw, Encoding.DesktopSize, Encoding.Cursor, Encoding.LastRect, JPEG_QUALITY_8];
    await recordAndCompare(BGRX32_BE, encodings, '2a6e91', Encoding.ZRLE);
  }, 180_000);
});
