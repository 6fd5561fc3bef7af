import { Module } from '@nestjs/common';
import { AgentModule } from '@ws/agent';
import { WorkspacesModule } from '@ws/workspaces';
import { WorkspaceFiles } from './workspace-files.service';

@Module({
  imports: [WorkspacesModule, AgentModule],
  providers: [WorkspaceFiles],
  exports: [WorkspaceFiles],
})
export class FilesModule {}
