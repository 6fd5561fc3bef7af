/**
 * convertCapture with the real ffmpeg/ffprobe (scripts/ensure-media-tools.sh): synthetic captures whose colours
 * change at known times, checked by ffprobe and by decoding single frames of the written video.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { decode as decodeJpeg } from 'jpeg-js';
import { Encoding } from '@ws/stream';
import { CaptureFormatError } from '../capture-format';
import { FORMATS, ServerDeflater, cat, encodePixel, picture, pixelValue, rectHeader, record, segment, serverInit, tight, u8, update, zrleRect } from '../replay/replay-test-helpers';
import { convertCapture } from './convert-capture';
import { VideoEncodingError, probeVideo } from './ffmpeg';

type Rgb = [number, number, number];
const RED: Rgb = [230, 20, 20];
const GREEN: Rgb = [20, 220, 40];
const BLUE: Rgb = [20, 40, 230];
const YELLOW: Rgb = [240, 230, 20];

/** The first frame of the video at or after `seconds` (output seeking), as RGB24. */
function frameAt(path: string, seconds: number, width: number, height: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    execFile(
      'ffmpeg',
      ['-hide_banner', '-loglevel', 'error', '-i', path, '-ss', String(seconds), '-frames:v', '1', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'],
      { encoding: 'buffer', timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message} ${stderr.toString()}`));
        else if (stdout.length !== width * height * 3) reject(new Error(`frame of ${stdout.length} bytes`));
        else resolve(stdout);
      },
    );
  });
}

function pixel(rgb24: Buffer, width: number, x: number, y: number): Rgb {
  const i = (y * width + x) * 3;
  return [rgb24[i], rgb24[i + 1], rgb24[i + 2]];
}

function expectNear(actual: Rgb, expected: Rgb, what: string): void {
  const off = Math.max(...actual.map((v, i) => Math.abs(v - expected[i])));
  if (off > 32) throw new Error(`${what}: ${actual.join(',')} is not near ${expected.join(',')}`);
}

/** Segments as streams that deliver their bytes in small chunks (records cross chunk boundaries). */
function streams(...segments: Buffer[]): Readable[] {
  return segments.map((s) => Readable.from(Array.from({ length: Math.ceil(s.length / 7) }, (_, i) => s.subarray(i * 7, i * 7 + 7))));
}

describe('convertCapture', () => {
  let workDir: string;
  beforeEach(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'convert-capture-'));
  });
  afterEach(async () => {
    await rm(workDir, { recursive: true, force: true });
  });

  const pf = FORMATS.rgbx32;
  // Odd on purpose: the video is padded to 66x50.
  const W = 65;
  const H = 49;
  const fill = (rgb: Rgb, w = W, h = H) => update([tight.fill(pf, 0, 0, w, h, rgb)]);

  it('encodes a WebM whose frames show the framebuffer at each time, with the session duration', async () => {
    const deflater = new ServerDeflater();
    const blue = await zrleRect(picture(W, H, pf, () => BLUE), pf, deflater, () => 'solid');
    deflater.close();
    // Nothing until 0.7 s (black), red, green at 1 s, blue (ZRLE) at 2.5 s, then a resize to twice the size in
    // yellow at 3.2 s; the session lasts 4 s. Two segments, the second starting with a PixelFormat record.
    const first = segment(record.server(700, serverInit(W, H, pf)), record.server(700, fill(RED)), record.server(1000, fill(GREEN)));
    const second = segment(
      record.pixelFormat(1800, pf),
      record.server(2500, update([blue])),
      record.server(3200, cat(update([rectHeader(0, 0, 2 * W, 2 * H, Encoding.DesktopSize)]), fill(YELLOW, 2 * W, 2 * H))),
      record.end(4000),
    );
    const result = await convertCapture({ segments: streams(first, second), durationMs: 4000, fps: 5, workDir });
    expect(result).toMatchObject({ contentType: 'video/webm', width: 66, height: 50, durationSeconds: 4 });
    const probe = await probeVideo(result.videoPath);
    expect(probe.codec).toBe('vp8');
    expect(Math.abs(probe.durationSeconds - 4)).toBeLessThanOrEqual(0.5);
    expect([probe.width, probe.height]).toEqual([66, 50]);

    const centre = (f: Buffer) => pixel(f, 66, 32, 24);
    expectNear(centre(await frameAt(result.videoPath, 0.2, 66, 50)), [0, 0, 0], 'before the first pixels');
    expectNear(centre(await frameAt(result.videoPath, 0.8, 66, 50)), RED, 'at 0.8 s');
    expectNear(centre(await frameAt(result.videoPath, 1.4, 66, 50)), GREEN, 'at 1.4 s');
    expectNear(centre(await frameAt(result.videoPath, 2.6, 66, 50)), BLUE, 'at 2.6 s');
    const late = await frameAt(result.videoPath, 3.6, 66, 50);
    expectNear(centre(late), YELLOW, 'at 3.6 s, after the resize');
    expectNear(pixel(late, 66, 2, 2), YELLOW, 'the resized picture fills the frame');

    // The thumbnail is the frame at mid-session (2 s: green), 66 px wide (never wider than the video).
    const thumb = decodeJpeg(result.thumbnailJpeg, { useTArray: true });
    expect(thumb.width).toBe(66);
    const t = (25 * thumb.width + 33) * 4;
    expectNear([thumb.data[t], thumb.data[t + 1], thumb.data[t + 2]], GREEN, 'thumbnail');
  });

  it("draws the server's cursor shape where the browser put the pointer (Pointer records)", async () => {
    // A 3x3 white cursor with its hot spot in its middle; the pointer at (10, 10), then at (40, 30) from 1.5 s.
    const white = encodePixel(pf, pixelValue(pf, 255, 255, 255));
    const cursor = cat(rectHeader(1, 1, 3, 3, Encoding.Cursor), ...Array.from({ length: 9 }, () => white), u8(0xe0, 0xe0, 0xe0));
    const capture = segment(
      record.server(0, serverInit(W, H, pf)), record.server(0, cat(fill(BLUE), update([cursor]))),
      record.pointer(200, 10, 10), record.pointer(1500, 40, 30), record.end(3000),
    );
    const result = await convertCapture({ segments: streams(capture), durationMs: 3000, fps: 5, workDir });
    const early = await frameAt(result.videoPath, 1, 66, 50);
    expectNear(pixel(early, 66, 10, 10), [255, 255, 255], 'the pointer at 1 s');
    expectNear(pixel(early, 66, 40, 30), BLUE, 'not yet where it goes next');
    const late = await frameAt(result.videoPath, 2.4, 66, 50);
    expectNear(pixel(late, 66, 40, 30), [255, 255, 255], 'the pointer at 2.4 s');
    expectNear(pixel(late, 66, 10, 10), BLUE, 'nothing left where it was');
  });

  it('refuses a capture without ServerInit, and aborts on the signal', async () => {
    await expect(convertCapture({ segments: streams(segment(record.end(1000))), durationMs: 1000, fps: 5, workDir })).rejects.toBeInstanceOf(CaptureFormatError);

    const controller = new AbortController();
    async function* segments(): AsyncGenerator<Readable> {
      yield Readable.from([segment(record.server(0, serverInit(W, H, pf)), record.server(0, fill(RED)))]);
      controller.abort(new Error('worker shutting down'));
      yield Readable.from([segment(record.server(59_000, fill(GREEN)), record.end(60_000))]);
    }
    await expect(convertCapture({ segments: segments(), durationMs: 60_000, fps: 5, workDir, signal: controller.signal })).rejects.toThrow('worker shutting down');
  });

  it("fails with ffmpeg's own words when it cannot write the video", async () => {
    const capture = segment(record.server(0, serverInit(W, H, pf)), record.server(0, fill(RED)), record.end(2000));
    const error = await convertCapture({ segments: streams(capture), durationMs: 2000, fps: 5, workDir: join(workDir, 'missing', 'dir') }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VideoEncodingError);
    expect((error as Error).message).toMatch(/^ffmpeg .*(exit code|exited with code) 1.*No such file or directory/s);
  });

  it('fails with a clear error on a garbage stream', async () => {
    const bad = segment(record.server(0, serverInit(W, H, pf)), record.server(100, Buffer.from([7, 7, 7])), record.end(1000));
    await expect(convertCapture({ segments: streams(bad), durationMs: 1000, fps: 5, workDir })).rejects.toThrow(/unknown server message type 7/);
  });
});
