// What other libraries and the apps use of @ws/storage; everything else is internal to it.
export { FileObjectStore } from './file-store';
export { HashingStream, hashStream } from './hashing';
export { validateKey } from './keys';
export { InvalidKeyError, ObjectNotFoundError, VerificationError } from './object-store';
export type { ObjectStore } from './object-store';
export { openStore } from './open-store';
export type { StorageSettings } from './open-store';
export { S3ObjectStore } from './s3-store';
export { checkDownload } from './signing';
export { InjectObjectStore, StorageModule } from './storage.module';
export { putVerified } from './verified-put';
