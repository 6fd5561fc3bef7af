import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Readable } from 'node:stream';
import { AppConfig } from '@ws/common';
import { FileObjectStore, hashStream, InvalidKeyError, ObjectNotFoundError, ObjectStore, openStore, putVerified, S3ObjectStore, VerificationError } from '@ws/storage';
import { TestApi, waitFor } from './harness';
import { S3Server, startS3Server } from './s3-server';

const MiB = 1024 * 1024;

/**
 * A full collection on demand: the test's own random chunks are garbage the moment they are sent, and V8 may let
 * up to 64 MiB of such buffers wait for a collection, which would hide what the store itself holds.
 */
setFlagsFromString('--expose-gc');
// Buffers' memory is freed by the collection itself, not by a background sweep that a reading right after it would
// race (with a sample every 16 MiB, up to 16 MiB of freed buffers were still counted).
setFlagsFromString('--no-concurrent-array-buffer-sweeping');
const collectGarbage = runInNewContext('gc') as () => void;

/**
 * How often the large-object test samples what the store holds: a full collection, then a reading. Each collection
 * walks this process's whole heap (the api is loaded in it), ~0.1 s: every 4 MiB that was half the suite's CPU (13 s
 * of 28). Every 16 MiB still samples each direction 8 times, where holding the object would show 100 MiB or more.
 */
const SAMPLE_EVERY = 16 * MiB;

/** Counts streamed bytes: a full collection after every SAMPLE_EVERY bytes, then `afterCollection` (a memory sample). */
function collectPeriodically(afterCollection?: () => void): (bytes: number) => void {
  let sinceCollection = 0;
  return (bytes) => {
    sinceCollection += bytes;
    if (sinceCollection < SAMPLE_EVERY) return;
    sinceCollection = 0;
    collectGarbage();
    afterCollection?.();
  };
}

/** A stream of `chunks` random MiB, generated as read (never held whole); `sha256` is ready once it has ended. */
function generated(chunks: number, afterCollection?: () => void): { body: Readable; size: number; sha256: () => string } {
  const hash = createHash('sha256');
  const streamed = collectPeriodically(afterCollection);
  let digest = '';
  async function* produce() {
    for (let i = 0; i < chunks; i++) {
      const chunk = randomBytes(MiB);
      hash.update(chunk);
      streamed(chunk.length);
      yield chunk;
    }
    digest = hash.digest('hex');
  }
  return { body: Readable.from(produce(), { objectMode: false }), size: chunks * MiB, sha256: () => digest };
}

/** `body` as it is read, with a full collection every SAMPLE_EVERY bytes (as `generated` does while sending). */
function collectingWhileRead(body: Readable, afterCollection: () => void): Readable {
  const streamed = collectPeriodically(afterCollection);
  async function* pass() {
    for await (const chunk of body) {
      streamed((chunk as Buffer).length);
      yield chunk as Buffer;
    }
  }
  return Readable.from(pass(), { objectMode: false });
}

/** A stream that sends `good` bytes and then fails, as a dying tar or a cut connection would. */
function failingAfter(good: Buffer): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (!sent) {
        sent = true;
        this.push(good);
      } else {
        this.destroy(new Error('source failed midway'));
      }
    },
  });
}

async function text(body: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of body) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

async function keys(store: ObjectStore, prefix: string): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of store.list(prefix)) found.push(entry.key);
  return found.sort();
}

