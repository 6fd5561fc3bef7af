import type { ClientSettings } from '@ws/groups';

/** The two audio routes of a workspace: its sound out (port_map.audio) and the microphone in (port_map.audio_input). */
export type AudioKind = 'audio' | 'audio_input';

export const AUDIO_STREAM_PATH = /^\/api\/stream\/([0-9a-fA-F-]{32,36})\/(audio|audio_input)$/;

/**
 * Why an audio connection is refused, or null when it may open. The settings are the workspace's effective ones
 * (the owner's groups, overlaid with a cast link's enforced settings). A view-only joiner hears the workspace
 * only under the owner's allow_workspace_audio, like the owner, and never sends microphone input.
 */
export function audioRefusal(kind: AudioKind, settings: Pick<ClientSettings, 'allow_workspace_audio' | 'allow_workspace_microphone'>, viewOnly: boolean): string | null {
  if (kind === 'audio') return settings.allow_workspace_audio === true ? null : 'Audio is not allowed for this workspace (allow_workspace_audio is off)';
  if (viewOnly) return 'A view-only session cannot send microphone input';
  return settings.allow_workspace_microphone === true ? null : 'The microphone is not allowed for this workspace (allow_workspace_microphone is off)';
}
