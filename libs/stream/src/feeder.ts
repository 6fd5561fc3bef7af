/**
 * Drives a protocol parser written as a generator over a byte stream that arrives in arbitrary chunks.
 * The generator yields what it needs next; the feeder resumes it once the bytes are there, so parser code
 * reads sequentially while fragmentation (down to 1-byte chunks) is handled here, in one place.
 */

export type Need =
  /** Resume with a Buffer (a copy) of exactly n bytes. */
  | { op: 'read'; n: number }
  /** Consume n bytes without emitting them (payloads the parser only sizes, or dropped messages). */
  | { op: 'skip'; n: number }
  /** Consume n bytes and emit them as they arrive (streamed, never buffered whole). */
  | { op: 'pass'; n: number }
  /** Resume once `until()` is true; re-checked on every push and poke(). */
  | { op: 'wait'; until: () => boolean }
  /** From now on every byte is emitted unchanged the moment it is pushed; parsing continues on the side. */
  | { op: 'passthrough' }
  /**
   * From now on every consumed byte (read, skip or pass) is emitted or not as the current forward mode says,
   * in runs as long as the arrived chunks allow: lets a parser cut whole messages out of a stream.
   */
  | { op: 'filter' }
  /** Filter mode: how the bytes consumed from here on are treated (see ForwardMode). */
  | { op: 'forward'; mode: ForwardMode };

/**
 * 'emit': forwarded; 'hold': kept back until the next mode says whether they go ('emit') or not ('drop'), so a
 * message can be judged on its first bytes; 'drop': consumed and never forwarded.
 */
export type ForwardMode = 'emit' | 'hold' | 'drop';

export type ParserGenerator = Generator<Need, void, Buffer | undefined>;

export function* read(n: number): Generator<Need, Buffer, Buffer | undefined> {
  const buf = yield { op: 'read', n };
  if (!buf) throw new Error('feeder resumed a read without data');
  return buf;
}

export function* skip(n: number): Generator<Need, void, Buffer | undefined> {
  yield { op: 'skip', n };
}

export function* pass(n: number): Generator<Need, void, Buffer | undefined> {
  yield { op: 'pass', n };
}

export function* waitUntil(until: () => boolean): Generator<Need, void, Buffer | undefined> {
  if (!until()) yield { op: 'wait', until };
}

export function* passthrough(): Generator<Need, void, Buffer | undefined> {
  yield { op: 'passthrough' };
}

export function* filter(): Generator<Need, void, Buffer | undefined> {
  yield { op: 'filter' };
}

export function* forward(mode: ForwardMode): Generator<Need, void, Buffer | undefined> {
  yield { op: 'forward', mode };
}

interface Queued {
  buf: Buffer;
  at: number;
}

export class StreamFeeder {
  private need: Need | undefined;
  private readonly queue: Queued[] = [];
  private queueHead = 0;
  private queueOffset = 0;
  private acc: Buffer[] = [];
  private accLen = 0;
  private remaining = 0;
  private passthroughAll = false;
  private filtering = false;
  private mode: ForwardMode = 'emit';
  /** Filter mode: the run of the current chunk consumed in 'emit' (and, after it, 'hold') mode, not yet emitted. */
  private runStart = -1;
  private runEnd = -1;
  /** Filter mode: held bytes from earlier chunks (copies: those chunks may be reused once sent). */
  private heldCopies: Buffer[] = [];
  private heldStart = -1;
  private running = false;
  private failure: Error | undefined;
  private finished = false;
  /** Incremented every time the parser is resumed (lets a caller detect progress). */
  progress = 0;
  /** Arrival time of the chunk that delivered the first byte of the last completed need. */
  firstByteAt = 0;
  /** Arrival time of the chunk that delivered the last byte of the last completed need. */
  lastByteAt = 0;

  constructor(
    private readonly gen: ParserGenerator,
    private readonly emit: (chunk: Buffer) => void,
    private readonly onError: (error: Error) => void,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.resume(undefined);
  }

  get failed(): Error | undefined {
    return this.failure;
  }

  get done(): boolean {
    return this.finished;
  }

  /** Bytes received but not yet consumed by the parser (waiting for a cross-direction condition). */
  get pending(): number {
    let total = -this.queueOffset;
    for (let i = this.queueHead; i < this.queue.length; i++) total += this.queue[i].buf.length;
    return total + this.accLen;
  }

  push(chunk: Buffer): void {
    if (this.failure) return;
    if (this.finished) {
      if (chunk.length > 0) this.fail(new Error(`unexpected ${chunk.length} bytes after the end of the stream`));
      return;
    }
    if (chunk.length === 0) return;
    if (this.passthroughAll) this.emit(chunk);
    this.queue.push({ buf: chunk, at: this.now() });
    this.pump();
  }

