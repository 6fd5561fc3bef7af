import { OggOpusDemuxer } from './audio-ogg';

/** One Ogg page holding `segments` (lacing values as given); CRC left zero (the demuxer does not check it). */
function page(body: Buffer, lacing: number[], continued = false): Buffer {
  const header = Buffer.alloc(27);
  header.write('OggS', 0, 'latin1');
  header[5] = continued ? 1 : 0;
  header[26] = lacing.length;
  return Buffer.concat([header, Buffer.from(lacing), body]);
}

function lacingOf(size: number): number[] {
  const values: number[] = [];
  for (let left = size; ; left -= 255) {
    values.push(Math.min(left, 255));
    if (left < 255) return values;
  }
}

const head = Buffer.concat([Buffer.from('OpusHead'), Buffer.alloc(11, 1)]);
const tags = Buffer.concat([Buffer.from('OpusTags'), Buffer.alloc(8)]);
const packetA = Buffer.alloc(160, 0xa1);
const packetB = Buffer.alloc(300, 0xb2);
const stream = Buffer.concat([
  page(head, lacingOf(head.length)),
  page(tags, lacingOf(tags.length)),
  page(Buffer.concat([packetA, packetB]), [...lacingOf(packetA.length), ...lacingOf(packetB.length)]),
]);

describe('OggOpusDemuxer', () => {
  it('answers the Opus packets, not the two headers', () => {
    expect(new OggOpusDemuxer().push(stream)).toEqual([packetA, packetB]);
  });

  it('gives the same packets whatever the chunking', () => {
    for (const size of [1, 2, 7, 27, 100, 333]) {
      const demuxer = new OggOpusDemuxer();
      const out: Buffer[] = [];
      for (let at = 0; at < stream.length; at += size) out.push(...demuxer.push(stream.subarray(at, at + size)));
      expect(out).toEqual([packetA, packetB]);
    }
  });

  it('joins a packet continued on the next page', () => {
    const long = Buffer.alloc(600, 0xc3);
    const first = long.subarray(0, 510);
    const second = long.subarray(510);
    const out = new OggOpusDemuxer().push(Buffer.concat([page(first, [255, 255]), page(second, lacingOf(second.length), true)]));
    expect(out).toEqual([long]);
  });

  it('skips garbage and resynchronises on the next page', () => {
    const out = new OggOpusDemuxer().push(Buffer.concat([Buffer.from('garbage OggX'), page(packetA, lacingOf(packetA.length))]));
    expect(out).toEqual([packetA]);
  });

  it('reads a continued page whose start it never saw (joining mid-stream) as it stands', () => {
    const out = new OggOpusDemuxer().push(Buffer.concat([page(packetB, lacingOf(packetB.length), true), page(packetA, lacingOf(packetA.length))]));
    // Ogg cannot tell a fragment from a packet here; an Opus decoder drops a broken one on its own.
    expect(out).toEqual([packetB, packetA]);
  });
});
