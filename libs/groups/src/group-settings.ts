import type { Group, UsageInterval } from './group.entity';

/** The spec's client_settings keys with the deployment's defaults (a group may override any of them). */
export const DEFAULT_CLIENT_SETTINGS = {
  allow_workspace_audio: true,
  idle_disconnect: 0,
  lock_sharing_video_mode: false,
  allow_persistent_profile: false,
  allow_workspace_clipboard_down: true,
  allow_workspace_microphone: false,
  allow_workspace_downloads: true,
  workspace_audio_default_on: true,
  allow_point_of_presence: false,
  allow_workspace_uploads: true,
  allow_workspace_clipboard_up: true,
  enable_webp: false,
  allow_workspace_sharing: true,
  allow_workspace_clipboard_seamless: false,
};
export type ClientSettings = typeof DEFAULT_CLIENT_SETTINGS;

/**
 * The six allow_workspace_* settings that staging and casting configs carry as columns of their own (spec: the
 * same field names on both), wire name → entity property.
 */
export const CONFIG_CLIENT_SETTING_FLAGS = {
  allow_workspace_audio: 'allowWorkspaceAudio',
  allow_workspace_uploads: 'allowWorkspaceUploads',
  allow_workspace_downloads: 'allowWorkspaceDownloads',
  allow_workspace_clipboard_down: 'allowWorkspaceClipboardDown',
  allow_workspace_clipboard_up: 'allowWorkspaceClipboardUp',
  allow_workspace_microphone: 'allowWorkspaceMicrophone',
} as const satisfies Partial<Record<keyof ClientSettings, string>>;

export interface EffectiveGroupSettings {
  keepaliveExpiration: number;
  usageLimit: { seconds: number; interval: UsageInterval } | null;
  defaultImageId: string | null;
  /** Whether the stream gateway records the user's sessions (the first group that sets record_sessions decides; default off). */
  recordSessions: boolean;
  clientSettings: ClientSettings;
}

/** What of a group decides its members' settings: all that effectiveSettings reads (GroupsService.settingsGroupsOf selects only these). */
export type SettingsGroup = Pick<Group, 'keepaliveExpiration' | 'usageLimit' | 'usageInterval' | 'defaultImageId' | 'recordSessions' | 'clientSettings'>;

/**
 * What a user's groups decide together. `groups` is in priority order (first wins): for each setting the
 * first group that sets it decides; client settings are overlaid so the first group's values win.
 * Loops rather than map/find chains: every workspace read runs this for each owner.
 */
export function effectiveSettings(groups: SettingsGroup[], defaultKeepaliveExpiration: number): EffectiveGroupSettings {
  let keepaliveExpiration: number | null = null;
  let usageLimit: EffectiveGroupSettings['usageLimit'] = null;
  let defaultImageId: string | null = null;
  let recordSessions: boolean | null = null;
  for (const g of groups) {
    keepaliveExpiration ??= g.keepaliveExpiration ?? null;
    if (usageLimit === null && g.usageLimit !== null) usageLimit = { seconds: g.usageLimit, interval: g.usageInterval };
    defaultImageId ??= g.defaultImageId ?? null;
    recordSessions ??= g.recordSessions ?? null;
  }
  const clientSettings = { ...DEFAULT_CLIENT_SETTINGS };
  for (let i = groups.length - 1; i >= 0; i--) {
    const overrides = groups[i].clientSettings;
    if (!overrides) continue;
    for (const key in overrides) {
      const value = overrides[key];
      if (key in clientSettings && typeof value === typeof clientSettings[key as keyof ClientSettings]) {
        (clientSettings as Record<string, boolean | number>)[key] = value;
      }
    }
  }
  return { keepaliveExpiration: keepaliveExpiration ?? defaultKeepaliveExpiration, usageLimit, defaultImageId, recordSessions: recordSessions ?? false, clientSettings };
}

/** Start of the usage window containing `now` (UTC). */
export function usageWindowStart(interval: UsageInterval, now: Date): Date {
  const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  switch (interval) {
    case 'daily':
      return d;
    case 'weekly':
      return new Date(d.getTime() - ((d.getUTCDay() + 6) % 7) * 86400_000);
    case 'monthly':
      return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    case 'total':
      return new Date(0);
    default: {
      const unreachable: never = interval;
      throw new Error(`unknown usage interval ${String(unreachable)}`);
    }
  }
}
