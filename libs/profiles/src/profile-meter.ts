import { Transform, TransformCallback } from 'node:stream';

const MIB = 1024 * 1024;

/** A profile archive that grew past PROFILE_MAX_MB while it streamed. */
export class ProfileTooLargeError extends Error {
  constructor(readonly bytes: number, readonly maxBytes: number) {
    super(`The persistent profile exceeds ${Math.round(maxBytes / MIB)} MiB`);
  }
}

export interface MeterOptions {
  /** Fails the stream with ProfileTooLargeError once more than this many bytes passed. */
  maxBytes?: number;
  /** Bandwidth cap (0 or absent: none). */
  bytesPerSecond?: number;
  /** Called with the bytes so far, at most once per `progressEveryMs` (and not awaited). */
  onProgress?: (bytes: number) => void;
  progressEveryMs?: number;
}

/**
 * A pass-through that counts the bytes of a profile archive, refuses more than `maxBytes`, holds the rate at
 * `bytesPerSecond` on average (by delaying each chunk until its due time) and reports progress now and then.
 */
export class ProfileMeter extends Transform {
  bytes = 0;
  exceeded = false;
  private readonly started = Date.now();
  private lastProgress = 0;

  constructor(private readonly options: MeterOptions = {}) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    const { maxBytes, bytesPerSecond, onProgress, progressEveryMs = 1000 } = this.options;
    if (maxBytes !== undefined && this.bytes > maxBytes) {
      this.exceeded = true;
      callback(new ProfileTooLargeError(this.bytes, maxBytes));
      return;
    }
    this.push(chunk);
    const now = Date.now();
    if (onProgress && now - this.lastProgress >= progressEveryMs) {
      this.lastProgress = now;
      onProgress(this.bytes);
    }
    const wait = bytesPerSecond ? this.started + (this.bytes / bytesPerSecond) * 1000 - now : 0;
    if (wait > 0) setTimeout(callback, Math.min(wait, 60_000));
    else callback();
  }
}

export const mib = (bytes: number): number => Math.round((bytes / MIB) * 10) / 10;
