import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '@ws/common';
import { ObjectStore, openStore, S3ObjectStore } from '@ws/storage';

/**
 * The object store of each recording's own storageUrl (STORAGE_URL when it started), opened once per url and
 * kept: a later change of STORAGE_URL does not strand older recordings. S3 clients are closed at shutdown.
 */
@Injectable()
export class RecordingStores implements OnModuleDestroy {
  private readonly stores = new Map<string, ObjectStore>();

  constructor(private readonly config: AppConfig) {}

  of(storageUrl: string): ObjectStore {
    let store = this.stores.get(storageUrl);
    if (!store) {
      store = openStore(storageUrl, this.config);
      this.stores.set(storageUrl, store);
    }
    return store;
  }

  onModuleDestroy(): void {
    for (const store of this.stores.values()) if (store instanceof S3ObjectStore) store.close();
    this.stores.clear();
  }
}

/** Key of a recording's converted video. */
export const recordingVideoKey = (workspaceId: string, recordingId: string) => `recordings/${workspaceId}/${recordingId}/video.webm`;

/** Every object under `prefix` (a capture's segments), listed and deleted one by one; answers how many. */
export async function deleteUnder(store: ObjectStore, prefix: string): Promise<number> {
  const keys: string[] = [];
  for await (const entry of store.list(prefix.endsWith('/') ? prefix : `${prefix}/`)) keys.push(entry.key);
  for (const key of keys) await store.delete(key);
  return keys.length;
}
