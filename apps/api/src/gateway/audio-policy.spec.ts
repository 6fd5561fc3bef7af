import { AUDIO_STREAM_PATH, audioRefusal } from './audio-policy';

describe('audio policy', () => {
  const on = { allow_workspace_audio: true, allow_workspace_microphone: true };
  const off = { allow_workspace_audio: false, allow_workspace_microphone: false };

  it('lets the owner listen and speak when the settings allow, and refuses each when its setting is off', () => {
    expect(audioRefusal('audio', on, false)).toBeNull();
    expect(audioRefusal('audio_input', on, false)).toBeNull();
    expect(audioRefusal('audio', off, false)).toMatch(/allow_workspace_audio is off/);
    expect(audioRefusal('audio_input', off, false)).toMatch(/allow_workspace_microphone is off/);
  });

  it('lets a view-only joiner listen under the owner\'s allow_workspace_audio, never speak', () => {
    expect(audioRefusal('audio', on, true)).toBeNull();
    expect(audioRefusal('audio', off, true)).toMatch(/allow_workspace_audio is off/);
    expect(audioRefusal('audio_input', on, true)).toBe('A view-only session cannot send microphone input');
  });

  it('matches only the two audio routes', () => {
    const id = '0123456789abcdef0123456789abcdef';
    expect(AUDIO_STREAM_PATH.exec(`/api/stream/${id}/audio`)?.slice(1)).toEqual([id, 'audio']);
    expect(AUDIO_STREAM_PATH.exec(`/api/stream/${id}/audio_input`)?.slice(1)).toEqual([id, 'audio_input']);
    expect(AUDIO_STREAM_PATH.test(`/api/stream/${id}/vnc`)).toBe(false);
    expect(AUDIO_STREAM_PATH.test(`/api/stream/${id}/audio/x`)).toBe(false);
  });
});
