import { Module } from '@nestjs/common';
import { StorageModule } from '@ws/storage';
import { WorkspacesModule } from '@ws/workspaces';
import { RecordingsModule } from '../recordings.module';
import { CaptureRowsModule } from './capture-rows.module';
import { RecordingCapture } from './recording-capture.service';

/**
 * The gateway's recording of stream connections (api only: it owns RECORDING_SPOOL_DIR and recovers it at
 * start, which a worker must not do).
 */
@Module({
  imports: [CaptureRowsModule, StorageModule, WorkspacesModule, RecordingsModule],
  providers: [RecordingCapture],
  exports: [RecordingCapture],
})
export class RecordingCaptureModule {}
