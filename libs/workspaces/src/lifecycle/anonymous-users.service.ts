import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { OnWorkspaceEvent } from './events/workspace-event-subscriber';
import type { WorkspaceEventMessage } from './events/workspace-event-types';
import { UsersService } from '@ws/users';
import { liveSql } from '../workspace.entity';

/**
 * An anonymous user (alias `u`) that nothing holds any more: no workspace of its own and no workspace it was made
 * to join is live (every status but `deleted`; a stopping one still counts until it is gone).
 */
const UNHELD_ANONYMOUS = `u.anonymous
   AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.user_id = u.id AND ${liveSql('w')})
   AND NOT EXISTS (SELECT 1 FROM workspaces j WHERE j.id = u.joined_workspace_id AND ${liveSql('j')})`;

/** The sweep leaves alone users younger than this: a launch or a cast visit that made one may not have recorded its workspace yet. */
export const ANONYMOUS_USER_GRACE_SECONDS = 15 * 60;
/** Users one sweep removes at most; the next run continues. */
const SWEEP_BATCH = 1000;

/**
 * Anonymous users (request_workspace or join_workspace without user_id, cast links) exist for their workspace:
 * each is removed, its session tokens and login links with it (foreign keys, CASCADE), once its last workspace
 * is deleted, or the workspace it was made to view is. Done on the `destroyed` event through the relay's
 * transaction (exactly once with the cursor; a killed worker's delivery is repeated, and the delete is a no-op
 * the second time). The maintenance sweep is the safety net for anything the events missed.
 */
@Injectable()
export class AnonymousUsers {
  private readonly logger = new Logger(AnonymousUsers.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly users: UsersService,
  ) {}

  @OnWorkspaceEvent({ name: 'anonymous-users', types: ['destroyed'] })
  async onDestroyed(event: WorkspaceEventMessage, tx: EntityManager): Promise<void> {
    const held = (await tx.query(
      `SELECT u.id FROM users u
        WHERE (u.id = (SELECT user_id FROM workspaces WHERE id = $1) OR u.joined_workspace_id = $1) AND ${UNHELD_ANONYMOUS}`,
      [event.workspaceId],
    )) as Array<{ id: string }>;
    await this.users.removeAnonymous(held.map((u) => u.id), tx);
  }

  /** Removes anonymous users older than the grace that nothing holds; answers how many went. */
  async sweep(graceSeconds = ANONYMOUS_USER_GRACE_SECONDS): Promise<number> {
    const unheld = (await this.db.query(
      `SELECT u.id FROM users u WHERE u.created_at < now() - $1::interval AND ${UNHELD_ANONYMOUS} LIMIT ${SWEEP_BATCH}`,
      [`${graceSeconds} seconds`],
    )) as Array<{ id: string }>;
    const removed = await this.users.removeAnonymous(unheld.map((u) => u.id));
    if (removed > 0) this.logger.log(`removed ${removed} anonymous user(s) whose workspaces are gone`);
    return removed;
  }
}
