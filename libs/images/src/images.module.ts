import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Image, ImageAttribute } from './image.entity';
import { ImagesService } from './images.service';
import { ServerImagesService } from './server-images.service';
import { ServerTargetRecord } from './server-target.entity';

@Module({ imports: [TypeOrmModule.forFeature([Image, ImageAttribute, ServerTargetRecord])], providers: [ImagesService, ServerImagesService], exports: [ImagesService, ServerImagesService] })
export class ImagesModule {}
