import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { QueryDeepPartialEntity } from 'typeorm/query-builder/QueryPartialEntity';
import type { DestroyReason } from '@ws/queue';
import { EgressConnections } from '@ws/egress';
import { appendWorkspaceEvents, PendingEvent } from './events/outbox';
import { OutboxSignal } from './events/outbox-signal';
import { LIVE_STATUSES, Workspace, WorkspaceServerConnection, WorkspaceStatus } from '../workspace.entity';

/** A stopping workspace stays as it is (its first reason stands, no second event). */
const DESTROYABLE: WorkspaceStatus[] = ['starting', 'running', 'failed'];

/** One state change: applied only while the workspace is in one of `from` (and unowned when `unowned`). */
interface Transition {
  workspaceId: string;
  from: WorkspaceStatus[];
  to: WorkspaceStatus;
  set?: QueryDeepPartialEntity<Workspace>;
  /** Only a workspace that never had a user (a staged one not yet handed out). */
  unowned?: boolean;
  events: PendingEvent[];
}

/** The fields of a new workspace row (those with a column default may be left out); its status is always `starting`. */
export type NewWorkspace = Partial<Omit<Workspace, 'status' | 'assignedAt' | 'createdAt' | 'updatedAt' | 'image' | 'server' | 'user'>> &
  Pick<Workspace, 'id' | 'userId' | 'imageId' | 'serverId' | 'cores' | 'memory' | 'token' | 'viewOnlyToken' | 'shareId' | 'startDate' | 'keepaliveDate' | 'expirationDate'>;

/**
 * The one owner of workspace state. Every status change is a conditional update (`WHERE status IN (…)`)
 * and, in the same transaction, a row in the workspace_events outbox; the worker's relay hands the outbox
 * to subscribers (WorkspaceEventRelay). A change whose condition does not hold changes nothing, records
 * no event and answers false: the workspace moved on meanwhile (destroyed while starting, …).
 *
 * Methods take an optional EntityManager to join a caller's transaction (placement, a staging claim); the
 * event rows take no lock of their own (see outbox.ts): the workspace's row, updated first, orders its events.
 */
