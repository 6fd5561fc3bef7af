/**
 * Issue 14 follow-up benchmark: the RDP relay (workspace-rdp-relay, the desktop image's python3 relay that admits
 * a connection by its Pre-Connection PDU credential) against a `socat TCP-LISTEN … TCP:…` container from the
 * same image, the generic TCP relay an operator would otherwise put there. One run, paths taking turns:
 *  - direct: the target container's own published ports (Docker's loopback proxy only), the ceiling of the other two;
 *  - relay: one relay container per target, configured as the worker does it (connection file via the archive API);
 *  - socat: one socat container per target (the baseline), with the relay's settings: 64 KiB reads (`-b 65536`)
 *    and TCP_NODELAY on both of its sockets (`nodelay`), so the ratio measures the relay, not socat's defaults
 *    (8 KiB reads, Nagle on).
 * Targets, in one container of the same image on Docker's default bridge network, socat with large buffers so they
 * are never the limit: an echo (PIPE: latency and connection setup), a sink (upload: done when the sink has read
 * every byte and closed) and a /dev/zero source (download). Every container publishes on 127.0.0.1 only.
 * Figures per round are compared round by round (relay / socat); printed as the median of the per-round ratios.
 */
import { randomBytes } from 'node:crypto';
import { connect, Socket } from 'node:net';
import { Readable } from 'node:stream';
import Docker from 'dockerode';
import * as tar from 'tar-stream';
import { mintRelayCredential } from '@ws/server-sessions';
import { desktopImage, removeContainers, until } from './harness';
import { median, percentile } from './stats';

const ROUNDS = Number(process.env.BENCH_RELAY_ROUNDS ?? 5);
const BULK_MIB = Number(process.env.BENCH_RELAY_MIB ?? 256);
const ROUND_TRIPS = Number(process.env.BENCH_RELAY_ROUND_TRIPS ?? 2000);
const SETUPS = Number(process.env.BENCH_RELAY_SETUPS ?? 100);
const MESSAGE_BYTES = 64;
/** Round trips and setups of a round are split into this many blocks, the paths taking turns block by block. */
const LATENCY_BLOCKS = 10;
const BURST_MESSAGES = 3;
const STALL_US = 20_000;
/** Any single transfer, round-trip series or connection past this fails the bench instead of hanging it. */
const OPERATION_TIMEOUT_MS = 120_000;
const ROOT = `${__dirname}/../..`;
const RELAY_PORT = 3389;
const TARGET_PORTS = { echo: 7000, sink: 7001, source: 7002 } as const;
type Target = keyof typeof TARGET_PORTS;
/** The relay image runs as this user; the worker writes the connection file for it (server-session-runtime.ts). */
const BRIDGE_UID = 1000;
const LABEL = 'workspace-server.deployment-id';

interface Path {
  name: string;
  /** Loopback port per target. */
  ports: Record<Target, number>;
  /** The Pre-Connection PDU each connection opens with (relay only). */
  preamble?: () => Buffer;
}

interface Figures {
  downloadMiBps: number;
  uploadMiBps: number;
  rttP50Us: number;
  rttP99Us: number;
  burstP50Us: number;
  burstP99Us: number;
  /** Bursts whose round trip took over STALL_US: a delayed ACK (40 ms on Linux) waited for, not a slow relay. */
  burstStalls: number;
  setupP50Us: number;
}

/** MS-RDPEPS 2.2.1.2.2 RDP_PRECONNECTION_PDU_V2: cbSize, Flags 0, Version 2, Id 0, cchPCB (incl. the null), wszPCB. */
function preconnectionPdu(blob: string): Buffer {
  const text = Buffer.from(`${blob}\0`, 'utf16le');
  const pdu = Buffer.alloc(18 + text.length);
  pdu.writeUInt32LE(pdu.length, 0);
  pdu.writeUInt32LE(0, 4);
  pdu.writeUInt32LE(2, 8);
  pdu.writeUInt32LE(0, 12);
  pdu.writeUInt16LE(blob.length + 1, 16);
  text.copy(pdu, 18);
  return pdu;
}

