/**
 * Debian's ffmpeg and ffprobe as child processes: a raw RGBA → WebM (VP8) encoder fed through stdin with
 * backpressure, and ffprobe's JSON for a file. Every process is killed on abort or error, and a failure carries
 * the tail of the tool's stderr.
 */
import { ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';

const STDERR_TAIL_BYTES = 4000;
const PROBE_TIMEOUT_MS = 60_000;
/** After the last frame ffmpeg only flushes its encoder and writes the WebM index: seconds, never minutes. */
const FINISH_TIMEOUT_MS = 120_000;

/** ffmpeg failed or could not be started (not the capture's fault: a retry may succeed). */
export class VideoEncodingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VideoEncodingError';
  }
}

export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const error = new Error('recording conversion aborted');
  error.name = 'AbortError';
  return error;
}

export interface VideoProbe {
  durationSeconds: number;
  width: number;
  height: number;
  codec: string;
}

/** Duration (container, else stream), size and codec of the first video stream, via `ffprobe -of json`. */
export async function probeVideo(path: string): Promise<VideoProbe> {
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      'ffprobe',
      ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'format=duration:stream=codec_name,width,height,duration', '-of', 'json', path],
      { timeout: PROBE_TIMEOUT_MS, maxBuffer: 1024 * 1024 },
      (error, out, err) => {
        if (error) reject(new VideoEncodingError(`ffprobe ${path} failed: ${error.message} ${String(err).slice(-STDERR_TAIL_BYTES)}`.trim()));
        else resolve(out);
      },
    );
  });
  let parsed: { format?: { duration?: string }; streams?: { codec_name?: string; width?: number; height?: number; duration?: string }[] };
  try {
    parsed = JSON.parse(stdout) as typeof parsed;
  } catch {
    throw new VideoEncodingError(`ffprobe ${path} printed no JSON: ${stdout.slice(0, 200)}`);
  }
  const stream = parsed.streams?.[0];
  if (!stream) throw new VideoEncodingError(`ffprobe found no video stream in ${path}`);
  const duration = Number(parsed.format?.duration ?? stream.duration);
  if (!Number.isFinite(duration)) throw new VideoEncodingError(`ffprobe found no duration in ${path}`);
  return { durationSeconds: duration, width: stream.width ?? 0, height: stream.height ?? 0, codec: stream.codec_name ?? '' };
}

export interface WebmEncoderOptions {
  width: number;
  height: number;
  fps: number;
  outputPath: string;
  signal?: AbortSignal;
}

/**
 * ffmpeg reading raw RGBA frames of a fixed size on stdin and writing WebM VP8 (realtime deadline: conversion
 * speed matters more than the last bit of compression for screen content that mostly stands still).
 */
export class WebmEncoder {
  private readonly child: ChildProcessWithoutNullStreams;
  private stderrTail = '';
  private failure: Error | undefined;
  private stdinBroken = false;
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly onAbort: () => void;
  private readonly frameBytes: number;

  constructor(private readonly options: WebmEncoderOptions) {
    const { width, height, fps, outputPath } = options;
    this.frameBytes = width * height * 4;
    // -g: a keyframe every 10 s keeps seeking in a long recording cheap.
    const args = [
      ...['-hide_banner', '-nostdin', '-loglevel', 'error', '-y'],
      ...['-f', 'rawvideo', '-pix_fmt', 'rgba', '-s', `${width}x${height}`, '-framerate', String(fps), '-i', 'pipe:0'],
      ...['-an', '-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-crf', '10', '-b:v', '2M', '-qmin', '4', '-qmax', '50'],
      ...['-g', String(Math.max(1, fps * 10)), '-pix_fmt', 'yuv420p', '-threads', '2', '-f', 'webm', outputPath],
    ];
    this.child = spawn('ffmpeg', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout.resume();
    this.child.stderr.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    // EPIPE: ffmpeg quit; why is in its exit status and stderr, which write() waits for.
    this.child.stdin.on('error', () => {
      this.stdinBroken = true;
    });
    this.exited = new Promise((resolve) => {
      this.child.once('error', (error) => {
        this.fail(new VideoEncodingError(`cannot run ffmpeg: ${error.message}`));
        resolve({ code: null, signal: null });
      });
      this.child.once('close', (code, signal) => resolve({ code, signal }));
    });
    this.onAbort = () => {
      this.fail(abortError(options.signal as AbortSignal));
      this.kill();
    };
    if (options.signal?.aborted) this.onAbort();
    else options.signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  private tail(): string {
    const text = this.stderrTail.trim();
    return text ? `: ${text}` : '';
  }

  private fail(error: Error): void {
    this.failure ??= error;
  }

  /** Why ffmpeg stopped reading frames: its exit status and stderr (killed if it lingers). */
  private async quitError(): Promise<Error> {
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    const { code, signal } = await this.exited.finally(() => clearTimeout(timer));
    return this.failure ?? new VideoEncodingError(`ffmpeg quit while reading frames (${signal ?? `exit code ${code}`})${this.tail()}`);
  }

  /** Writes one frame (exactly width*height*4 bytes, not modified afterwards); waits while ffmpeg's pipe is full. */
  async write(frame: Buffer): Promise<void> {
    if (this.failure) throw this.failure;
    if (this.stdinBroken || this.child.stdin.destroyed) throw await this.quitError();
    if (frame.length !== this.frameBytes) throw new RangeError(`frame of ${frame.length} bytes, expected ${this.frameBytes}`);
    if (this.child.stdin.write(frame)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.child.stdin.off('drain', done);
        this.child.stdin.off('close', done);
        this.options.signal?.removeEventListener('abort', done);
        resolve();
      };
      this.child.stdin.once('drain', done);
      this.child.stdin.once('close', done);
      this.options.signal?.addEventListener('abort', done, { once: true });
    });
    if (this.failure) throw this.failure;
    if (this.stdinBroken || this.child.stdin.destroyed) throw await this.quitError();
  }

  /** Closes stdin and waits for ffmpeg to finish the file; throws with its stderr tail unless it exits 0. */
  async finish(): Promise<void> {
    if (this.failure) {
      this.kill();
      throw this.failure;
    }
    this.child.stdin.end();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), FINISH_TIMEOUT_MS);
    });
    const exit = await Promise.race([this.exited, timedOut]).finally(() => clearTimeout(timer));
    if (exit === 'timeout') {
      await this.kill();
      throw new VideoEncodingError(`ffmpeg did not finish the file within ${FINISH_TIMEOUT_MS / 1000} s after the last frame${this.tail()}`);
    }
    const { code, signal } = exit;
    this.options.signal?.removeEventListener('abort', this.onAbort);
    if (this.failure) throw this.failure;
    if (code !== 0) throw new VideoEncodingError(`ffmpeg exited with ${signal ?? `code ${code}`}${this.tail()}`);
  }

  /** Ends ffmpeg at once (abort, or the conversion failed); resolves once it is gone. */
  async kill(): Promise<void> {
    this.options.signal?.removeEventListener('abort', this.onAbort);
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    this.child.stdin.destroy();
    await this.exited;
  }
}
