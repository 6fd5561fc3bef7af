import { Injectable } from '@nestjs/common';
import { effectiveSettings, EffectiveGroupSettings, GroupsService } from '@ws/groups';
import { SettingsService } from '@ws/settings';

/** A user's effective group settings (client settings, keepalive, usage limit), as every workspace operation reads them. */
@Injectable()
export class WorkspaceSettings {
  constructor(
    private readonly groups: GroupsService,
    private readonly settings: SettingsService,
  ) {}

  async of(userId: string): Promise<EffectiveGroupSettings> {
    return (await this.ofMany([userId])).get(userId) as EffectiveGroupSettings;
  }

  async ofMany(userIds: string[]): Promise<Map<string, EffectiveGroupSettings>> {
    const [groups, fallback] = await Promise.all([this.groups.settingsGroupsOf(userIds), this.settings.get<number>('default_keepalive_expiration')]);
    return new Map(userIds.map((id) => [id, effectiveSettings(groups.get(id) ?? [], fallback)]));
  }
}
