import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { registerLocalServer } from './fixtures';
import { desktopImage, TestApi, waitFor } from './harness';

const run = promisify(execFile);

/** Runs a command in a container as its user (the sound server is that user's); answers stdout. */
export async function dockerExec(containerId: string, command: string, timeoutMs = 30_000): Promise<Buffer> {
  const { stdout } = await run('docker', ['exec', containerId, 'bash', '-c', command], { encoding: 'buffer', timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** The reference desktop's sound and microphone bridge ports. */
export const SOUND_PORT = 4901;
const MICROPHONE_PORT = 4902;

/** A shell test, run in the container, that succeeds while something listens on the TCP port (read from /proc/net, without connecting). */
export function listensOn(port: number): string {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  return `cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "0A" && $2 ~ /:${hex}$/ { found = 1 } END { exit !found }'`;
}

/**
 * Waits until the workspace's sound server answers and both audio bridges listen (the desktop starts them, in that
 * order, after its first window). Read from /proc/net/tcp, without connecting: the sound server answering alone left
 * a moment in which the bridges' socat was not listening yet, and Docker's port proxy, which accepts on the host
 * whatever the container does, closed a connection made then (CI, 2026-11-28).
 */
export async function waitForSound(containerId: string): Promise<void> {
  await waitFor('the sound server and its bridges', async () => {
    const out = await dockerExec(containerId, `pactl info >/dev/null && ${listensOn(SOUND_PORT)} && ${listensOn(MICROPHONE_PORT)} && echo up`).catch(() => Buffer.alloc(0));
    return out.toString().includes('up') ? true : undefined;
  }, 30_000, 250);
}

/** A continuous tone into the workspace's default speaker (PulseAudio's module-sine); answers the module index. */
export async function playTone(containerId: string, frequency = 440): Promise<string> {
  return (await dockerExec(containerId, `pactl load-module module-sine frequency=${frequency}`)).toString().trim();
}

export async function stopTone(containerId: string, module: string): Promise<void> {
  await dockerExec(containerId, `pactl unload-module ${Number(module)}`).catch(() => undefined);
}

/** Root mean square of s16le samples, 0..32767. */
export function rms(pcm: Buffer): number {
  const samples = Math.floor(pcm.length / 2);
  if (samples === 0) return 0;
  let sum = 0;
  for (let i = 0; i < samples; i++) {
    const v = pcm.readInt16LE(i * 2);
    sum += v * v;
  }
  return Math.sqrt(sum / samples);
}

/** Largest absolute s16le sample. */
export function peak(pcm: Buffer): number {
  let max = 0;
  for (let i = 0; i + 1 < pcm.length; i += 2) max = Math.max(max, Math.abs(pcm.readInt16LE(i)));
  return max;
}

/** `seconds` of a sine as s16le 48 kHz mono, at half of full scale. */
export function sinePcm(seconds: number, frequency = 660): Buffer {
  const count = Math.round(48_000 * seconds);
  const pcm = Buffer.alloc(count * 2);
  for (let i = 0; i < count; i++) pcm.writeInt16LE(Math.round(16_000 * Math.sin((2 * Math.PI * frequency * i) / 48_000)), i * 2);
  return pcm;
}

/** Decodes Opus packets (as the gateway sends them: 48 kHz stereo) to s16le mono with ffmpeg, by way of an Ogg file. */
export async function decodeOpusPackets(packets: Buffer[], path: string): Promise<Buffer> {
  await writeFile(path, oggOpusFile(packets));
  const { stdout } = await run('ffmpeg', ['-v', 'error', '-i', path, '-f', 's16le', '-ac', '1', '-ar', '48000', '-'], { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** An Ogg Opus file: the two headers, then one packet per page (20 ms each, as the reference image encodes). */
export function oggOpusFile(packets: Buffer[]): Buffer {
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1;
  head[9] = 2;
  head.writeUInt16LE(312, 10);
  head.writeUInt32LE(48_000, 12);
  const tags = Buffer.concat([Buffer.from('OpusTags'), u32(4), Buffer.from('test'), u32(0)]);
  const pages = [oggPage(head, 0, 0n, 0x02), oggPage(tags, 1, 0n, 0)];
  let granule = 0n;
  packets.forEach((packet, i) => {
    granule += 960n;
    pages.push(oggPage(packet, i + 2, granule, i === packets.length - 1 ? 0x04 : 0));
  });
  return Buffer.concat(pages);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

function oggPage(packet: Buffer, sequence: number, granule: bigint, flags: number): Buffer {
  const lacing: number[] = [];
  for (let left = packet.length; ; left -= 255) {
    lacing.push(Math.min(left, 255));
    if (left < 255) break;
  }
  const header = Buffer.alloc(27);
  header.write('OggS', 0, 'latin1');
  header[5] = flags;
  header.writeBigUInt64LE(granule, 6);
  header.writeUInt32LE(0x5eed, 14);
  header.writeUInt32LE(sequence, 18);
  header[26] = lacing.length;
  const page = Buffer.concat([header, Buffer.from(lacing), packet]);
  page.writeUInt32LE(oggCrc(page), 22);
  return page;
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let j = 0; j < 8; j++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    table[i] = r >>> 0;
  }
  return table;
})();

function oggCrc(page: Buffer): number {
  let crc = 0;
  for (const byte of page) crc = ((crc << 8) ^ CRC_TABLE[((crc >>> 24) & 0xff) ^ byte]) >>> 0;
  return crc;
}

/** This machine's Docker engine as the server, and the reference desktop as an image with its sound and microphone ports. */
export async function registerAudioDesktop(api: TestApi): Promise<{ id: string }> {
  await registerLocalServer(api);
  const image = await api.app.get(ImagesService).upsert({
    name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600,
    portMap: { vnc: '5900/tcp', audio: `${SOUND_PORT}/tcp`, audio_input: `${MICROPHONE_PORT}/tcp` },
  });
  return { id: toWireId(image.id) };
}
