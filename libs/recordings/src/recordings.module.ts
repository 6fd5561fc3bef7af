import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { SessionRecording } from './session-recording.entity';

/** Session recordings: the gateway's capture (api) and conversion and listing (worker, api). */
@Module({
  imports: [TypeOrmModule.forFeature([SessionRecording])],
  providers: [],
  exports: [],
})
export class RecordingsModule {}
