import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { RecordingRetention } from './recording-retention.service';
import { RecordingStores } from './recording-stores';
import { RecordingsService } from './recordings.service';
import { SessionRecording } from './session-recording.entity';

/** Session recordings: the gateway's capture (api) and conversion and listing (worker, api). */
@Module({
  imports: [TypeOrmModule.forFeature([SessionRecording])],
  providers: [RecordingStores, RecordingsService, RecordingRetention],
  exports: [RecordingStores, RecordingsService, RecordingRetention],
})
export class RecordingsModule {}
