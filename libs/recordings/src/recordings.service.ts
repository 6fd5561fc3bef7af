import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository } from 'typeorm';
import { ApiError, AppConfig, ErrorCode, parseId, toWireId } from '@ws/common';
import { existingWorkspaceIds } from '@ws/workspaces';
import { RecordingResponse, toRecordingResponse } from './recording.mappers';
import { RecordingStores } from './recording-stores';
import { SessionRecording } from './session-recording.entity';

/**
 * get_session_recordings and get_sessions_recordings: the `ready` recordings of workspaces, oldest first. A
 * destroyed workspace's recordings stay listed (they are its history); a workspace that never existed is an
 * invalid id, as in every other operation.
 */
@Injectable()
export class RecordingsService {
  private readonly logger = new Logger(RecordingsService.name);

  constructor(
    @InjectRepository(SessionRecording) private readonly recordings: Repository<SessionRecording>,
    private readonly stores: RecordingStores,
    private readonly config: AppConfig,
  ) {}

  async ofWorkspace(targetWorkspaceId: string, withDownloadLinks: boolean): Promise<RecordingResponse[]> {
    const [workspaceId] = await this.existingWorkspaces('target_workspace_id', [targetWorkspaceId]);
    return (await this.listed([workspaceId], withDownloadLinks)).get(workspaceId) ?? [];
  }

  /** Keyed by each workspace's wire id (32 hex digits), whichever id form was sent. */
  async ofWorkspaces(targetWorkspaceIds: string[], withDownloadLinks: boolean): Promise<Record<string, { session_recordings: RecordingResponse[] }>> {
    const workspaceIds = await this.existingWorkspaces('target_workspace_ids', targetWorkspaceIds);
    const listed = await this.listed(workspaceIds, withDownloadLinks);
    return Object.fromEntries(workspaceIds.map((id) => [toWireId(id), { session_recordings: listed.get(id) ?? [] }]));
  }

  /** Parsed ids (duplicates dropped) of workspaces that exist in any state; 400 naming the first that does not. */
  private async existingWorkspaces(field: string, wireIds: string[]): Promise<string[]> {
    const ids: string[] = [];
    for (const wireId of wireIds) {
      const id = parseId(wireId);
      if (!id) throw ApiError.invalidId(field, wireId);
      if (!ids.includes(id)) ids.push(id);
    }
    if (ids.length === 0) return ids;
    const known = await existingWorkspaceIds(this.recordings.manager, ids);
    const unknown = wireIds.find((wireId) => !known.has(parseId(wireId) as string));
    if (unknown !== undefined) throw ApiError.invalidId(field, unknown);
    return ids;
  }

  private async listed(workspaceIds: string[], withDownloadLinks: boolean): Promise<Map<string, RecordingResponse[]>> {
    const byWorkspace = new Map<string, RecordingResponse[]>();
    if (workspaceIds.length === 0) return byWorkspace;
    const ready = await this.recordings.find({ where: { workspaceId: In(workspaceIds), status: 'ready' }, order: { startedAt: 'ASC', id: 'ASC' } });
    for (const recording of ready) {
      const link = withDownloadLinks ? await this.downloadLink(recording) : undefined;
      const list = byWorkspace.get(recording.workspaceId) ?? [];
      list.push(toRecordingResponse(recording, link));
      byWorkspace.set(recording.workspaceId, list);
    }
    return byWorkspace;
  }

  private async downloadLink(recording: SessionRecording): Promise<string> {
    try {
      return await this.stores.of(recording.storageUrl).signedDownloadUrl(recording.videoKey as string, this.config.RECORDING_LINK_TTL_SECONDS);
    } catch (err) {
      // file:// reads its signing key from the store; S3 signs locally. Either failing is the store's trouble, not the request's.
      this.logger.warn(`recording ${recording.id}: could not sign a download link: ${(err as Error).message}`);
      throw new ApiError(ErrorCode.Unavailable, 'Object storage is unavailable: the download link could not be made; retry later', {}, { retryAfterSeconds: 5 });
    }
  }
}
