/**
 * Screenshots of a VNC desktop as JPEG: capture one full frame with RfbClient, scale it to the requested
 * width (aspect ratio kept, height = round(width * h / w), at least 1) and encode with jpeg-js.
 */
import { encode as encodeJpeg } from 'jpeg-js';
import { DEFAULT_RFB_TIMEOUT_MS, RfbClient } from './rfb-client';
import { StreamRangeError } from './errors';

export const MAX_SCREENSHOT_WIDTH = 4096;
export const DEFAULT_SETTLE_MS = 1000;

export interface CaptureJpegOptions {
  /** Output width in pixels, integer 1..4096. Default 300. */
  width?: number;
  password?: string;
  /** JPEG quality, integer 1..100. Default 80. */
  quality?: number;
  /** Bound for connect + handshake + frame (each phase gets the remaining time). Default 10 s. */
  timeoutMs?: number;
  /**
   * Quiet period after the full frame during which later updates are still applied (0 disables).
   * Default 1000 ms: x11vnc only polls the screen while a client is connected, so a fresh connection first
   * gets its last snapshot and the changes made while nobody was watching about half a second later.
   * The settle phase lasts at most 4 × settleMs (a constantly changing screen ends it), within timeoutMs.
   */
  settleMs?: number;
  /** Upper bound of the settle phase (default 4 × settleMs): a desktop that never stops changing (a blinking cursor) ends it here. */
  maxSettleMs?: number;
}

export interface JpegScreenshot {
  jpeg: Buffer;
  width: number;
  height: number;
  sourceWidth: number;
  sourceHeight: number;
}

export interface RgbaImage {
  width: number;
  height: number;
  /** 4 bytes per pixel, row-major, no padding. */
  data: Uint8Array;
}

function checkInteger(field: string, value: number, min: number, max: number): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new StreamRangeError(field, value, `an integer from ${min} to ${max}`);
  }
}

/** Height for `width` keeping the aspect ratio of sourceWidth x sourceHeight (at least 1). */
export function scaledHeight(width: number, sourceWidth: number, sourceHeight: number): number {
  return Math.max(1, Math.round((width * sourceHeight) / sourceWidth));
}

interface Taps {
  /** First source index per output index. */
  start: Int32Array;
  /** Number of source taps per output index. */
  count: Int32Array;
  /** Weights, `maxTaps` per output index (sum 1). */
  weights: Float32Array;
  maxTaps: number;
}

/**
 * 1-D resampling weights. Shrinking: box filter (each output pixel averages the source interval it covers,
 * partially covered source pixels weighted by coverage). Enlarging: bilinear (pixel centres aligned).
 */
function taps(source: number, target: number): Taps {
  const scale = source / target;
  const maxTaps = scale > 1 ? Math.ceil(scale) + 1 : 2;
  const start = new Int32Array(target);
  const count = new Int32Array(target);
  const weights = new Float32Array(target * maxTaps);
  for (let i = 0; i < target; i++) {
    if (scale > 1) {
      const from = i * scale;
      const to = Math.min(source, from + scale);
      const first = Math.floor(from);
      const last = Math.min(source - 1, Math.ceil(to) - 1);
      start[i] = first;
      count[i] = last - first + 1;
      for (let j = first; j <= last; j++) {
        const overlap = Math.min(j + 1, to) - Math.max(j, from);
        weights[i * maxTaps + (j - first)] = overlap / scale;
      }
    } else {
      const centre = Math.min(source - 1, Math.max(0, (i + 0.5) * scale - 0.5));
      const first = Math.floor(centre);
      const frac = centre - first;
      start[i] = first;
      if (first + 1 < source && frac > 0) {
        count[i] = 2;
        weights[i * maxTaps] = 1 - frac;
        weights[i * maxTaps + 1] = frac;
      } else {
        count[i] = 1;
        weights[i * maxTaps] = 1;
      }
    }
  }
  return { start, count, weights, maxTaps };
}

/**
 * Resamples an RGBA image to width x height (box filter when shrinking, bilinear when enlarging), one
 * output row at a time: memory is O(source width), not O(image). Output alpha is 255.
 */
