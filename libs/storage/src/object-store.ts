import type { Readable } from 'node:stream';

/** What a completed write stored: counted and hashed while the bytes streamed through. */
export interface PutResult {
  key: string;
  size: number;
  /** Hex SHA-256 of the bytes sent, computed while streaming. */
  sha256: string;
  /** The store's entity tag (S3: its ETag without quotes; file: the SHA-256). */
  etag: string;
}

export interface ObjectInfo {
  key: string;
  size: number;
  etag: string;
  /** Hex SHA-256 when the store knows it without reading the object (file: always; S3: when put with it in metadata). */
  sha256?: string;
  lastModified: Date;
  contentType?: string;
  metadata: Record<string, string>;
}

export interface ObjectSummary {
  key: string;
  size: number;
  lastModified: Date;
}

export interface PutOptions {
  contentType?: string;
  /** Small user metadata (keys of [a-z0-9-], ASCII values): S3 stores it as x-amz-meta-*. */
  metadata?: Record<string, string>;
}

export interface PutFileOptions extends PutOptions {
  /**
   * False: the store does not read the bytes to hash them (the result has no sha256; file:// computes it the first
   * time head asks). For files whose integrity is checked elsewhere, e.g. by their own framing. Default true.
   */
  hash?: boolean;
}

/** What putFile stored; sha256 only when hashed. */
export interface PutFileResult {
  key: string;
  size: number;
  sha256?: string;
}

/** Inclusive byte range, as HTTP Range has it. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * Object storage for profiles and recordings. Keys are relative paths of safe segments (see validateKey); bodies are
 * streams both ways, never whole objects in memory. A put is all-or-nothing: readers see the previous object or the
 * complete new one, never a partial write.
 */
export interface ObjectStore {
  readonly kind: 'file' | 's3';
  put(key: string, body: Readable, options?: PutOptions): Promise<PutResult>;
  /**
   * Stores a local file's bytes under `key` and takes the file: once this resolves it is no longer at `path`
   * (file:// renames it into place when both are on one filesystem, else copies it; s3:// streams it up). On
   * failure the file stays where it was. All-or-nothing like put.
   */
  putFile(key: string, path: string, options?: PutFileOptions): Promise<PutFileResult>;
  /** The object's bytes (or the range); ObjectNotFoundError when there is none. */
  get(key: string, range?: ByteRange): Promise<Readable>;
  /** Null when there is no such object. */
  head(key: string): Promise<ObjectInfo | null>;
  /** Removes the object; removing one that is not there is not an error. */
  delete(key: string): Promise<void>;
  /** Objects whose key starts with `prefix`, in no promised order, fetched page by page. */
  list(prefix: string): AsyncIterable<ObjectSummary>;
  /** A url that downloads the object without other credentials until `ttlSeconds` from now, then is refused. */
  signedDownloadUrl(key: string, ttlSeconds: number): Promise<string>;
}

export class StorageError extends Error {}
export class InvalidKeyError extends StorageError {}
export class ObjectNotFoundError extends StorageError {
  constructor(readonly key: string) {
    super(`No object ${key}`);
  }
}
/** A write whose stored size or checksum differs from what was sent; the new object has been deleted. */
export class VerificationError extends StorageError {}