function withTimeout<T>(what: string, work: Promise<T>, ms = OPERATION_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no end within ${ms / 1000} s`)), ms)));
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** Connects (Nagle off, like RDP clients) and sends the path's preamble; resolves once connected. */
function open(path: Path, target: Target): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: path.ports[target], noDelay: true }, () => {
      socket.off('error', reject);
      if (path.preamble) socket.write(path.preamble());
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** MiB/s reading `bytes` from the source (timed from the connection to the last byte). */
async function download(path: Path, bytes: number): Promise<number> {
  const started = performance.now();
  const socket = await open(path, 'source');
  return withTimeout(`${path.name} download`, new Promise<number>((resolve, reject) => {
    let received = 0;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received >= bytes) {
        const seconds = (performance.now() - started) / 1000;
        socket.destroy();
        resolve(bytes / 1024 ** 2 / seconds);
      }
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error(`${path.name} download: closed after ${received} of ${bytes} bytes`)));
  })).finally(() => socket.destroy());
}

/** MiB/s writing `bytes` to the sink, timed until the sink closed after reading all of it (through the path). */
async function upload(path: Path, bytes: number): Promise<number> {
  const started = performance.now();
  const socket = await open(path, 'sink');
  const chunk = Buffer.alloc(1024 ** 2);
  return withTimeout(`${path.name} upload`, new Promise<number>((resolve, reject) => {
    socket.once('error', reject);
    socket.on('data', () => reject(new Error(`${path.name} upload: the sink answered`)));
    socket.once('end', () => resolve(bytes / 1024 ** 2 / ((performance.now() - started) / 1000)));
    const writeAll = async () => {
      for (let sent = 0; sent < bytes; sent += chunk.length) {
        if (!socket.write(chunk)) await new Promise((drained) => socket.once('drain', drained));
      }
      socket.end();
    };
    writeAll().catch(reject);
  })).finally(() => socket.destroy());
}

/** Reads exactly `count` bytes (the echo answers in as many pieces as it likes); one read at a time. */
function reader(socket: Socket) {
  let buffered = 0;
  let waiting: { count: number; resolve: () => void; reject: (err: Error) => void } | undefined;
  let closed = false;
  socket.on('data', (chunk: Buffer) => {
    buffered += chunk.length;
    if (waiting && buffered >= waiting.count) {
      buffered -= waiting.count;
      const { resolve } = waiting;
      waiting = undefined;
      resolve();
    }
  });
  socket.once('close', () => {
    closed = true;
    waiting?.reject(new Error('the echo connection closed'));
  });
  return (count: number) => new Promise<void>((resolve, reject) => {
    if (buffered >= count) {
      buffered -= count;
      resolve();
    } else if (closed) {
      reject(new Error('the echo connection closed'));
    } else {
      waiting = { count, resolve, reject };
    }
  });
}

/**
 * Microseconds per round trip through the echo of `burst` 64-byte messages written back to back (1: one message in
 * flight at a time). Bursts of small PDUs are RDP's usual traffic; a relay that leaves Nagle on stalls some of them
 * until the peer's delayed ACK.
 */
async function roundTrips(path: Path, count: number, burst: number): Promise<number[]> {
  const socket = await open(path, 'echo');
  try {
    const read = reader(socket);
    const message = randomBytes(MESSAGE_BYTES);
    // One unmeasured trip: the relay connects upstream only after the PDU.
    socket.write(message);
    await withTimeout(`${path.name} first echo`, read(MESSAGE_BYTES), 30_000);
    const samples: number[] = [];
    await withTimeout(`${path.name} round trips`, (async () => {
      for (let i = 0; i < count; i++) {
        const started = process.hrtime.bigint();
        for (let m = 0; m < burst; m++) socket.write(message);
        await read(MESSAGE_BYTES * burst);
        samples.push(Number(process.hrtime.bigint() - started) / 1000);
      }
    })());
    return samples;
  } finally {
    socket.destroy();
  }
}

/** Microseconds from connect() to the first echoed byte (PDU and first byte sent together, as a client does). */
async function setupTime(path: Path): Promise<number> {
  const started = process.hrtime.bigint();
  const socket = await open(path, 'echo');
  try {
    const read = reader(socket);
    socket.write(Buffer.from([0x03]));
    await withTimeout(`${path.name} connection setup`, read(1), 30_000);
    return Number(process.hrtime.bigint() - started) / 1000;
  } finally {
    socket.destroy();
  }
}

/**
 * One round: bulk transfers path by path, then round trips and setups in short blocks with the paths alternating
 * block by block, so a slow moment of this small machine (scheduling, CPU placement) falls on every path alike.
 */
async function measureRound(paths: Path[], round: number): Promise<Map<string, Figures>> {
  const bytes = BULK_MIB * 1024 ** 2;
  const bulk = new Map<string, [number, number]>();
  const rtt = new Map<string, number[]>(paths.map((p) => [p.name, []]));
  const bursts = new Map<string, number[]>(paths.map((p) => [p.name, []]));
  const setups = new Map<string, number[]>(paths.map((p) => [p.name, []]));
  const inTurn = (turn: number) => paths.map((_, i) => paths[(turn + i) % paths.length]);
  for (const path of inTurn(round)) bulk.set(path.name, [await download(path, bytes), await upload(path, bytes)]);
  for (let block = 0; block < LATENCY_BLOCKS; block++) {
    for (const path of inTurn(round + block)) {
      rtt.get(path.name)!.push(...(await roundTrips(path, Math.ceil(ROUND_TRIPS / LATENCY_BLOCKS), 1)));
      bursts.get(path.name)!.push(...(await roundTrips(path, Math.ceil(ROUND_TRIPS / LATENCY_BLOCKS), BURST_MESSAGES)));
      for (let i = 0; i < Math.ceil(SETUPS / LATENCY_BLOCKS); i++) setups.get(path.name)!.push(await setupTime(path));
    }
  }
  return new Map(paths.map((path) => {
    const [downloadMiBps, uploadMiBps] = bulk.get(path.name)!;
    const samples = rtt.get(path.name)!;
    const burstSamples = bursts.get(path.name)!;
    return [path.name, {
      downloadMiBps, uploadMiBps, rttP50Us: median(samples), rttP99Us: percentile(samples, 99),
      burstP50Us: median(burstSamples), burstP99Us: percentile(burstSamples, 99),
      burstStalls: burstSamples.filter((us) => us > STALL_US).length, setupP50Us: median(setups.get(path.name)!),
    }];
  }));
}

/** The connection file the worker writes (server-session-runtime.ts writeConnection), before the container starts. */
async function writeRelayConnection(container: Docker.Container, host: string, port: number, secret: string): Promise<void> {
  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  const lines = ['PROTOCOL=relay', `HOST=${host}`, `PORT=${port}`, 'USERNAME_B64=', 'PASSWORD_B64=', 'DOMAIN_B64=', `RELAY_SECRET_B64=${b64(secret)}`, `RELAY_PORT=${RELAY_PORT}`];
  const pack = tar.pack();
  const mtime = new Date();
  pack.entry({ name: 'workspace-bridge', type: 'directory', mode: 0o755, uid: 0, gid: 0, mtime });
  pack.entry({ name: 'workspace-bridge/connection', type: 'file', mode: 0o400, uid: BRIDGE_UID, gid: BRIDGE_UID, mtime }, `${lines.join('\n')}\n`);
  pack.finalize();
  await container.putArchive(Readable.from(pack), { path: '/etc' });
}

/** Creates a container of the image on the default bridge with `ports` published on 127.0.0.1 (random host ports). */
async function createContainer(docker: Docker, image: string, deploymentId: string, cmd: string[], ports: number[]): Promise<Docker.Container> {
  return docker.createContainer({
    Image: image,
    Entrypoint: [],
    Cmd: cmd,
    Labels: { [LABEL]: deploymentId },
    ExposedPorts: Object.fromEntries(ports.map((p) => [`${p}/tcp`, {}])),
    HostConfig: { NetworkMode: 'bridge', PortBindings: Object.fromEntries(ports.map((p) => [`${p}/tcp`, [{ HostIp: '127.0.0.1', HostPort: '' }]])) },
  });
}

async function publishedPort(container: Docker.Container, port: number): Promise<number> {
  const info = await container.inspect();
  const binding = info.NetworkSettings.Ports[`${port}/tcp`]?.[0];
  if (!binding) throw new Error(`container ${info.Name}: port ${port} is not published`);
  return Number(binding.HostPort);
}

function verdict(ratio: number, higherIsBetter: boolean): string {
  const better = higherIsBetter ? ratio : 1 / ratio;
  if (better >= 1.05) return 'relay better than socat';
  if (better >= 0.95) return 'on par with socat';
  return ratio >= 0.8 && ratio <= 1.25 ? `relay somewhat worse, within the ${higherIsBetter ? '0.8' : '1.25'}× bound` : `relay CLEARLY WORSE than socat (${higherIsBetter ? '< 0.8' : '> 1.25'}×)`;
}

async function main(): Promise<void> {
  const image = desktopImage(ROOT);
  const docker = new Docker();
  const deploymentId = `bench-relay-${randomBytes(4).toString('hex')}`;
  const secret = randomBytes(24).toString('base64url');
  const workspaceId = randomBytes(8).toString('hex');
  try {
    // Targets with 256 KiB buffers and an echo without Nagle, so the paths are the limit, never the target.
    const targets = await createContainer(docker, image, deploymentId, ['sh', '-c', [
      `socat -b 262144 TCP-LISTEN:${TARGET_PORTS.echo},fork,reuseaddr,nodelay PIPE &`,
      `socat -b 262144 -u TCP-LISTEN:${TARGET_PORTS.sink},fork,reuseaddr OPEN:/dev/null &`,
      `exec socat -b 262144 -U TCP-LISTEN:${TARGET_PORTS.source},fork,reuseaddr OPEN:/dev/zero 2>/dev/null`,
    ].join(' ')], Object.values(TARGET_PORTS));
    await targets.start();
    const targetIp = (await targets.inspect()).NetworkSettings.Networks.bridge.IPAddress;
    const targetNames = Object.keys(TARGET_PORTS) as Target[];
    const ports = async (make: (target: Target) => Promise<Docker.Container>, port: (target: Target) => number) => {
      const entries: Array<[Target, number]> = [];
      for (const target of targetNames) {
        const container = await make(target);
        entries.push([target, await publishedPort(container, port(target))]);
      }
      return Object.fromEntries(entries) as Record<Target, number>;
    };
    const direct: Path = { name: 'direct (Docker proxy only)', ports: await ports(async () => targets, (t) => TARGET_PORTS[t]) };
    const relay: Path = {
      name: 'workspace-rdp-relay',
      ports: await ports(async (target) => {
        const container = await createContainer(docker, image, deploymentId, ['/usr/local/bin/workspace-rdp-relay'], [RELAY_PORT]);
        await writeRelayConnection(container, targetIp, TARGET_PORTS[target], secret);
        await container.start();
        return container;
      }, () => RELAY_PORT),
      // A fresh credential per connection, as each get_rdp_client_connection_info call gives one.
      preamble: () => preconnectionPdu(mintRelayCredential(secret, workspaceId, new Date(Date.now() + 3600_000))),
    };
    const socat: Path = {
      name: 'socat -b 65536, nodelay (baseline)',
      ports: await ports(async (target) => {
        const container = await createContainer(docker, image, deploymentId, ['socat', '-b', '65536', `TCP-LISTEN:${RELAY_PORT},fork,reuseaddr,nodelay`, `TCP:${targetIp}:${TARGET_PORTS[target]},nodelay`], [RELAY_PORT]);
        await container.start();
        return container;
      }, () => RELAY_PORT),
    };
    const paths = [direct, relay, socat];
    for (const path of paths) {
      await until(`${path.name} answering`, async () => ((await setupTime(path)) > 0 ? true : undefined), 30_000);
    }

    const results = new Map<string, Figures[]>(paths.map((p) => [p.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, figures] of await measureRound(paths, round)) results.get(name)!.push(figures);
    }

    const of = (path: Path, figure: keyof Figures) => median(results.get(path.name)!.map((f) => f[figure]));
    const ratio = (figure: keyof Figures) => median(results.get(relay.name)!.map((f, round) => f[figure] / results.get(socat.name)![round][figure]));
    console.log(`\nRDP relay vs socat: ${ROUNDS} rounds, paths take turns; each round ${BULK_MIB} MiB down (from /dev/zero) and up (to a sink), ` +
      `${ROUND_TRIPS} ${MESSAGE_BYTES}-byte echo round trips, as many bursts of ${BURST_MESSAGES} such messages, ${SETUPS} connection setups (connect + PDU + first echoed byte) in ${LATENCY_BLOCKS} alternating blocks; medians over rounds, ratios the median of per-round ratios`);
    const stalls = (path: Path) => results.get(path.name)!.reduce((sum, f) => sum + f.burstStalls, 0);
    for (const path of paths) {
      console.log(`${path.name.padEnd(36)} download ${of(path, 'downloadMiBps').toFixed(0).padStart(6)} MiB/s   upload ${of(path, 'uploadMiBps').toFixed(0).padStart(6)} MiB/s   ` +
        `round trip p50 ${(of(path, 'rttP50Us') / 1000).toFixed(3)} ms  p99 ${(of(path, 'rttP99Us') / 1000).toFixed(3)} ms   ` +
        `burst p50 ${(of(path, 'burstP50Us') / 1000).toFixed(3)} ms  p99 ${(of(path, 'burstP99Us') / 1000).toFixed(3)} ms   ` +
        `bursts over ${STALL_US / 1000} ms ${String(stalls(path)).padStart(3)} of ${ROUNDS * LATENCY_BLOCKS * Math.ceil(ROUND_TRIPS / LATENCY_BLOCKS)}   setup p50 ${(of(path, 'setupP50Us') / 1000).toFixed(3)} ms`);
    }
    const lines: Array<[string, keyof Figures, boolean]> = [
      ['download throughput', 'downloadMiBps', true], ['upload throughput', 'uploadMiBps', true],
      ['round trip p50', 'rttP50Us', false], ['round trip p99', 'rttP99Us', false],
      ['burst round trip p50', 'burstP50Us', false], ['burst round trip p99', 'burstP99Us', false], ['connection setup p50', 'setupP50Us', false],
    ];
    for (const [label, figure, higherIsBetter] of lines) {
      const r = ratio(figure);
      console.log(`relay / socat ${label.padEnd(22)} ${r.toFixed(3)}× (${higherIsBetter ? 'higher' : 'lower'} is better): ${verdict(r, higherIsBetter)}`);
    }
  } finally {
    removeContainers(deploymentId);
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
