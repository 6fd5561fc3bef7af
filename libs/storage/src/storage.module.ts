import { Inject, Injectable, Module, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '@ws/common';
import { ObjectStore } from './object-store';
import { openStore } from './open-store';
import { S3ObjectStore } from './s3-store';

/** Injection token of the deployment's store (STORAGE_URL). */
export const OBJECT_STORE = Symbol('OBJECT_STORE');
export const InjectObjectStore = () => Inject(OBJECT_STORE);

/** Closes the S3 client's sockets when the application stops. */
@Injectable()
class StoreCloser implements OnModuleDestroy {
  constructor(@InjectObjectStore() private readonly store: ObjectStore) {}

  onModuleDestroy(): void {
    if (this.store instanceof S3ObjectStore) this.store.close();
  }
}

@Module({
  providers: [{ provide: OBJECT_STORE, useFactory: (config: AppConfig) => openStore(config.STORAGE_URL, config), inject: [AppConfig] }, StoreCloser],
  exports: [OBJECT_STORE],
})
export class StorageModule {}
