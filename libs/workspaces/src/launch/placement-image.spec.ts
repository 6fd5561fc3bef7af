import type { EntityManager } from 'typeorm';
import { ApiError } from '@ws/common';
import type { Image } from '@ws/images';
import type { Server } from '@ws/servers';
import { holdingImage } from './placement';

describe('placement by image inventory (issue 24, point 4)', () => {
  const server = (id: string, inventoried: boolean) => ({ id, hostname: id, imagesCheckedAt: inventoried ? new Date() : null }) as Server;
  const image = { kind: 'container', name: 'desk:1', friendlyName: 'Desk', updatedAt: new Date(Date.now() - 60_000) } as Image;
  const tx = (holding: string[]) => {
    const asked: unknown[][] = [];
    const manager = { query: async (_sql: string, params: unknown[]) => (asked.push(params), holding.map((server_id) => ({ server_id }))) } as unknown as EntityManager;
    return { manager, asked };
  };

  it('keeps servers whose inventory lists the image, and those never inventoried', async () => {
    const { manager, asked } = tx(['a']);
    expect((await holdingImage(manager, image, [server('a', true), server('b', true), server('c', false)])).map((s) => s.id)).toEqual(['a', 'c']);
    expect(asked).toEqual([[['a', 'b'], ['desk:1']]]);
  });

  it('answers 503 naming the image when no candidate holds it', async () => {
    const refused = holdingImage(tx([]).manager, image, [server('a', true)]);
    await expect(refused).rejects.toThrow(ApiError);
    await expect(refused).rejects.toThrow(/image Desk, desk:1, is on no reachable server/);
  });

  it('counts an inventory taken before the image was saved as not knowing it (an image registered a moment ago)', async () => {
    const fresh = { ...image, updatedAt: new Date(Date.now() + 60_000) } as Image;
    const { manager, asked } = tx([]);
    expect((await holdingImage(manager, fresh, [server('a', true)])).map((s) => s.id)).toEqual(['a']);
    expect(asked).toEqual([]);
  });

  it('asks nothing for server images or when no candidate was inventoried', async () => {
    const { manager, asked } = tx([]);
    expect(await holdingImage(manager, { ...image, kind: 'server' } as Image, [server('a', true)])).toHaveLength(1);
    expect(await holdingImage(manager, image, [server('b', false)])).toHaveLength(1);
    expect(asked).toEqual([]);
  });
});
