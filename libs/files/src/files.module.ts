import { Module } from '@nestjs/common';
import { WorkspacesModule } from '@ws/workspaces';
import { WorkspaceFiles } from './workspace-files.service';

@Module({
  imports: [WorkspacesModule],
  providers: [WorkspaceFiles],
  exports: [WorkspaceFiles],
})
export class FilesModule {}