export function scaleRgba(src: RgbaImage, width: number, height: number): Buffer {
  checkInteger('width', width, 1, 65535);
  checkInteger('height', height, 1, 65535);
  if (src.width < 1 || src.height < 1 || src.data.length < src.width * src.height * 4) throw new RangeError('source image is empty or truncated');
  const out = Buffer.alloc(width * height * 4);
  if (width === src.width && height === src.height) {
    Buffer.from(src.data.buffer, src.data.byteOffset, width * height * 4).copy(out);
    for (let i = 3; i < out.length; i += 4) out[i] = 255;
    return out;
  }
  const h = taps(src.width, width);
  const v = taps(src.height, height);
  const row = new Float32Array(src.width * 3);
  const data = src.data;
  const srcStride = src.width * 4;
  for (let oy = 0; oy < height; oy++) {
    // Vertical pass into one source-width row.
    row.fill(0);
    for (let t = 0; t < v.count[oy]; t++) {
      const w = v.weights[oy * v.maxTaps + t];
      const base = (v.start[oy] + t) * srcStride;
      for (let x = 0, s = base, d = 0; x < src.width; x++, s += 4, d += 3) {
        row[d] += data[s] * w;
        row[d + 1] += data[s + 1] * w;
        row[d + 2] += data[s + 2] * w;
      }
    }
    // Horizontal pass into the output row.
    let o = oy * width * 4;
    for (let ox = 0; ox < width; ox++, o += 4) {
      let r = 0;
      let g = 0;
      let b = 0;
      for (let t = 0; t < h.count[ox]; t++) {
        const w = h.weights[ox * h.maxTaps + t];
        const s = (h.start[ox] + t) * 3;
        r += row[s] * w;
        g += row[s + 1] * w;
        b += row[s + 2] * w;
      }
      out[o] = Math.min(255, Math.max(0, Math.round(r)));
      out[o + 1] = Math.min(255, Math.max(0, Math.round(g)));
      out[o + 2] = Math.min(255, Math.max(0, Math.round(b)));
      out[o + 3] = 255;
    }
  }
  return out;
}

/** Scales an RGBA frame to `width` (aspect kept) and encodes it as JPEG. */
export function encodeScaledJpeg(frame: RgbaImage, width: number, quality = 80): JpegScreenshot {
  checkInteger('width', width, 1, MAX_SCREENSHOT_WIDTH);
  checkInteger('quality', quality, 1, 100);
  const height = scaledHeight(width, frame.width, frame.height);
  const pixels = scaleRgba(frame, width, height);
  const jpeg = encodeJpeg({ data: pixels, width, height }, quality).data;
  return { jpeg, width, height, sourceWidth: frame.width, sourceHeight: frame.height };
}

/**
 * Connects to the VNC server, captures one full frame and returns it as a JPEG `width` pixels wide.
 * Throws StreamRangeError for a bad width/quality/timeout (before connecting) and RfbError for VNC failures.
 */
export async function captureJpeg(host: string, port: number, options: CaptureJpegOptions = {}): Promise<JpegScreenshot> {
  const width = options.width ?? 300;
  const quality = options.quality ?? 80;
  const timeoutMs = options.timeoutMs ?? DEFAULT_RFB_TIMEOUT_MS;
  checkInteger('width', width, 1, MAX_SCREENSHOT_WIDTH);
  checkInteger('quality', quality, 1, 100);
  const settleMs = options.settleMs ?? DEFAULT_SETTLE_MS;
  checkInteger('timeoutMs', timeoutMs, 1, 600_000);
  checkInteger('settleMs', settleMs, 0, 60_000);
  const deadline = Date.now() + timeoutMs;
  const client = await RfbClient.connect(host, port, { password: options.password, timeoutMs });
  try {
    const frame = await client.captureFrame({ timeoutMs: Math.max(1, deadline - Date.now()), settleMs, maxSettleMs: options.maxSettleMs });
    return encodeScaledJpeg(frame, width, quality);
  } finally {
    await client.close();
  }
}
