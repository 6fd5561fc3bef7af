import { Injectable } from '@nestjs/common';
import { PgNotifications } from '@ws/database';

/** Sent by a trigger on `workspaces` when a starting workspace's status or progress changes (migration WorkspaceStartNotices). */
export const WORKSPACE_START_CHANNEL = 'workspace_start_changed';
/** Without a LISTEN connection no notice comes: a wait then ends this soon, and the caller reads the state again. */
const UNHEARD_WAIT_MS = 1000;

/** A wait for a starting workspace's next change; `changed` resolves (never rejects) when it should be read again. */
export interface StartWatch {
  changed: Promise<void>;
  stop(): void;
}

/**
 * A starting workspace's changes as they happen, for the callers that wait on them (a browser holding its link
 * open while the desktop starts) instead of polling. Listens on first use only: a process that never waits
 * (the worker) opens nothing.
 */
@Injectable()
export class WorkspaceStartNotices {
  private readonly watchers = new Map<string, Set<() => void>>();
  private listening: Promise<void> | null = null;

  constructor(private readonly notifications: PgNotifications) {}

  /**
   * Watches `workspaceId` from now: `changed` resolves on its next change, when the LISTEN connection is lost
   * (notices may have been missed), or after `timeoutMs`, whichever comes first. Start watching before reading
   * the state that is to change, so a change in between is not missed; always stop().
   */
  async watch(workspaceId: string, timeoutMs: number): Promise<StartWatch> {
    this.listening ??= this.listen();
    await this.listening;
    let wake = () => {};
    const changed = new Promise<void>((resolve) => (wake = resolve));
    const stop = () => {
      clearTimeout(timer);
      const set = this.watchers.get(workspaceId);
      set?.delete(wake);
      if (set?.size === 0) this.watchers.delete(workspaceId);
      wake();
    };
    const timer = setTimeout(stop, this.notifications.listening ? timeoutMs : Math.min(timeoutMs, UNHEARD_WAIT_MS));
    let set = this.watchers.get(workspaceId);
    if (!set) this.watchers.set(workspaceId, (set = new Set()));
    set.add(wake);
    void changed.then(stop);
    return { changed, stop };
  }

  private async listen(): Promise<void> {
    this.notifications.onReset(() => this.wakeAll());
    await this.notifications.subscribe(WORKSPACE_START_CHANNEL, (id) => this.wake(id));
  }

  private wake(workspaceId: string): void {
    for (const wake of this.watchers.get(workspaceId) ?? []) wake();
  }

  private wakeAll(): void {
    for (const set of this.watchers.values()) for (const wake of set) wake();
  }
}
