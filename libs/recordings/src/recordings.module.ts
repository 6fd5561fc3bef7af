import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { CaptureRowsModule } from './capture/capture-rows.module';
import { RecordingConversion } from './recording-conversion.service';
import { RecordingRetention } from './recording-retention.service';
import { RecordingStores } from './recording-stores';
import { RecordingsService } from './recordings.service';
import { SessionRecording } from './session-recording.entity';

/** Session recordings: the gateway's capture (api) and conversion and listing (worker, api). */
@Module({
  imports: [TypeOrmModule.forFeature([SessionRecording]), CaptureRowsModule],
  providers: [RecordingStores, RecordingsService, RecordingRetention, RecordingConversion],
  exports: [RecordingStores, RecordingsService, RecordingRetention, RecordingConversion],
})
export class RecordingsModule {}
