import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Group, UserGroup } from './group.entity';
import { GroupsService } from './groups.service';

@Module({ imports: [TypeOrmModule.forFeature([Group, UserGroup])], providers: [GroupsService], exports: [GroupsService] })
export class GroupsModule {}
