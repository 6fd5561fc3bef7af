import { decode } from 'jpeg-js';
import { StreamRangeError } from './errors';
import { captureJpeg, encodeScaledJpeg, scaleRgba, scaledHeight } from './screenshot';

function solid(width: number, height: number, rgb: [number, number, number]) {
  const data = Buffer.alloc(width * height * 4);
  for (let i = 0; i < width * height; i++) data.set([...rgb, 255], i * 4);
  return { width, height, data };
}

const px = (buf: Buffer, width: number, x: number, y: number) => [...buf.subarray((y * width + x) * 4, (y * width + x) * 4 + 4)];

describe('screenshot scaling', () => {
  it('keeps the aspect ratio (round, at least 1)', () => {
    expect(scaledHeight(300, 640, 400)).toBe(188); // 187.5 rounds up
    expect(scaledHeight(300, 1920, 1080)).toBe(169);
    expect(scaledHeight(1, 4000, 10)).toBe(1);
    expect(scaledHeight(100, 100, 100)).toBe(100);
  });

  it('keeps a solid colour solid when shrinking and enlarging', () => {
    const src = solid(640, 400, [0x33, 0x66, 0x99]);
    for (const [w, h] of [[300, 188], [7, 3], [1, 1], [1280, 800], [641, 401]]) {
      const out = scaleRgba(src, w, h);
      expect(out.length).toBe(w * h * 4);
      for (let i = 0; i < w * h; i += Math.max(1, Math.floor((w * h) / 97))) expect(px(out, w, i % w, Math.floor(i / w))).toEqual([0x33, 0x66, 0x99, 255]);
    }
  });

  it('box-averages when shrinking (a 1-pixel checkerboard becomes mid grey, no aliasing)', () => {
    const width = 64;
    const height = 64;
    const data = Buffer.alloc(width * height * 4);
    for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) data.set((x + y) % 2 ? [255, 255, 255, 255] : [0, 0, 0, 255], (y * width + x) * 4);
    for (const target of [32, 16, 10, 3]) {
      const out = scaleRgba({ width, height, data }, target, target);
      for (let i = 0; i < target * target; i++) {
        const [r] = px(out, target, i % target, Math.floor(i / target));
        expect(Math.abs(r - 127.5)).toBeLessThan(target === 10 || target === 3 ? 12 : 1);
      }
    }
  });

  it('maps the halves of a two-colour image to the halves of the output', () => {
    const width = 100;
    const height = 10;
    const data = Buffer.alloc(width * height * 4);
    for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) data.set(x < 50 ? [255, 0, 0, 255] : [0, 0, 255, 255], (y * width + x) * 4);
    const out = scaleRgba({ width, height, data }, 10, 1);
    expect(px(out, 10, 0, 0)).toEqual([255, 0, 0, 255]);
    expect(px(out, 10, 4, 0)).toEqual([255, 0, 0, 255]);
    expect(px(out, 10, 5, 0)).toEqual([0, 0, 255, 255]);
    expect(px(out, 10, 9, 0)).toEqual([0, 0, 255, 255]);
    // Enlarging interpolates across the edge.
    const big = scaleRgba({ width: 2, height: 1, data: Buffer.from([0, 0, 0, 255, 200, 200, 200, 255]) }, 4, 1);
    expect([0, 1, 2, 3].map((x) => px(big, 4, x, 0)[0])).toEqual([0, 50, 150, 200]);
  });

  it('encodes a decodable JPEG of the requested size', () => {
    const shot = encodeScaledJpeg(solid(640, 400, [0x33, 0x66, 0x99]), 300, 80);
    expect(shot).toMatchObject({ width: 300, height: 188, sourceWidth: 640, sourceHeight: 400 });
    expect(shot.jpeg.subarray(0, 2).toString('hex')).toBe('ffd8');
    const img = decode(shot.jpeg, { useTArray: true });
    expect([img.width, img.height]).toEqual([300, 188]);
    const [r, g, b] = img.data.subarray((94 * 300 + 150) * 4, (94 * 300 + 150) * 4 + 3);
    expect(Math.abs(r - 0x33) + Math.abs(g - 0x66) + Math.abs(b - 0x99)).toBeLessThan(12);
  });

  it('validates width and quality before connecting', async () => {
    for (const width of [0, -1, 4097, 1.5, Number.NaN]) {
      await expect(captureJpeg('127.0.0.1', 1, { width })).rejects.toBeInstanceOf(StreamRangeError);
    }
    await expect(captureJpeg('127.0.0.1', 1, { width: 10, quality: 101 })).rejects.toThrow(RangeError);
    expect(() => encodeScaledJpeg(solid(2, 2, [0, 0, 0]), 5000)).toThrow(/width/);
  });
});
