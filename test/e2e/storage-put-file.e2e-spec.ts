import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileObjectStore, ObjectStore, S3ObjectStore } from '@ws/storage';
import { S3Server, startS3Server } from './s3-server';

async function bytesOf(store: ObjectStore, key: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of await store.get(key)) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** ObjectStore.putFile: the store takes a local file (file:// renames it into place), hashed only when asked. */
describe('object storage: putFile on file:// and s3://', () => {
  let scratch: string;
  let s3: S3Server;
  const stores: Record<'file' | 's3', ObjectStore> = {} as Record<'file' | 's3', ObjectStore>;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'ws-put-file-e2e-'));
    s3 = await startS3Server(join(scratch, 's3'), 'ws-e2e');
    stores.file = new FileObjectStore(join(scratch, 'files'), { publicBaseUrl: 'http://127.0.0.1', signingSecret: 'test' });
    stores.s3 = new S3ObjectStore({ bucket: s3.bucket, prefix: 'put-file', region: 'us-east-1', endpoint: s3.endpoint, forcePathStyle: true, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, partSizeBytes: 5 * 1024 * 1024, queueSize: 2 });
    mkdirSync(join(scratch, 'local'));
  });

  afterAll(async () => {
    if (stores.s3 instanceof S3ObjectStore) stores.s3.close();
    await s3?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  function localFile(name: string, bytes: Buffer): string {
    const path = join(scratch, 'local', name);
    writeFileSync(path, bytes);
    return path;
  }

  describe.each(['file', 's3'] as const)('%s backend', (kind) => {
    const store = () => stores[kind];

    it('stores the file whole, takes it, and hashes it unless told not to', async () => {
      const bytes = randomBytes(6 * 1024 * 1024 + 17); // more than one S3 part
      const hashedPath = localFile(`${kind}-hashed`, bytes);
      const hashed = await store().putFile('segments/hashed.bin', hashedPath, { contentType: 'application/octet-stream' });
      expect(hashed).toEqual({ key: 'segments/hashed.bin', size: bytes.length, sha256: sha256(bytes) });
      expect(existsSync(hashedPath)).toBe(false);

      const plainPath = localFile(`${kind}-plain`, bytes);
      const plain = await store().putFile('segments/plain.bin', plainPath, { contentType: 'application/octet-stream', hash: false });
      expect(plain).toEqual({ key: 'segments/plain.bin', size: bytes.length });
      expect(existsSync(plainPath)).toBe(false);
      expect((await bytesOf(store(), 'segments/plain.bin')).equals(bytes)).toBe(true);
      const info = await store().head('segments/plain.bin');
      expect(info).toMatchObject({ size: bytes.length, contentType: 'application/octet-stream' });
      // file:// knows the SHA-256 of every object: computed on the first head of one put without it.
      if (kind === 'file') expect(info?.sha256).toBe(sha256(bytes));
    });

    it('replaces an object whole and leaves the file in place when it cannot be stored', async () => {
      await store().putFile('segments/replaced.bin', localFile(`${kind}-first`, Buffer.from('first version')), { hash: false });
      await store().putFile('segments/replaced.bin', localFile(`${kind}-second`, Buffer.from('second')), { hash: false });
      expect((await bytesOf(store(), 'segments/replaced.bin')).toString()).toBe('second');
      expect(await store().head('segments/replaced.bin')).toMatchObject({ size: 6 });

      const kept = localFile(`${kind}-refused`, Buffer.from('not stored'));
      await expect(store().putFile('../escape.bin', kept)).rejects.toThrow(/Invalid object key/);
      expect(readFileSync(kept, 'utf8')).toBe('not stored');
      await expect(store().putFile('segments/missing.bin', join(scratch, 'local', 'no-such-file'))).rejects.toThrow(/ENOENT/);
      expect(await store().head('segments/missing.bin')).toBeNull();
    });
  });

  it('file://: a head after a putFile without hash keeps the SHA-256 it computed in the sidecar', async () => {
    const store = stores.file as FileObjectStore;
    const bytes = Buffer.from('hash me later');
    await store.putFile('lazy/one.bin', localFile('lazy', bytes), { hash: false, metadata: { origin: 'spool' } });
    const sidecar = join(store.root, '.meta', 'lazy/one.bin.json');
    expect(JSON.parse(readFileSync(sidecar, 'utf8'))).not.toHaveProperty('sha256');
    expect(await store.head('lazy/one.bin')).toMatchObject({ sha256: sha256(bytes), etag: sha256(bytes), metadata: { origin: 'spool' } });
    expect(JSON.parse(readFileSync(sidecar, 'utf8'))).toMatchObject({ sha256: sha256(bytes), size: bytes.length });
    expect(statSync(store.pathOf('lazy/one.bin')).mode & 0o777).toBe(0o640);
    expect(readdirSync(join(store.root, '.tmp'))).toEqual([]);
  });
});
