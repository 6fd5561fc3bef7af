/**
 * The hot reads select raw rows and hydrate them with @ws/database's planned hydrators (raw-query.ts), which copy
 * the columns TypeORM's driver would leave unchanged. Every stored row of every entity must come out exactly as
 * TypeORM's own find loads it: same class, same properties, same converted values (dates, numbers, JSON, nulls).
 */
import { DataSource, EntityMetadata } from 'typeorm';
import { newId } from '@ws/common';
import { hydrate, rawQuery, selectColumns } from '@ws/database';
import { ImageAttribute } from '@ws/images';
import { SessionToken } from '@ws/users';
import { findWorkspaceToProvision, Workspace } from '@ws/workspaces';
import { insertWorkspaceRow } from './fixtures';
import { TestApi, TestKey } from './harness';

describe('raw rows hydrate as TypeORM loads them', () => {
  let api: TestApi;
  let admin: TestKey;
  let db: DataSource;

  beforeAll(async () => {
    api = await TestApi.start();
    admin = await api.key(['Global Admin']);
    db = api.app.get(DataSource);
    // Rows of many shapes: a user with groups, a workspace with its image, server and zone, attributes, a token.
    const user = await api.call('create_user', admin, { target_user: { username: 'hydrated', first_name: 'Hy', notes: 'ünïcode' } });
    expect(user.status).toBe(200);
    const userId = (await db.query('SELECT id FROM users WHERE username = $1', ['hydrated']))[0].id as string;
    const workspace = await insertWorkspaceRow(db, userId);
    await db.getRepository(ImageAttribute).insert({ id: newId(), imageId: workspace.imageId, category: 'port_map', name: 'vnc', value: '5901/tcp' });
    await db.getRepository(SessionToken).insert({ id: newId(), userId, tokenDate: new Date(), expiresAt: new Date(Date.now() + 60_000), generation: 3 });
    await db.query('UPDATE workspaces SET environment = $2, launch_options = $3 WHERE id = $1', [workspace.id, { A: 'b' }, { zone: null, n: 1 }]);
  });

  afterAll(async () => {
    await api?.close();
  });

  it('every row of every entity that has rows', async () => {
    const checked: string[] = [];
    for (const metadata of db.entityMetadatas as EntityMetadata[]) {
      const entity = metadata.target as new () => object;
      if (typeof entity !== 'function' || metadata.tableType !== 'regular') continue;
      const order = metadata.primaryColumns.map((c) => `t.${c.databaseName}`).join(', ');
      const rows = await rawQuery(db, `SELECT ${selectColumns(db, entity, 't', 'p_')} FROM ${metadata.tableName} t ORDER BY ${order}`);
      if (rows.length === 0) continue;
      const loaded = await db.getRepository(entity).find({ order: Object.fromEntries(metadata.primaryColumns.map((c) => [c.propertyName, 'ASC'])) });
      const hydrated = rows.map((row) => hydrate(db, entity, row, 'p_'));
      expect([metadata.name, hydrated]).toStrictEqual([metadata.name, loaded]);
      checked.push(metadata.name);
    }
    // The seeded shapes were all compared (and more: settings, groups, licenses…).
    expect(checked).toEqual(expect.arrayContaining(['Workspace', 'Image', 'ImageAttribute', 'Server', 'Zone', 'User', 'SessionToken', 'Group', 'Setting']));
  });

  it("a provision run's workspace loads with its relations as TypeORM's find with them", async () => {
    const [{ id }] = (await db.query("SELECT w.id FROM workspaces w JOIN users u ON u.id = w.user_id WHERE u.username = 'hydrated'")) as Array<{ id: string }>;
    const repository = db.getRepository(Workspace);
    const loaded = await repository.findOne({ where: { id }, relations: { image: { attributes: true }, server: true, user: true } });
    expect(loaded?.image?.attributes).toHaveLength(1);
    expect(await findWorkspaceToProvision(repository, id)).toStrictEqual(loaded);
    expect(await findWorkspaceToProvision(repository, '00000000-0000-4000-8000-000000000000')).toBeNull();
  });

  it('a row without its primary key (an unmatched LEFT JOIN) is no entity', async () => {
    const [row] = await rawQuery(db, `SELECT ${selectColumns(db, ImageAttribute, 'a', 'a_')} FROM (SELECT 1) one LEFT JOIN image_attributes a ON false`);
    expect(hydrate(db, ImageAttribute, row, 'a_')).toBeNull();
  });
});
