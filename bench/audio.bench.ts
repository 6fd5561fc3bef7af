/**
 * CPU cost of one workspace audio stream: at the gateway (this process's CPU time per second of audio streamed,
 * the api and a websocket client receiving the packets) and in the workspace (its container's cgroup CPU time:
 * PulseAudio, parec and the GStreamer Opus encoder), each against the same span with no stream as the baseline.
 * A tone plays in the workspace in both spans, so the difference is the stream's alone.
 */
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { get } from 'node:http';
import { WebSocket } from 'ws';
import { desktopImage, post, registerLocalDesktop, startBenchApi, streamCookie, until, untilRunning } from './harness';

const WINDOW_MS = 10_000;

/** The container's total CPU time (ms) from the Docker engine's stats (its cgroup's usage). */
function containerCpuMs(containerId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = get({ socketPath: '/var/run/docker.sock', path: `/containers/${containerId}/stats?stream=false&one-shot=true`, timeout: 30_000 }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => {
        const total = (JSON.parse(body) as { cpu_stats?: { cpu_usage?: { total_usage?: number } } }).cpu_stats?.cpu_usage?.total_usage;
        if (typeof total === 'number') resolve(total / 1e6);
        else reject(new Error(`no CPU usage in the stats of ${containerId}`));
      });
    });
    req.on('timeout', () => req.destroy(new Error('docker stats timed out')));
    req.on('error', reject);
  });
}

function processCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** CPU time of this process and of the container over one window (the window is the measurement). */
async function measure(containerId: string): Promise<{ gatewayMs: number; workspaceMs: number; wallMs: number }> {
  const c0 = await containerCpuMs(containerId);
  const [p0, t0] = [processCpuMs(), performance.now()];
  await new Promise((r) => setTimeout(r, WINDOW_MS));
  const [p1, t1] = [processCpuMs(), performance.now()];
  const c1 = await containerCpuMs(containerId);
  return { gatewayMs: p1 - p0, workspaceMs: c1 - c0, wallMs: t1 - t0 };
}

async function main(): Promise<void> {
  const image = desktopImage();
  const bench = await startBenchApi({ worker: true, kind: 'audio' });
  const { base } = bench;
  try {
    const { image: img, auth } = await registerLocalDesktop(bench.api, {
      name: image, friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600,
      portMap: { vnc: '5900/tcp', audio: '4901/tcp', audio_input: '4902/tcp' },
    });
    const user = (await post(base, 'create_user', { ...auth, target_user: { username: 'audio-bench' } })).user as { user_id: string };
    const requested = await post(base, 'request_workspace', { ...auth, user_id: user.user_id, image_id: img.id });
    const workspaceId = requested.workspace_id as string;
    const running = await untilRunning(base, { ...auth, workspace_id: workspaceId, user_id: user.user_id }, 120_000);
    const containerId = (running.workspace as { container_id: string }).container_id;
    const cookie = await streamCookie(base, (running.workspace_url as string).split('/').pop() as string, workspaceId);
    await until('the sound server', async () => (execFileSync('docker', ['exec', containerId, 'pactl', 'info']).length ? true : undefined), 30_000);
    execFileSync('docker', ['exec', containerId, 'pactl', 'load-module', 'module-sine', 'frequency=440']);

    const idle = await measure(containerId);

    const ws = new WebSocket(`${base.replace('http', 'ws')}/api/stream/${workspaceId}/audio`, { headers: { cookie } });
    let packets = 0;
    let bytes = 0;
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary) return;
      packets++;
      bytes += data.length;
    });
    await until('the first audio packet', async () => (packets > 0 ? true : undefined), 30_000);
    const [startPackets, startBytes] = [packets, bytes];
    const streaming = await measure(containerId);
    const audioSeconds = ((packets - startPackets) * 20) / 1000;
    const kbps = ((bytes - startBytes) * 8) / (streaming.wallMs / 1000) / 1000;
    ws.close();

    const perAudioSecond = (ms: number) => ms / audioSeconds;
    const gatewayExtra = streaming.gatewayMs - idle.gatewayMs;
    const workspaceExtra = streaming.workspaceMs - idle.workspaceMs;
    console.log(`\none audio stream (${image}, Opus 48 kHz stereo 64 kbit/s, ${WINDOW_MS / 1000} s windows; baseline: the same window without a stream)`);
    console.log(`streamed: ${audioSeconds.toFixed(1)} s of audio in ${(streaming.wallMs / 1000).toFixed(1)} s (${(packets - startPackets)} packets, ${kbps.toFixed(1)} kbit/s of Opus payload)`);
    console.log(`gateway process (api + the receiving client): ${(streaming.gatewayMs / (streaming.wallMs / 1000)).toFixed(1)} ms CPU/s streaming vs ${(idle.gatewayMs / (idle.wallMs / 1000)).toFixed(1)} ms CPU/s idle → ${perAudioSecond(gatewayExtra).toFixed(2)} ms CPU per second of audio (${(gatewayExtra / streaming.wallMs * 100).toFixed(2)} % of a core)`);
    console.log(`workspace container: ${(streaming.workspaceMs / (streaming.wallMs / 1000)).toFixed(1)} ms CPU/s streaming vs ${(idle.workspaceMs / (idle.wallMs / 1000)).toFixed(1)} ms CPU/s idle → ${perAudioSecond(workspaceExtra).toFixed(2)} ms CPU per second of audio (${(workspaceExtra / streaming.wallMs * 100).toFixed(2)} % of a core)`);
  } finally {
    await bench.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
