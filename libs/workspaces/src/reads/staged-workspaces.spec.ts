import { countReadyStaged, liveUnassignedStaged, pickReadyStaged, Queryable, stagedPool, unassignedStaged } from './staged-workspaces';

/** Records the statements a query function sends; answers no rows. */
function recorder(): Queryable & { sql: string[] } {
  const sql: string[] = [];
  return { sql, query: async (text: string) => (sql.push(text), []) } as unknown as Queryable & { sql: string[] };
}

describe('staged workspaces (the pools\' rows)', () => {
  it('never counts, picks, trims or lists a workspace that was ever someone\'s, even one whose user was deleted since (issue 19)', async () => {
    const db = recorder();
    await countReadyStaged(db, ['c']);
    await pickReadyStaged(db, 'i', ['c']);
    await stagedPool(db, 'c');
    await unassignedStaged(db, 'c');
    await liveUnassignedStaged(db, null);
    expect(db.sql).toHaveLength(5);
    for (const text of db.sql) {
      expect(text).toContain('w.assigned_at IS NULL');
      expect(text).toContain('w.user_id IS NULL');
    }
  });

  it('neither counts, picks nor keeps in the pool a staged workspace whose host is marked down', async () => {
    const db = recorder();
    await countReadyStaged(db, ['c']);
    await pickReadyStaged(db, 'i', ['c']);
    await stagedPool(db, 'c');
    for (const text of db.sql) expect(text).toContain("NOT EXISTS (SELECT 1 FROM servers hs WHERE hs.id = w.server_id AND hs.health = 'down')");
  });

  it('picks with SKIP LOCKED, and asks nothing when no config matches', async () => {
    const db = recorder();
    expect(await pickReadyStaged(db, 'i', [])).toBeNull();
    expect(await countReadyStaged(db, [])).toEqual(new Map());
    expect(db.sql).toEqual([]);
    await pickReadyStaged(db, 'i', ['c']);
    expect(db.sql[0]).toContain('FOR UPDATE OF w SKIP LOCKED');
  });
});
