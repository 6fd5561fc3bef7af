import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { ObjectStore, openStore, StorageSettings } from '@ws/storage';

/** Stores one closed spool file under `key`; answers the bytes stored. */
export type UploadSegment = (key: string, path: string) => Promise<{ size: number }>;

export const SEGMENT_CONTENT_TYPE = 'application/octet-stream';

/**
 * Stores a closed spool file, which the store takes (file:// renames it into place). Not hashed: a capture
 * segment's integrity is checked by the decoder's record framing, and the conversion verifies the video it makes;
 * hashing it again cost as much CPU as forwarding the stream.
 */
export async function putSpoolFile(store: ObjectStore, key: string, path: string): Promise<{ size: number }> {
  const put = await store.putFile(key, path, { contentType: SEGMENT_CONTENT_TYPE, hash: false });
  return { size: put.size };
}

/** Uploads on the calling thread (tests run the sources, where no compiled thread script exists). */
export function uploadInProcess(store: ObjectStore): UploadSegment {
  return (key, path) => putSpoolFile(store, key, path);
}

interface UploadRequest {
  id: number;
  key: string;
  path: string;
}

interface UploadReply {
  id: number;
  size?: number;
  error?: string;
}

const THREAD_SCRIPT = join(__dirname, 'upload-thread.js');

/**
 * Uploads in a worker thread of their own: streaming a segment to S3 (or copying it to a file store on another
 * filesystem) costs the event loop about as much per byte as forwarding the stream does, and the gateway's event
 * loop is the stream's. One thread per api serves every recording; a thread that dies is replaced at the next upload.
 */
export class ThreadedUploader {
  private worker: Worker | null = null;
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (value: { size: number }) => void; reject: (err: Error) => void }>();

  private constructor(
    private readonly url: string,
    private readonly settings: StorageSettings,
    private readonly script: string,
  ) {}

  /** The threaded uploader when the compiled thread script is there (a build), else null. Tests may name a built script. */
  static available(url: string, settings: StorageSettings, script = THREAD_SCRIPT): ThreadedUploader | null {
    return existsSync(script) ? new ThreadedUploader(url, settings, resolve(script)) : null;
  }

  readonly upload: UploadSegment = (key, path) =>
    new Promise((done, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve: done, reject });
      this.thread().postMessage({ id, key, path } satisfies UploadRequest);
    });

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.terminate();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const settings = Object.fromEntries(Object.entries(this.settings).filter(([, v]) => typeof v !== 'function'));
    const worker = new Worker(this.script, { workerData: { url: this.url, settings } });
    worker.unref();
    worker.on('message', (reply: UploadReply) => {
      const waiter = this.pending.get(reply.id);
      if (!waiter) return;
      this.pending.delete(reply.id);
      if (reply.error !== undefined) waiter.reject(new Error(reply.error));
      else waiter.resolve({ size: reply.size ?? 0 });
    });
    const failAll = (err: Error) => {
      if (this.worker === worker) this.worker = null;
      for (const [id, waiter] of this.pending) {
        this.pending.delete(id);
        waiter.reject(err);
      }
    };
    worker.on('error', failAll);
    worker.on('exit', (code) => failAll(new Error(`the upload thread exited (${code})`)));
    this.worker = worker;
    return worker;
  }
}

/** The thread's side (upload-thread.ts): answers each request with the stored size or the error. */
export function serveUploads(port: { on(event: 'message', listener: (request: UploadRequest) => void): void; postMessage(reply: UploadReply): void }, url: string, settings: StorageSettings): void {
  const upload = uploadInProcess(openStore(url, settings));
  port.on('message', (request) => {
    upload(request.key, request.path).then(
      (put) => port.postMessage({ id: request.id, size: put.size }),
      (err: Error) => port.postMessage({ id: request.id, error: err.message }),
    );
  });
}
