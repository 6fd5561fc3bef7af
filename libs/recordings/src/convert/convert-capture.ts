/**
 * A raw RFB capture (capture-format.ts) → a WebM video and a JPEG thumbnail.
 *
 * The records are replayed through RfbReplayDecoder in order; frame k of the video (k = 0 … ceil(duration·fps)−1)
 * shows the framebuffer as it was at time k/fps, i.e. after every record stamped at or before that time. Frames
 * go to ffmpeg's stdin one at a time as raw RGBA (never the whole video in memory), at the size of the first
 * ServerInit rounded up to even; a later resize is scaled to fit and centred on black. Until the first pixels
 * arrive the video is black.
 */
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { encodeScaledJpeg, scaleRgba } from '@ws/stream';
import { CaptureFormatError, CaptureRecordKind, readCaptureRecords } from '../capture-format';
import { BLACK } from '../replay/pixels';
import { ReplayImage, RfbReplayDecoder } from '../replay/rfb-replay';
import { VideoEncodingError, WebmEncoder, abortError, probeVideo } from './ffmpeg';

export const THUMBNAIL_WIDTH = 320;
/** The video may differ from the session's length by this much (frame rounding is at most one frame). */
const DURATION_TOLERANCE_SECONDS = 1;

export interface ConvertCaptureInput {
  /** The capture's segments in order (e.g. streams from the object store, each opened when reached). */
  segments: AsyncIterable<Readable> | Iterable<Readable>;
  /** Session length (ended_at − started_at); the video lasts this long. */
  durationMs: number;
  /** Frames per second (RECORDING_FPS). */
  fps: number;
  /** A scratch directory the caller creates and removes; the video is written into it. */
  workDir: string;
  /** Aborting kills ffmpeg and rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Refuse framebuffers larger than this many pixels (default: the decoder's, 40 Mpx). */
  maxPixels?: number;
}

export interface ConvertedRecording {
  videoPath: string;
  contentType: 'video/webm';
  /** As ffprobe measured the written file, rounded to whole seconds. */
  durationSeconds: number;
  width: number;
  height: number;
  /** About THUMBNAIL_WIDTH pixels wide: the frame at mid-session. */
  thumbnailJpeg: Buffer;
}

/** Renders the decoder's framebuffer into fixed-size output frames; an unchanged framebuffer reuses the last one. */
class FrameRenderer {
  private last: Buffer | undefined;
  private lastChanges = -1;
  readonly black: Buffer;

  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.black = Buffer.from(new Uint32Array(width * height).fill(BLACK).buffer);
  }

  /** The current frame; never modified afterwards (ffmpeg's pipe may still hold it). */
  frame(decoder: RfbReplayDecoder): Buffer {
    if (!decoder.initialized) return this.black;
    if (this.last && decoder.changes === this.lastChanges) return this.last;
    this.last = this.render(decoder);
    this.lastChanges = decoder.changes;
    return this.last;
  }

  private render(decoder: RfbReplayDecoder): Buffer {
    const fb = decoder.framebuffer;
    const out = Buffer.from(this.black);
    if (fb.width === 0 || fb.height === 0) return out;
    let image: ReplayImage = fb;
    let scale = 1;
    if (fb.width > this.width || fb.height > this.height || (fb.width < this.width - 1 && fb.height < this.height - 1)) {
      // Resized during the session: fit into the first size, aspect kept.
      scale = Math.min(this.width / fb.width, this.height / fb.height);
      const width = Math.max(1, Math.min(this.width, Math.round(fb.width * scale)));
      const height = Math.max(1, Math.min(this.height, Math.round(fb.height * scale)));
      image = { width, height, data: scaleRgba(fb, width, height) };
    }
    const left = Math.floor((this.width - image.width) / 2);
    const top = Math.floor((this.height - image.height) / 2);
    const rowBytes = image.width * 4;
    for (let y = 0; y < image.height; y++) image.data.copy(out, ((top + y) * this.width + left) * 4, y * rowBytes, (y + 1) * rowBytes);
    this.drawCursor(decoder, out, left, top, scale);
    return out;
  }

  /** The pointer as the browser showed it: the server's cursor shape where the browser last put the pointer. */
  private drawCursor(decoder: RfbReplayDecoder, out: Buffer, left: number, top: number, scale: number): void {
    const cursor = decoder.cursor;
    const at = decoder.pointerPosition;
    if (!cursor || !at || scale !== 1) return;
    for (let cy = 0; cy < cursor.height; cy++) {
      const y = top + at.y - cursor.hotY + cy;
      if (y < 0 || y >= this.height) continue;
      for (let cx = 0; cx < cursor.width; cx++) {
        const x = left + at.x - cursor.hotX + cx;
        const s = (cy * cursor.width + cx) * 4;
        if (x < 0 || x >= this.width || cursor.data[s + 3] === 0) continue;
        cursor.data.copy(out, (y * this.width + x) * 4, s, s + 3);
      }
    }
  }
}

