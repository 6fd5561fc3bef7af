/**
 * The StreamFeeder for code that awaits its bytes (the RFB client, the gateway's handshakes): parsers run one
 * after another over one byte stream, each awaited with a deadline. Bytes are reassembled by the feeder, as in
 * the proxy; this only turns "the parser finished" into a resolved promise.
 */
import { RfbError } from './errors';
import { Need, ParserGenerator, StreamFeeder, waitUntil } from './feeder';

interface Job {
  parser: Generator<Need, unknown, Buffer | undefined>;
  resolve(result: unknown): void;
  reject(error: Error): void;
}

export class ParserRunner {
  private readonly feeder: StreamFeeder;
  private job: Job | undefined;
  private ended: Error | undefined;
  /** Set when a parser was abandoned mid-message: the stream position is unknown, so no later parser may run. */
  private abandoned: Error | undefined;
  private wakeDataWaiter: (() => void) | undefined;

  constructor() {
    this.feeder = new StreamFeeder(this.jobs(), () => undefined, (error) => this.finishJob(error));
  }

  /** Bytes received, in order. */
  push(chunk: Buffer): void {
    if (this.abandoned) return;
    this.feeder.push(chunk);
    this.wakeDataWaiter?.();
  }

  /** The source ended or failed: a parser waiting for bytes fails with `error`, and so does every later one. */
  end(error: Error): void {
    this.ended ??= error;
    if (this.job) this.abandon(this.ended);
    this.wakeDataWaiter?.();
  }

  /** Bytes received and not yet read by a parser. */
  get pending(): number {
    return this.feeder.pending;
  }

  /**
   * Runs `parser` over the bytes received and to come; resolves with its result, or rejects with what it threw,
   * with the source's end, or with RfbError('timeout') at `deadline` (ms epoch), naming `what` was awaited.
   */
  run<T>(parser: Generator<Need, T, Buffer | undefined>, deadline: number, what: string): Promise<T> {
    const unusable = this.abandoned ?? this.feeder.failed;
    if (unusable) return Promise.reject(unusable);
    if (this.job) return Promise.reject(new Error('ParserRunner: another parser is running'));
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => this.abandon(new RfbError('timeout', `timed out waiting for ${what}`)), Math.max(0, deadline - Date.now()));
      const settled = () => clearTimeout(timer);
      this.job = {
        parser,
        resolve: (result) => {
          settled();
          resolve(result as T);
        },
        reject: (error) => {
          settled();
          reject(error);
        },
      };
      this.feeder.poke();
      if (this.job && this.ended) this.abandon(this.ended);
    });
  }

  /** True once a byte is waiting to be read, false if none arrived before `until` (ms epoch). */
  async waitForData(until: number): Promise<boolean> {
    for (;;) {
      if (this.feeder.pending > 0) return true;
      if (this.ended) throw this.ended;
      const left = until - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wakeDataWaiter = () => {
          clearTimeout(timer);
          this.wakeDataWaiter = undefined;
          resolve();
        };
      });
    }
  }

  private *jobs(): ParserGenerator {
    for (;;) {
      yield* waitUntil(() => this.job !== undefined);
      const result = yield* (this.job as Job).parser;
      this.finishJob(undefined, result);
    }
  }

  private finishJob(error: Error | undefined, result?: unknown): void {
    const job = this.job;
    this.job = undefined;
    if (error) job?.reject(error);
    else job?.resolve(result);
  }

  private abandon(error: Error): void {
    this.abandoned ??= error;
    this.finishJob(error);
  }
}