@Injectable()
export class WorkspaceLifecycle {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly egress: EgressConnections,
    private readonly outbox: OutboxSignal,
  ) {}

  /**
   * A new workspace (`starting`) and its `requested` event, inside the caller's transaction (placement reserved the
   * server in it). One made for a user is assigned from the start (assigned_at); a staged one (no user) is not.
   */
  async record(tx: EntityManager, fields: NewWorkspace): Promise<Workspace> {
    const assignedAt = fields.userId ? fields.startDate : null;
    // insert, not save: save first selects the row by its id (the id is ours) to choose between insert and update,
    // one more statement while the launch holds its server's lock and the seat counter. insert fills in the
    // columns the database makes (created_at, defaults) as save does.
    const workspace = tx.create(Workspace, { ...fields, assignedAt, status: 'starting' });
    await tx.insert(Workspace, workspace as QueryDeepPartialEntity<Workspace>);
    await appendWorkspaceEvents(tx, workspace.id, [
      {
        type: 'requested',
        payload: { status: 'starting', userId: workspace.userId, imageId: workspace.imageId, serverId: workspace.serverId, operationalMessage: workspace.operationalMessage ?? null },
      },
    ]);
    return workspace;
  }

  /** starting → running, once its container answers. */
  running(workspaceId: string, container: { containerId: string | null; containerIp: string | null; hostPorts: Record<string, number> }): Promise<boolean> {
    return this.apply({
      workspaceId, from: ['starting'], to: 'running',
      set: { ...container, operationalProgress: 100, operationalMessage: 'Running' },
      events: [{ type: 'running', payload: { status: 'running', containerId: container.containerId } }],
    });
  }

  /** starting|running → failed, with the reason as the operational message. */
  fail(workspaceId: string, from: 'starting' | 'running', message: string): Promise<boolean> {
    return this.apply({
      workspaceId, from: [from], to: 'failed', set: { operationalMessage: message },
      events: [{ type: 'failed', payload: { status: 'failed', from, message } }],
    });
  }

  /**
   * A staged workspace (running, never assigned) handed to a user: `set` carries the owner and what comes with them
   * (userId, sessionTokenId, keepalive and expiration dates, sharing); assigned_at is stamped, for good. False when
   * another claim took it first, or it was ever someone's.
   */
  assign(workspaceId: string, set: QueryDeepPartialEntity<Workspace> & { userId: string }, tx?: EntityManager): Promise<boolean> {
    return this.apply(
      {
        workspaceId, from: ['running'], to: 'running', unowned: true, set: { ...set, assignedAt: () => 'now()' },
        events: [{ type: 'assigned', payload: { status: 'running', userId: set.userId } }],
      },
      tx,
    );
  }

  /** → stopping (removal begins; the caller enqueues the destroy job). An expiry records `expired` first. */
  stop(workspaceId: string, reason: DestroyReason): Promise<boolean> {
    const stopping: PendingEvent = { type: 'stopping', payload: { status: 'stopping', reason } };
    return this.apply({
      workspaceId, from: DESTROYABLE, to: 'stopping',
      set: { destroyReason: reason, operationalMessage: 'Removing the workspace', operationalProgress: 0 },
      events: reason === 'expired' ? [{ type: 'expired', payload: { status: 'stopping' } }, stopping] : [stopping],
    });
  }

  /**
   * → deleted, once its container is gone; the row stays as history (with `note` after "Removed", e.g. why a
   * profile was not saved). Its egress connection is released in the same transaction, whether or not this call
   * made the change (idempotent: a destroy retried after a worker died mid-way releases it all the same).
   */
  destroyed(workspaceId: string, note?: string): Promise<boolean> {
    return this.committed(this.db.transaction(async (tx) => {
      await this.egress.release(tx, workspaceId); // in the transaction that records the change, before its events
      return this.applyIn(tx, {
        workspaceId, from: LIVE_STATUSES, to: 'deleted',
        set: { destroyedAt: new Date(), operationalProgress: 100, operationalMessage: note ? `Removed. ${note}` : 'Removed' },
        events: [{ type: 'destroyed', payload: { status: 'deleted' } }],
      });
    }));
  }

  /**
   * A server session's connection with the address the worker checked it resolves to (@ws/server-sessions): kept
   * so the bridge, the relay and the gateway connect to that address, never to the name again.
   */
  async keepServerAddress(workspaceId: string, connection: WorkspaceServerConnection & { address: string }): Promise<void> {
    await this.db.getRepository(Workspace).update({ id: workspaceId }, { serverConnection: connection });
  }

  /** Progress of a starting workspace (no state change, no event); `set` may record what the provision made so far. */
  async progress(workspaceId: string, percent: number, message: string, set: QueryDeepPartialEntity<Workspace> = {}): Promise<void> {
    await this.db.getRepository(Workspace).update({ id: workspaceId, status: 'starting' }, { ...set, operationalProgress: percent, operationalMessage: message });
  }

  /**
   * The operational message of a running workspace (no state change, no event), e.g. its egress tunnel being down;
   * with `onlyIf`, only while the message is that one (clearing a note never overwrites another). Answers whether it changed.
   */
  async runningNote(workspaceId: string, message: string, onlyIf?: string): Promise<boolean> {
    const result = await this.db.getRepository(Workspace).update(
      { id: workspaceId, status: 'running', ...(onlyIf !== undefined ? { operationalMessage: onlyIf } : {}) },
      { operationalMessage: message },
    );
    return (result.affected ?? 0) > 0;
  }

  /**
   * Progress of a stopping workspace (saving its persistent profile; no state change, no event); `set` may
   * record what the removal did so far (the profile's state).
   */
  async stoppingProgress(workspaceId: string, percent: number, message: string, set: QueryDeepPartialEntity<Workspace> = {}): Promise<void> {
    await this.db.getRepository(Workspace).update({ id: workspaceId, status: 'stopping' }, { ...set, operationalProgress: percent, operationalMessage: message });
  }

  /** In the caller's transaction (which commits later, and tells no one), or in one of its own. */
  private apply(transition: Transition, tx?: EntityManager): Promise<boolean> {
    return tx ? this.applyIn(tx, transition) : this.committed(this.db.transaction((m) => this.applyIn(m, transition)));
  }

  /** A transaction of this service's own, committed: when it recorded a change (and so events), tells the relay. */
  private async committed(transaction: Promise<boolean>): Promise<boolean> {
    const changed = await transaction;
    if (changed) this.outbox.committed();
    return changed;
  }

  private async applyIn(tx: EntityManager, { workspaceId, from, to, set, unowned, events }: Transition): Promise<boolean> {
    const update = tx.createQueryBuilder().update(Workspace).set({ ...set, status: to })
      .where('id = :workspaceId', { workspaceId }).andWhere('status IN (:...from)', { from });
    if (unowned) update.andWhere('user_id IS NULL AND assigned_at IS NULL');
    // The row as the change left it: each event carries who, what image and the message at that moment (webhooks).
    const result = await update.returning('user_id, image_id, operational_message').execute();
    if (!result.affected) return false;
    const [row] = (result.raw ?? []) as Array<{ user_id: string | null; image_id: string; operational_message: string | null }>;
    const state = row ? { userId: row.user_id, imageId: row.image_id, operationalMessage: row.operational_message } : {};
    await appendWorkspaceEvents(tx, workspaceId, events.map((e) => ({ ...e, payload: { ...state, ...e.payload } })));
    return true;
  }
}
