import { Module } from '@nestjs/common';
import { StorageModule } from '@ws/storage';
import { StorageDownloadController } from './storage-download.controller';

/** The api's side of object storage: signed file:// download links. */
@Module({ imports: [StorageModule], controllers: [StorageDownloadController] })
export class StorageApiModule {}