describe('object storage: one contract, file:// and s3:// backends', () => {
  let api: TestApi;
  let base: string;
  let s3: S3Server;
  let scratch: string;
  let fileRoot: string;
  const stores: Record<'file' | 's3', ObjectStore> = {} as Record<'file' | 's3', ObjectStore>;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'ws-storage-e2e-'));
    fileRoot = join(scratch, 'files');
    s3 = await startS3Server(join(scratch, 's3'), 'ws-e2e');
    api = await TestApi.start({ STORAGE_URL: `file://${fileRoot}` });
    base = await api.listen();
    // The links must name the port the api listens on, known only now; the store reads the same root and
    // therefore the same .signing-key as the api's store, as a worker on the same host would.
    const settings: AppConfig = { ...api.config, PUBLIC_BASE_URL: base, ...s3.settings, S3_PART_SIZE_MB: 5 };
    stores.file = openStore(`file://${fileRoot}`, settings);
    stores.s3 = openStore(`s3://${s3.bucket}/deployment-a`, settings);
  });

  afterAll(async () => {
    if (stores.s3 instanceof S3ObjectStore) stores.s3.close();
    await api?.close();
    await s3?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  describe.each(['file', 's3'] as const)('%s backend', (kind) => {
    const store = () => stores[kind];

    it('puts from a stream and gets, heads, ranges and deletes the same bytes', async () => {
      const put = await store().put('contract/hello.txt', Readable.from([Buffer.from('hello '), Buffer.from('object storage')]), { contentType: 'text/plain', metadata: { owner: 'u1' } });
      expect(put.size).toBe(20);
      expect(put.sha256).toBe(createHash('sha256').update('hello object storage').digest('hex'));
      expect(await text(await store().get('contract/hello.txt'))).toBe('hello object storage');
      expect(await text(await store().get('contract/hello.txt', { start: 6, end: 11 }))).toBe('object');

      const info = await store().head('contract/hello.txt');
      expect(info).toMatchObject({ key: 'contract/hello.txt', size: 20, etag: put.etag, contentType: 'text/plain', metadata: { owner: 'u1' } });
      expect(info?.etag).toMatch(/^[0-9a-f]{32,64}(-\d+)?$/);

      await store().delete('contract/hello.txt');
      expect(await store().head('contract/hello.txt')).toBeNull();
      await expect(store().get('contract/hello.txt')).rejects.toBeInstanceOf(ObjectNotFoundError);
      await store().delete('contract/hello.txt'); // deleting what is gone is not an error
    });

    it('replaces an object whole, and keeps the previous one when the new write fails midway', async () => {
      await store().put('contract/replace.txt', Readable.from([Buffer.from('first version')]));
      await store().put('contract/replace.txt', Readable.from([Buffer.from('second version')]));
      expect(await text(await store().get('contract/replace.txt'))).toBe('second version');

      await expect(store().put('contract/replace.txt', failingAfter(Buffer.from('third, never complete')))).rejects.toThrow('source failed midway');
      expect(await text(await store().get('contract/replace.txt'))).toBe('second version');
      expect((await store().head('contract/replace.txt'))?.size).toBe('second version'.length);
      if (store() instanceof FileObjectStore) expect(readdirSync(join(fileRoot, '.tmp'))).toEqual([]);
    });

    it('lists by prefix, page by page, and nothing outside it', async () => {
      for (const key of ['list/a/1', 'list/a/2', 'list/ab/3', 'list/b/4']) await store().put(key, Readable.from([Buffer.from(key)]));
      expect(await keys(store(), 'list/a/')).toEqual(['list/a/1', 'list/a/2']);
      expect(await keys(store(), 'list/a')).toEqual(['list/a/1', 'list/a/2', 'list/ab/3']);
      expect(await keys(store(), 'list/')).toEqual(['list/a/1', 'list/a/2', 'list/ab/3', 'list/b/4']);
      expect(await keys(store(), 'list/none/')).toEqual([]);
      const sizes = [];
      for await (const entry of store().list('list/b/')) sizes.push(entry.size);
      expect(sizes).toEqual(['list/b/4'.length]);
    });

    it('refuses keys that could escape the store or name its internals', async () => {
      for (const key of ['../outside', 'a/../../outside', '/etc/passwd', 'a//b', '.meta/x', 'a/.tmp', '', 'a\\b', 'sp ace']) {
        await expect(store().put(key, Readable.from([Buffer.from('x')]))).rejects.toBeInstanceOf(InvalidKeyError);
        await expect(store().head(key)).rejects.toBeInstanceOf(InvalidKeyError);
        await expect(store().get(key)).rejects.toBeInstanceOf(InvalidKeyError);
      }
      await expect(keys(store(), '../')).rejects.toBeInstanceOf(InvalidKeyError);
    });

    it('putVerified keeps a verified write and deletes one that does not match what was expected', async () => {
      const verified = await putVerified(store(), 'verify/good', Readable.from([Buffer.from('profile bytes')]), { size: 13 });
      expect(verified.sha256).toBe(createHash('sha256').update('profile bytes').digest('hex'));
      expect(await text(await store().get('verify/good'))).toBe('profile bytes');

      const wrong = createHash('sha256').update('something else').digest('hex');
      await expect(putVerified(store(), 'verify/bad', Readable.from([Buffer.from('profile bytes')]), { sha256: wrong })).rejects.toBeInstanceOf(VerificationError);
      expect(await store().head('verify/bad')).toBeNull();
      await expect(putVerified(store(), 'verify/short', Readable.from([Buffer.from('cut')]), { size: 13 })).rejects.toBeInstanceOf(VerificationError);
      expect(await store().head('verify/short')).toBeNull();
    });

    it('streams a 128 MiB object through (multipart on S3) with memory growth well below its size', async () => {
      await store().put('large/warm-up', Readable.from([randomBytes(MiB)])); // loads the code paths before measuring
      // What the store holds: the bytes of every live Buffer (memory outside the heap), read right after a full
      // collection, every SAMPLE_EVERY bytes streamed each way. Not a peak of RSS: garbage V8 lets wait for a
      // collection (up to 64 MiB of external memory) and what glibc keeps after a free swung that from 33 to 59 MiB
      // for one upload.
      const held = () => process.memoryUsage().external;
      collectGarbage();
      const before = held();
      let peak = before;
      const sample = () => (peak = Math.max(peak, held()));
      const source = generated(128, sample);
      const put = await putVerified(store(), 'large/128mib', source.body);
      expect(put.size).toBe(source.size);
      expect(put.sha256).toBe(source.sha256());
      const read = await hashStream(collectingWhileRead(await store().get('large/128mib'), sample));
      expect(read).toEqual({ size: source.size, sha256: source.sha256() });
      console.warn(`storage: ${kind} backend held at most ${((peak - before) / MiB).toFixed(1)} MiB more while streaming 128 MiB`);
      // Holding the object (or any large share of it) would add 128 MiB or more.
      expect(peak - before).toBeLessThan(48 * MiB);
      expect((await store().head('large/128mib'))?.size).toBe(128 * MiB);
      await store().delete('large/128mib');
    });

    it('signed download links: valid serves the bytes, tampered and expired are refused', async () => {
      await store().put('links/report.bin', Readable.from([Buffer.from('signed bytes')]), { contentType: 'application/octet-stream' });
      const link = await store().signedDownloadUrl('links/report.bin', 600);
      expect(new URL(link).hostname).toBe('127.0.0.1');
      const valid = await fetch(link);
      expect(valid.status).toBe(200);
      expect(Buffer.from(await valid.arrayBuffer()).toString()).toBe('signed bytes');

      const url = new URL(link);
      const signatureParam = kind === 's3' ? 'X-Amz-Signature' : 'signature';
      const signature = url.searchParams.get(signatureParam) as string;
      url.searchParams.set(signatureParam, (signature[0] === '0' ? '1' : '0') + signature.slice(1));
      expect((await fetch(url)).status).toBe(403);
      const otherKey = new URL(link);
      otherKey.pathname = otherKey.pathname.replace('report.bin', 'other.bin');
      await store().put('links/other.bin', Readable.from([Buffer.from('not yours')]));
      expect((await fetch(otherKey)).status).toBe(403);
      const longer = new URL(link);
      if (kind === 's3') longer.searchParams.set('X-Amz-Expires', '604800');
      else longer.searchParams.set('expires', String(Number(longer.searchParams.get('expires')) + 3600));
      expect((await fetch(longer)).status).toBe(403);

      const shortLived = await store().signedDownloadUrl('links/report.bin', 1);
      await waitFor('the 1 s link to be refused', async () => ((await fetch(shortLived)).status === 403 ? true : undefined), 30_000, 250);
      expect((await fetch(shortLived)).status).toBe(403);
    });
  });

  describe('file:// download route', () => {
    it('answers refusals as JSON and serves byte ranges with their length', async () => {
      await stores.file.put('route/range.txt', Readable.from([Buffer.from('0123456789')]), { contentType: 'text/plain' });
      const link = await stores.file.signedDownloadUrl('route/range.txt', 600);

      const ranged = await fetch(link, { headers: { range: 'bytes=2-5' } });
      expect(ranged.status).toBe(206);
      expect(ranged.headers.get('content-range')).toBe('bytes 2-5/10');
      expect(ranged.headers.get('content-length')).toBe('4');
      expect(await ranged.text()).toBe('2345');
      const whole = await fetch(link);
      expect(whole.headers.get('content-length')).toBe('10');
      expect(whole.headers.get('content-type')).toBe('text/plain');

      const unsigned = await fetch(`${base}/api/storage/route/range.txt`);
      expect(unsigned.status).toBe(403);
      expect(await unsigned.json()).toEqual({ error_message: expect.stringMatching(/not valid/) });
      const traversal = await fetch(`${base}/api/storage/route/..%2F..%2Fetc%2Fpasswd?expires=9999999999&signature=${'0'.repeat(64)}`);
      expect(traversal.status).toBe(403);
      expect(await traversal.json()).toEqual({ error_message: expect.any(String) });

      const expired = await stores.file.signedDownloadUrl('route/range.txt', 1);
      const refused = await waitFor('the link to expire', async () => {
        const answer = await fetch(expired);
        return answer.status === 403 ? answer : undefined;
      }, 30_000, 250);
      expect(await refused.json()).toEqual({ error_message: 'This download link has expired' });
    });
  });
});
