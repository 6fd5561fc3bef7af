import type { Repository } from 'typeorm';
import type { DockerHosts } from '@ws/agent';
import { AppConfig, loadConfig } from '@ws/common';
import { ServerHealth } from './server-health';
import type { Server } from './server.entity';
import type { ServerInventory } from './server-inventory';

/** The writes ServerHealth makes, recorded instead of run: what was set, under which condition. */
interface Write { set: Record<string, unknown>; where?: string; params?: Record<string, unknown> }

function setup(servers: Array<Partial<Server>>, ping: (server: string, timeoutMs: number) => Promise<true>, affectedByUp = 1) {
  const writes: Write[] = [];
  const repo = {
    find: async () => servers,
    update: async (_criteria: unknown, set: Record<string, unknown>) => void writes.push({ set }),
    createQueryBuilder: () => {
      const write: Write = { set: {} };
      const builder = {
        update: () => builder,
        set: (set: Record<string, unknown>) => ((write.set = set), builder),
        where: (where: string, params: Record<string, unknown>) => ((write.where = where), (write.params = params), builder),
        execute: async () => (writes.push(write), { affected: write.set.health === 'up' ? affectedByUp : 1 }),
      };
      return builder;
    },
  } as unknown as Repository<Server>;
  const hosts = { get: (s: Server) => ({ ping: (timeoutMs: number) => ping(s.hostname, timeoutMs) }) } as unknown as DockerHosts;
  const config: AppConfig = Object.assign(loadConfig(), { SERVER_HEALTH_TIMEOUT_MS: 1234 });
  const inventoried: string[] = [];
  const inventory = { refreshQuietly: async (s: Server) => void inventoried.push(s.hostname) } as unknown as ServerInventory;
  return { health: new ServerHealth(repo, hosts, config, inventory), writes, inventoried };
}

describe('ServerHealth', () => {
  const a = { id: 'a', hostname: 'a', health: 'up' as const };
  const b = { id: 'b', hostname: 'b', health: 'down' as const };

  it('pings each server with the configured bound and retries a failed ping once', async () => {
    const calls: Array<[string, number]> = [];
    const { health, writes, inventoried } = setup([a], async (name, timeoutMs) => {
      calls.push([name, timeoutMs]);
      if (calls.length === 1) throw new Error('connect ECONNREFUSED 127.0.0.1:1');
      return true;
    }, 0);
    expect(await health.checkAll()).toEqual({ checked: 1, down: [], recovered: [] });
    // A server that answers has its image inventory taken in the same round.
    expect(inventoried).toEqual(['a']);
    expect(calls).toEqual([['a', 1234], ['a', 1234]]);
    // Up already: only the time of the check is written.
    expect(writes.map((w) => Object.keys(w.set))).toEqual([['health', 'healthReason', 'downSince', 'healthCheckedAt'], ['healthCheckedAt']]);
  });

  it('marks a server down after the retry fails too, with the last reason, keeping the first down time', async () => {
    let n = 0;
    const { health, writes } = setup([a], async () => {
      throw new Error(`timeout ${++n}`);
    });
    expect(await health.checkAll()).toEqual({ checked: 1, down: ['a'], recovered: [] });
    expect(n).toBe(2);
    expect(writes).toEqual([{ set: expect.objectContaining({ health: 'down', healthReason: 'timeout 2' }), where: 'id = :id', params: { id: 'a' } }]);
    expect((writes[0].set.downSince as () => string)()).toBe('COALESCE(down_since, now())');
  });

  it('reports a server back only when its row was down (the conditional update took)', async () => {
    const { health, writes } = setup([a, b], async () => true);
    const round = await health.checkAll();
    expect(round.recovered.map((s) => s.id)).toEqual(['a', 'b']);
    expect(writes.filter((w) => w.set.health === 'up').every((w) => w.where === 'id = :id AND health = :down' && w.params?.down === 'down')).toBe(true);
    const lost = setup([b], async () => true, 0);
    expect((await lost.health.checkAll()).recovered).toEqual([]);
  });
});