  /** Re-checks a pending wait (call after the other direction changed shared state). */
  poke(): void {
    if (!this.failure && !this.finished) this.pump();
  }

  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    this.need = undefined;
    this.onError(error);
  }

  private resume(value: Buffer | undefined): void {
    this.progress++;
    try {
      const result = this.gen.next(value);
      if (result.done) {
        this.finished = true;
        this.need = undefined;
      } else {
        this.need = result.value;
        if ((this.need.op === 'skip' || this.need.op === 'pass') && this.need.n > 0) this.remaining = this.need.n;
      }
    } catch (error) {
      this.fail(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private pump(): void {
    if (this.running) return; // re-entrant push from an emit callback: the outer loop picks it up
    this.running = true;
    try {
      for (;;) {
        const need = this.need;
        if (!need || this.failure) return;
        // Needs satisfiable without data.
        if (need.op === 'wait') {
          if (!need.until()) return;
          this.resume(undefined);
          continue;
        }
        if (need.op === 'filter') {
          this.filtering = true;
          this.mode = 'emit';
          this.resume(undefined);
          continue;
        }
        if (need.op === 'forward') {
          this.setMode(need.mode);
          this.resume(undefined);
          continue;
        }
        if (need.op === 'passthrough') {
          this.passthroughAll = true;
          for (let i = this.queueHead; i < this.queue.length; i++) {
            const start = i === this.queueHead ? this.queueOffset : 0;
            if (start < this.queue[i].buf.length) this.emit(this.queue[i].buf.subarray(start));
          }
          this.resume(undefined);
          continue;
        }
        if (need.n === 0) {
          this.resume(need.op === 'read' ? Buffer.alloc(0) : undefined);
          continue;
        }
        if (this.queueHead >= this.queue.length) {
          this.queue.length = 0;
          this.queueHead = 0;
          return;
        }
        const entry = this.queue[this.queueHead];
        const available = entry.buf.length - this.queueOffset;
        if (need.op === 'read') {
          const take = Math.min(need.n - this.accLen, available);
          if (this.accLen === 0) this.firstByteAt = entry.at;
          const piece = entry.buf.subarray(this.queueOffset, this.queueOffset + take);
          // A read that waits for the next chunk keeps a copy: the chunk's buffer may be reused once it was sent.
          this.acc.push(this.accLen + take < need.n ? Buffer.from(piece) : piece);
          this.accLen += take;
          if (this.filtering) this.consumed(take);
          this.advance(take);
          if (this.accLen === need.n) {
            const buf = Buffer.concat(this.acc, this.accLen);
            this.acc = [];
            this.accLen = 0;
            this.lastByteAt = entry.at;
            this.resume(buf);
          }
        } else {
          if (this.remaining === need.n) this.firstByteAt = entry.at;
          const take = Math.min(this.remaining, available);
          if (this.filtering) this.consumed(take);
          else if (need.op === 'pass' && !this.passthroughAll) this.emit(entry.buf.subarray(this.queueOffset, this.queueOffset + take));
          this.remaining -= take;
          this.advance(take);
          if (this.remaining === 0) {
            this.lastByteAt = entry.at;
            this.resume(undefined);
          }
        }
      }
    } finally {
      this.running = false;
    }
  }

  /** Filter mode: `n` bytes at the current position were consumed under the current mode. */
  private consumed(n: number): void {
    if (this.mode === 'drop') return;
    if (this.runStart < 0 || this.runEnd !== this.queueOffset) {
      this.flushRun();
      this.runStart = this.queueOffset;
    }
    if (this.mode === 'hold' && this.heldStart < 0) this.heldStart = this.queueOffset;
    this.runEnd = this.queueOffset + n;
  }

  /** Emits the pending run of the current chunk up to where holding started (held bytes wait for their verdict). */
  private flushRun(): void {
    if (this.runStart < 0) return;
    const buf = this.queue[this.queueHead].buf;
    const end = this.heldStart >= 0 ? this.heldStart : this.runEnd;
    if (end > this.runStart) this.emit(this.runStart === 0 && end === buf.length ? buf : buf.subarray(this.runStart, end));
    if (this.heldStart >= 0) {
      if (this.runEnd > this.heldStart) this.heldCopies.push(Buffer.from(buf.subarray(this.heldStart, this.runEnd)));
      this.heldStart = -1;
    }
    this.runStart = -1;
    this.runEnd = -1;
  }

  private setMode(mode: ForwardMode): void {
    if (mode === this.mode) return;
    if (this.mode === 'hold') {
      if (mode === 'emit') {
        // Held bytes of this chunk simply stay in the run; those of earlier chunks go first, as one copy.
        if (this.heldCopies.length) {
          const earlier = Buffer.concat(this.heldCopies);
          this.heldCopies = [];
          this.emit(earlier);
        }
        this.heldStart = -1;
      } else {
        this.heldCopies = [];
        if (this.heldStart >= 0) {
          // The run's held tail is cut off; what came before it still goes.
          this.runEnd = this.heldStart;
          this.heldStart = -1;
        }
      }
    }
    this.mode = mode;
  }

  private advance(n: number): void {
    this.queueOffset += n;
    if (this.queueOffset >= this.queue[this.queueHead].buf.length) {
      if (this.filtering) this.flushRun();
      this.queueHead++;
      this.queueOffset = 0;
      if (this.queueHead > 64 && this.queueHead * 2 > this.queue.length) {
        this.queue.splice(0, this.queueHead);
        this.queueHead = 0;
      }
    }
  }
}
