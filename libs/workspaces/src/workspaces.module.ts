import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { UsersModule } from '@ws/users/users.module';
import { UserDeletion } from './user-deletion.service';
import { Workspace } from './workspace.entity';
import { WorkspaceTeardown } from './workspace-teardown.service';

@Module({
  imports: [TypeOrmModule.forFeature([Workspace]), UsersModule],
  providers: [WorkspaceTeardown, UserDeletion],
  exports: [WorkspaceTeardown, UserDeletion],
})
export class WorkspacesModule {}
