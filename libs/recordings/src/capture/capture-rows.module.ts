import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { SessionRecording } from '../session-recording.entity';
import { CaptureRows } from './capture-rows';

/** The capture side's row changes, finalizeAbandoned among them (api and worker: the maintenance job calls it). */
@Module({
  imports: [TypeOrmModule.forFeature([SessionRecording])],
  providers: [CaptureRows],
  exports: [CaptureRows],
})
export class CaptureRowsModule {}
