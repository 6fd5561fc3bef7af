import { recordingLocation, toRecordingResponse } from './recording.mappers';
import { SessionRecording } from './session-recording.entity';

const recording = (over: Partial<SessionRecording> = {}): SessionRecording =>
  ({
    id: '0b6f7c3e-1d2a-4e5f-8a9b-0c1d2e3f4a5b', workspaceId: 'c0ffee00-0000-4000-8000-000000000001', userId: '5e1f0000-0000-4000-8000-0000000000aa', status: 'ready',
    storageUrl: 's3://bucket/prefix', videoKey: 'recordings/w/r/video.webm', durationSeconds: 42, thumbnail: 'data:image/jpeg;base64,/9j/',
    startedAt: new Date('2026-05-01T12:00:00.999Z'), ...over,
  }) as SessionRecording;

describe('recording wire mapping', () => {
  it('answers the spec fields: wire ids, the storage location, whole seconds', () => {
    expect(toRecordingResponse(recording())).toEqual({
      recording_id: '0b6f7c3e1d2a4e5f8a9b0c1d2e3f4a5b',
      account_id: '5e1f00000000400080000000000000aa',
      session_recording_url: 's3://bucket/prefix/recordings/w/r/video.webm',
      session_recording_metadata: { duration: 42, thumbnail: 'data:image/jpeg;base64,/9j/', timestamp: Date.UTC(2026, 4, 1, 12) / 1000 },
    });
  });

  it('adds the download url only when one was made', () => {
    expect(toRecordingResponse(recording(), 'https://x/y').session_recording_download_url).toBe('https://x/y');
    expect('session_recording_download_url' in toRecordingResponse(recording())).toBe(false);
  });

  it('joins a store url with a trailing slash and a key without doubling it', () => {
    expect(recordingLocation({ storageUrl: 'file:///data/storage/', videoKey: 'recordings/a/b/video.webm' })).toBe('file:///data/storage/recordings/a/b/video.webm');
  });

  it('a recording whose owner was deleted has a null account_id', () => {
    expect(toRecordingResponse(recording({ userId: null })).account_id).toBeNull();
  });
});
