/** Largest Ogg page: a 27-byte header, 255 lacing values, 255 segments of 255 bytes. */
const MAX_PAGE_BYTES = 27 + 255 + 255 * 255;
/** A packet longer than this is not a live Opus packet (at most 120 ms, far below); it is dropped. */
const MAX_PACKET_BYTES = 64 * 1024;
const CAPTURE = Buffer.from('OggS');

/**
 * Splits an Ogg stream, as it arrives in arbitrary chunks, into its packets; for Ogg Opus, drops the two header
 * packets (OpusHead, OpusTags) and answers the Opus packets. Bounded: it never holds more than one page plus a
 * chunk, and resynchronises on the next capture pattern after garbage.
 */
export class OggOpusDemuxer {
  private pending: Buffer = Buffer.alloc(0);
  /** Segments of a packet that continues on the next page. */
  private partial: Buffer[] = [];
  private partialBytes = 0;

  /** Feeds a chunk; answers the complete Opus packets it finished. */
  push(chunk: Buffer): Buffer[] {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const packets: Buffer[] = [];
    let offset = 0;
    while (this.pending.length - offset >= 27) {
      if (this.pending.compare(CAPTURE, 0, 4, offset, offset + 4) !== 0) {
        const next = this.pending.indexOf(CAPTURE, offset + 1);
        this.dropPartial();
        offset = next < 0 ? Math.max(offset, this.pending.length - 3) : next;
        continue;
      }
      const segments = this.pending[offset + 26];
      if (this.pending.length - offset < 27 + segments) break;
      const lacing = this.pending.subarray(offset + 27, offset + 27 + segments);
      const bodyBytes = lacing.reduce((sum, n) => sum + n, 0);
      const pageBytes = 27 + segments + bodyBytes;
      if (this.pending.length - offset < pageBytes) break;
      const continued = (this.pending[offset + 5] & 0x01) !== 0;
      if (!continued) this.dropPartial();
      let at = offset + 27 + segments;
      for (const size of lacing) {
        this.partial.push(this.pending.subarray(at, at + size));
        this.partialBytes += size;
        at += size;
        if (this.partialBytes > MAX_PACKET_BYTES) this.dropPartial();
        else if (size < 255) this.finishPacket(packets);
      }
      offset += pageBytes;
    }
    // Keep the unread tail only (copied, so the caller's chunk can be reused); never more than a page.
    const rest = this.pending.subarray(offset);
    this.pending = rest.length > MAX_PAGE_BYTES ? Buffer.alloc(0) : Buffer.from(rest);
    return packets;
  }

  private finishPacket(packets: Buffer[]): void {
    const packet = this.partial.length === 1 ? Buffer.from(this.partial[0]) : Buffer.concat(this.partial, this.partialBytes);
    this.dropPartial();
    if (packet.length === 0 || isOpusHeader(packet)) return;
    packets.push(packet);
  }

  private dropPartial(): void {
    this.partial = [];
    this.partialBytes = 0;
  }
}

function isOpusHeader(packet: Buffer): boolean {
  if (packet.length < 8) return false;
  const magic = packet.toString('latin1', 0, 8);
  return magic === 'OpusHead' || magic === 'OpusTags';
}