function checkInput(input: ConvertCaptureInput): void {
  if (!Number.isFinite(input.durationMs) || input.durationMs < 0) throw new RangeError(`durationMs must be a non-negative number, got ${input.durationMs}`);
  if (!Number.isInteger(input.fps) || input.fps < 1 || input.fps > 60) throw new RangeError(`fps must be an integer from 1 to 60, got ${input.fps}`);
}

/** Replays the capture, encodes the video, verifies its duration with ffprobe and makes the thumbnail. */
export async function convertCapture(input: ConvertCaptureInput): Promise<ConvertedRecording> {
  checkInput(input);
  const { fps, signal } = input;
  if (signal?.aborted) throw abortError(signal);
  const frameCount = Math.max(1, Math.ceil((input.durationMs / 1000) * fps));
  const thumbnailFrame = Math.floor(frameCount / 2);
  const videoPath = join(input.workDir, 'recording.webm');
  const decoder = new RfbReplayDecoder({ maxPixels: input.maxPixels });

  let encoder: WebmEncoder | undefined;
  let renderer: FrameRenderer | undefined;
  let thumbnail: ReplayImage | undefined;
  /** Frames due before the first ServerInit told the size: black, written once the encoder exists. */
  let blackFramesOwed = 0;
  let next = 0;

  const emit = async () => {
    if (!renderer || !encoder) {
      blackFramesOwed++;
      next++;
      return;
    }
    const frame = renderer.frame(decoder);
    if (next === thumbnailFrame) thumbnail = { width: renderer.width, height: renderer.height, data: frame };
    await encoder.write(frame);
    next++;
  };

  const startEncoder = async () => {
    if (decoder.width === 0 || decoder.height === 0) throw new CaptureFormatError(`the capture's framebuffer is ${decoder.width}x${decoder.height}`);
    renderer = new FrameRenderer(decoder.width + (decoder.width & 1), decoder.height + (decoder.height & 1));
    encoder = new WebmEncoder({ width: renderer.width, height: renderer.height, fps, outputPath: videoPath, signal });
    for (let k = 0; k < blackFramesOwed; k++) {
      if (k === thumbnailFrame) thumbnail = { width: renderer.width, height: renderer.height, data: renderer.black };
      await encoder.write(renderer.black);
    }
  };

  try {
    for await (const record of readCaptureRecords(input.segments)) {
      if (signal?.aborted) throw abortError(signal);
      // Every frame is written (records stamped after the session's end change nothing that is shown).
      if (encoder && next >= frameCount) break;
      // Every frame due strictly before this record shows the state without it.
      while (next < frameCount && (next * 1000) / fps < record.at) await emit();
      if (record.kind === CaptureRecordKind.End) break;
      if (record.kind === CaptureRecordKind.PixelFormat) decoder.setPixelFormat(record.payload);
      else if (record.kind === CaptureRecordKind.Pointer) {
        if (record.payload.length === 4) decoder.pointerMoved(record.payload.readUInt16BE(0), record.payload.readUInt16BE(2));
      } else {
        decoder.push(record.payload);
        if (!encoder && decoder.initialized) await startEncoder();
      }
    }
    if (!encoder) throw new CaptureFormatError('the capture holds no ServerInit (nothing was recorded)');
    while (next < frameCount) {
      if (signal?.aborted) throw abortError(signal);
      await emit();
    }
    await encoder.finish();
  } catch (error) {
    await encoder?.kill();
    throw error;
  }

  const probe = await probeVideo(videoPath);
  const expected = input.durationMs / 1000;
  if (Math.abs(probe.durationSeconds - expected) > DURATION_TOLERANCE_SECONDS) {
    throw new VideoEncodingError(`the video lasts ${probe.durationSeconds} s, the session ${expected} s`);
  }
  const shot = thumbnail ?? { width: (renderer as FrameRenderer).width, height: (renderer as FrameRenderer).height, data: (renderer as FrameRenderer).frame(decoder) };
  const thumbnailJpeg = encodeScaledJpeg(shot, Math.min(THUMBNAIL_WIDTH, shot.width)).jpeg;
  return { videoPath, contentType: 'video/webm', durationSeconds: Math.round(probe.durationSeconds), width: probe.width, height: probe.height, thumbnailJpeg };
}
