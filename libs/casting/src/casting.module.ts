import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { CastConfig } from './cast-config.entity';
import { CastingService } from './casting.service';

/** Casting configs (public launch links). */
@Module({
  imports: [TypeOrmModule.forFeature([CastConfig])],
  providers: [CastingService],
  exports: [CastingService],
})
export class CastingModule {}
