import { toWireId } from '@ws/common';
import type { SessionRecording } from './session-recording.entity';

/** The spec's Session recording object. */
export interface RecordingResponse {
  recording_id: string;
  account_id: string | null;
  session_recording_url: string;
  session_recording_metadata: { duration: number; thumbnail: string | null; timestamp: number };
  session_recording_download_url?: string;
}

/** Where the video lives in object storage: the recording's store url and the video's key. */
export function recordingLocation(recording: Pick<SessionRecording, 'storageUrl' | 'videoKey'>): string {
  return `${recording.storageUrl.replace(/\/+$/, '')}/${recording.videoKey ?? ''}`;
}

/** A `ready` recording on the wire; `downloadUrl` only when a pre-authorized link was asked for. */
export function toRecordingResponse(recording: SessionRecording, downloadUrl?: string): RecordingResponse {
  return {
    recording_id: toWireId(recording.id),
    account_id: toWireId(recording.userId),
    session_recording_url: recordingLocation(recording),
    session_recording_metadata: {
      duration: recording.durationSeconds ?? 0,
      thumbnail: recording.thumbnail,
      timestamp: Math.floor(recording.startedAt.getTime() / 1000),
    },
    ...(downloadUrl !== undefined ? { session_recording_download_url: downloadUrl } : {}),
  };
}
