import { AppConfig } from '@ws/common';
import { FileObjectStore } from './file-store';
import { ObjectStore, StorageError } from './object-store';
import { S3ObjectStore } from './s3-store';

/** The settings openStore reads (a subset of AppConfig, so tests and tools can open a store without the rest). */
export type StorageSettings = Pick<
  AppConfig,
  'STORAGE_URL' | 'PUBLIC_BASE_URL' | 'STORAGE_SIGNING_SECRET' | 'S3_ENDPOINT' | 'S3_REGION' | 'S3_FORCE_PATH_STYLE' | 'S3_ACCESS_KEY_ID' | 'S3_SECRET_ACCESS_KEY' | 'S3_PART_SIZE_MB'
>;

/**
 * The store a url names: file://<path> (relative paths from the working directory, file:///abs absolute) or
 * s3://<bucket>[/<prefix>]. Profiles may name their own url (an image's persistent_profile_path); the S3_*
 * settings apply to every s3:// url.
 */
export function openStore(url: string, settings: StorageSettings): ObjectStore {
  if (url.startsWith('file://')) {
    const root = url.slice('file://'.length);
    if (!root) throw new StorageError(`Invalid storage url ${url}: no path`);
    return new FileObjectStore(root, { publicBaseUrl: settings.PUBLIC_BASE_URL, signingSecret: settings.STORAGE_SIGNING_SECRET || undefined });
  }
  const s3 = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*?))?\/?$/.exec(url);
  if (s3) {
    return new S3ObjectStore({
      bucket: s3[1],
      prefix: s3[2] ?? '',
      region: settings.S3_REGION,
      endpoint: settings.S3_ENDPOINT || undefined,
      forcePathStyle: settings.S3_FORCE_PATH_STYLE,
      accessKeyId: settings.S3_ACCESS_KEY_ID || undefined,
      secretAccessKey: settings.S3_SECRET_ACCESS_KEY || undefined,
      partSizeBytes: settings.S3_PART_SIZE_MB * 1024 * 1024,
      queueSize: 2,
    });
  }
  throw new StorageError(`Invalid storage url ${url}: must be file://<path> or s3://<bucket>[/<prefix>]`);
}
