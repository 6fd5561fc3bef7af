import { AbortMultipartUploadCommand, DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, paginateListObjectsV2, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { open, rm } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { HashingStream } from './hashing';
import { validateKey, validatePrefix } from './keys';
import { ByteRange, ObjectInfo, ObjectNotFoundError, ObjectStore, ObjectSummary, PutFileOptions, PutFileResult, PutOptions, PutResult } from './object-store';

export interface S3StoreOptions {
  bucket: string;
  /** Key prefix inside the bucket ("" or "a/b"); objects are stored as prefix/key. */
  prefix: string;
  region: string;
  /** Any S3-compatible endpoint (http(s)://host:port); unset: AWS's own for the region. */
  endpoint?: string;
  forcePathStyle: boolean;
  /** Both or neither; neither: the SDK's default chain (environment, shared files, instance role). */
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Multipart part size; at most queueSize parts are held in memory at once. */
  partSizeBytes: number;
  queueSize: number;
}

/** S3 or any S3-compatible store through the AWS SDK v3: multipart uploads, streamed reads, presigned GETs. */
export class S3ObjectStore implements ObjectStore {
  readonly kind = 's3' as const;
  readonly client: S3Client;

  constructor(private readonly options: S3StoreOptions) {
    this.client = new S3Client({
      region: options.region,
      endpoint: options.endpoint,
      forcePathStyle: options.forcePathStyle,
      credentials: options.accessKeyId && options.secretAccessKey ? { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey } : undefined,
      // Checksums only where S3 requires them: many S3-compatible stores refuse the SDK's default aws-chunked
      // CRC trailers; integrity is checked end to end by putVerified instead.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    // Bucket-level requests (ListObjectsV2) as `/bucket`, not `/bucket/`: S3 takes both, and some S3-compatible
    // stores (s3rver among them) verify the signature against the path without the trailing slash.
    this.client.middlewareStack.add(
      (next) => async (args) => {
        const request = args.request as { path?: string };
        if (options.forcePathStyle && request.path === `/${options.bucket}/`) request.path = `/${options.bucket}`;
        return next(args);
      },
      { step: 'build', name: 'bucketPathWithoutTrailingSlash' },
    );
  }

  get bucket(): string {
    return this.options.bucket;
  }

  private objectKey(key: string): string {
    validateKey(key);
    return this.options.prefix ? `${this.options.prefix}/${key}` : key;
  }

  put(key: string, body: Readable, options: PutOptions = {}): Promise<PutResult> {
    return this.upload(key, body, options, true);
  }

  /** Streams the file up (opened first: a stream left to open it would error before anyone listens), then removes it. */
  async putFile(key: string, path: string, options: PutFileOptions = {}): Promise<PutFileResult> {
    const hash = options.hash !== false;
    const file = await open(path, 'r');
    let put: PutResult;
    try {
      put = await this.upload(key, file.createReadStream({ autoClose: false, highWaterMark: 1024 * 1024 }), options, hash);
    } finally {
      await file.close();
    }
    await rm(path, { force: true });
    return { key, size: put.size, sha256: hash ? put.sha256 : undefined };
  }

  private async upload(key: string, body: Readable, options: PutOptions, hash: boolean): Promise<PutResult> {
    const hasher = new HashingStream(hash);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.options.bucket, Key: this.objectKey(key), Body: hasher, ContentType: options.contentType, Metadata: options.metadata },
      partSize: this.options.partSizeBytes,
      queueSize: this.options.queueSize,
      // Aborted below instead: lib-storage's own abort would replace the upload's error with the abort's.
      leavePartsOnError: true,
    });
    const feeding = pipeline(body, hasher);
    // A failed upload stops reading: destroy the pipe so the source is released instead of stalling on backpressure.
    // A failed source destroys the hasher, which fails the upload (aborted); the source's error is the one reported.
    const uploading = upload.done().catch(async (err: unknown) => {
      hasher.destroy(err instanceof Error ? err : new Error(String(err)));
      // No orphaned parts left billed in the bucket; a store that cannot abort keeps them (the error stays ours).
      if (upload.uploadId) await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.options.bucket, Key: this.objectKey(key), UploadId: upload.uploadId })).catch(() => undefined);
      throw err;
    });
    const [fed, uploaded] = await Promise.allSettled([feeding, uploading]);
    if (fed.status === 'rejected') throw fed.reason;
    if (uploaded.status === 'rejected') throw uploaded.reason;
    const etag = unquote(uploaded.value.ETag ?? '');
    return { key, size: hasher.byteCount, sha256: hasher.digest(), etag };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    try {
      const answer = await this.client.send(new GetObjectCommand({ Bucket: this.options.bucket, Key: this.objectKey(key), Range: range ? `bytes=${range.start}-${range.end}` : undefined }));
      return answer.Body as unknown as Readable;
    } catch (err) {
      if (isNotFound(err)) throw new ObjectNotFoundError(key);
      throw err;
    }
  }

  async head(key: string): Promise<ObjectInfo | null> {
    try {
      const answer = await this.client.send(new HeadObjectCommand({ Bucket: this.options.bucket, Key: this.objectKey(key) }));
      const metadata = answer.Metadata ?? {};
      return {
        key,
        size: answer.ContentLength ?? 0,
        etag: unquote(answer.ETag ?? ''),
        sha256: /^[0-9a-f]{64}$/.test(metadata.sha256 ?? '') ? metadata.sha256 : undefined,
        lastModified: answer.LastModified ?? new Date(0),
        contentType: answer.ContentType,
        metadata,
      };
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.options.bucket, Key: this.objectKey(key) }));
  }

  async *list(prefix: string): AsyncIterable<ObjectSummary> {
    validatePrefix(prefix);
    const base = this.options.prefix ? `${this.options.prefix}/` : '';
    for await (const page of paginateListObjectsV2({ client: this.client }, { Bucket: this.options.bucket, Prefix: base + prefix })) {
      for (const entry of page.Contents ?? []) {
        if (!entry.Key) continue;
        yield { key: entry.Key.slice(base.length), size: entry.Size ?? 0, lastModified: entry.LastModified ?? new Date(0) };
      }
    }
  }

  signedDownloadUrl(key: string, ttlSeconds: number): Promise<string> {
    return getSignedUrl(this.client, new GetObjectCommand({ Bucket: this.options.bucket, Key: this.objectKey(key) }), { expiresIn: Math.max(1, Math.floor(ttlSeconds)) });
  }

  close(): void {
    this.client.destroy();
  }
}

function unquote(etag: string): string {
  return etag.replace(/^"|"$/g, '');
}

function isNotFound(err: unknown): boolean {
  if (err instanceof S3ServiceException) return err.name === 'NoSuchKey' || err.name === 'NotFound' || err.$metadata?.httpStatusCode === 404;
  return false;
}
