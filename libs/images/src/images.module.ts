import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Image, ImageAttribute } from './image.entity';
import { ImagesService } from './images.service';

@Module({ imports: [TypeOrmModule.forFeature([Image, ImageAttribute])], providers: [ImagesService], exports: [ImagesService] })
export class ImagesModule {}
