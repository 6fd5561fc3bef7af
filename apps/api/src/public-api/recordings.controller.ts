import { Body, Controller } from '@nestjs/common';
import { Operation } from '@ws/auth';
import { GetSessionRecordingsRequest, GetSessionsRecordingsRequest, RecordingsService } from '@ws/recordings';

@Controller('api/public')
export class RecordingsController {
  constructor(private readonly recordings: RecordingsService) {}

  @Operation('get_session_recordings')
  async ofWorkspace(@Body() body: GetSessionRecordingsRequest) {
    return { session_recordings: await this.recordings.ofWorkspace(body.target_workspace_id, body.preauth_download_link ?? false) };
  }

  @Operation('get_sessions_recordings')
  async ofWorkspaces(@Body() body: GetSessionsRecordingsRequest) {
    return { workspace_sessions: await this.recordings.ofWorkspaces(body.target_workspace_ids, body.preauth_download_link ?? false) };
  }
}
