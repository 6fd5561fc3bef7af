/**
 * Workspace audio at the protocol level (no browser): the reference desktop's sound reaches a websocket client
 * through the gateway as Opus packets, a client's microphone PCM is recorded inside the workspace, and the routes
 * are refused when the workspace's settings forbid them and for a view-only joiner's microphone.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { GroupsService } from '@ws/groups';
import { decodeOpusPackets, dockerExec, listensOn, playTone, registerAudioDesktop, rms, sinePcm, SOUND_PORT, stopTone, waitForSound } from './audio-fixtures';
import { TestApi, TestKey, waitFor } from './harness';
import { streamCookie, waitForRunningWorkspace } from './fixtures';

/** Louder than this (RMS of s16le, 0..32767) is sound; silence decodes to 0, Opus noise to a few units. */
const SOUND_RMS = 1000;
const SILENCE_RMS = 100;

interface Refusal {
  status: number;
  body: { error_message?: string };
}

interface Opened {
  ws: WebSocket;
  /** Binary messages and the first text message, collected from the moment of the upgrade (the format comes first). */
  received: { format: unknown; packets: Buffer[] };
}

/** Opens a websocket; answers it once open, or the refusal (status and JSON body) of the upgrade. */
function openSocket(url: string, headers: Record<string, string>): Promise<Opened | Refusal> {
  const ws = new WebSocket(url, { headers });
  const received: Opened['received'] = { format: null, packets: [] };
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (isBinary) received.packets.push(data);
    else received.format ??= JSON.parse(data.toString());
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, received }));
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : {} }));
    });
    ws.once('error', (err) => reject(err));
  });
}

async function opened(url: string, headers: Record<string, string>): Promise<Opened> {
  const result = await openSocket(url, headers);
  if ('status' in result) throw new Error(`refused: ${JSON.stringify(result)}`);
  return result;
}

async function refusalOf(url: string, headers: Record<string, string>): Promise<Refusal> {
  const result = await openSocket(url, headers);
  if ('status' in result) return result;
  result.ws.close();
  return { status: 101, body: {} };
}

/** Waits (bounded) until `count` Opus packets have arrived; answers the first `count`. */
async function packetsOf(stream: Opened, count: number, timeoutMs: number): Promise<Buffer[]> {
  await waitFor(`${count} audio packets`, async () => {
    if (stream.ws.readyState !== WebSocket.OPEN && stream.received.packets.length < count) throw new Error(`the audio stream closed after ${stream.received.packets.length} packets`);
    return stream.received.packets.length >= count ? true : undefined;
  }, timeoutMs, 50);
  return stream.received.packets.slice(0, count);
}

describe('workspace audio: sound out and microphone in through the gateway', () => {
  let api: TestApi;
  let base: string;
  let key: TestKey;
  let workspaceId: string;
  let containerId: string;
  let ownerCookie: string;
  let joinerCookie: string;

  const settings = (clientSettings: Record<string, boolean>) => api.app.get(GroupsService).updateSettings('All Users', { clientSettings });
  const url = (kind: 'audio' | 'audio_input') => `${base.replace('http', 'ws')}/api/stream/${workspaceId}/${kind}`;

  beforeAll(async () => {
    api = await TestApi.start({}, { worker: true });
    base = await api.listen();
    const image = await registerAudioDesktop(api);
    key = await api.key(['Users Auth Session', 'User']);
    const admin = await api.key(['Global Admin']);
    const ownerId = (await api.call('create_user', admin, { target_user: { username: 'audio-owner' } })).body.user.user_id;
    const joinerId = (await api.call('create_user', admin, { target_user: { username: 'audio-joiner' } })).body.user.user_id;
    const requested = (await api.call('request_workspace', key, { user_id: ownerId, image_id: image.id, enable_sharing: true })).body;
    workspaceId = requested.workspace_id;
    const running = await waitForRunningWorkspace(api, key, workspaceId, ownerId);
    containerId = running.workspace.container_id;
    expect(running.workspace.port_map).toMatchObject({
      audio: { port: 4901, path: `api/stream/${workspaceId}/audio` },
      audio_input: { port: 4902, path: `api/stream/${workspaceId}/audio_input` },
    });
    ownerCookie = await streamCookie(api.app, running.workspace_url.split('/').pop(), { workspace_id: workspaceId });
    const joined = await api.call('join_workspace', key, { share_id: requested.share_id, user_id: joinerId });
    expect(joined.status).toBe(200);
    joinerCookie = await streamCookie(api.app, joined.body.session_token, { share_id: requested.share_id });
    // The sound starts with the desktop; wait until it answers and its bridges listen before the tests use it.
    await waitForSound(containerId);
  }, 300_000);
  afterAll(async () => api?.close());
  afterEach(async () => settings({ allow_workspace_audio: true, allow_workspace_microphone: false }));

  it('a tone played in the workspace reaches the client as Opus packets that decode to sound; silence before it decodes to silence', async () => {
    const silent = await opened(url('audio'), { cookie: ownerCookie });
    const quiet = await packetsOf(silent, 50, 30_000);
    silent.ws.close();
    expect(silent.received.format).toEqual({ codec: 'opus', sample_rate: 48000, channels: 2 });
    expect(rms(await decodeOpusPackets(quiet, join(tmpdir(), `audio-quiet-${workspaceId}.ogg`)))).toBeLessThan(SILENCE_RMS);

    const tone = await playTone(containerId);
    try {
      const stream = await opened(url('audio'), { cookie: ownerCookie });
      // 2 s of 20 ms packets; the first ones may still be the encoder's start.
      const packets = await packetsOf(stream, 100, 30_000);
      stream.ws.close();
      const pcm = await decodeOpusPackets(packets.slice(25), join(tmpdir(), `audio-tone-${workspaceId}.ogg`));
      expect(pcm.length).toBeGreaterThan(48_000);
      expect(rms(pcm)).toBeGreaterThan(SOUND_RMS);
    } finally {
      await stopTone(containerId, tone);
    }
  });

  it('microphone PCM sent by the owner is recorded non-silent from the workspace\'s default source', async () => {
    await settings({ allow_workspace_microphone: true });
    const { ws } = await opened(url('audio_input'), { cookie: ownerCookie });
    // Records the default source (what any program in the workspace hears as its microphone) for 3 s.
    const recording = dockerExec(containerId, 'timeout 3 parec --format=s16le --rate=48000 --channels=1 --raw --latency-msec=20 > /tmp/mic.raw; wc -c < /tmp/mic.raw');
    await waitFor('the recorder', async () => ((await dockerExec(containerId, 'pactl list short source-outputs')).toString().trim() ? true : undefined), 15_000, 100);
    // Sent in real time, 20 ms per message, as a browser does, until the recording is done (bounded by its timeout).
    const tone = sinePcm(20);
    let sent = 0;
    let recorded = false;
    const pacer = setInterval(() => {
      if (recorded || sent >= tone.length) return;
      ws.send(tone.subarray(sent, sent + 1920));
      sent += 1920;
    }, 20);
    try {
      const bytes = Number((await recording).toString().trim());
      recorded = true;
      expect(bytes).toBeGreaterThan(48_000);
    } finally {
      clearInterval(pacer);
      ws.close();
    }
    const pcm = await dockerExec(containerId, 'cat /tmp/mic.raw');
    expect(rms(pcm)).toBeGreaterThan(SOUND_RMS);
  });

  it('refuses the audio route when allow_workspace_audio is off, for the owner and for a view-only joiner; a joiner may listen when it is on', async () => {
    expect((await refusalOf(url('audio'), { cookie: joinerCookie })).status).toBe(101);
    await settings({ allow_workspace_audio: false });
    for (const cookie of [ownerCookie, joinerCookie]) {
      expect(await refusalOf(url('audio'), { cookie })).toEqual({
        status: 403, body: { error_message: 'Audio is not allowed for this workspace (allow_workspace_audio is off)' },
      });
    }
  });

  it('refuses the microphone when allow_workspace_microphone is off, and always for a view-only joiner', async () => {
    expect(await refusalOf(url('audio_input'), { cookie: ownerCookie })).toEqual({
      status: 403, body: { error_message: 'The microphone is not allowed for this workspace (allow_workspace_microphone is off)' },
    });
    await settings({ allow_workspace_microphone: true });
    expect((await refusalOf(url('audio_input'), { cookie: ownerCookie })).status).toBe(101);
    expect(await refusalOf(url('audio_input'), { cookie: joinerCookie })).toEqual({
      status: 403, body: { error_message: 'A view-only session cannot send microphone input' },
    });
  });

  it('a sound bridge not listening yet (the desktop starts its sound after its first window) is waited for, not answered 502', async () => {
    // The speaker's bridge goes away, and comes back 2 s later, as on a desktop whose sound is still starting.
    // (The pattern's brackets keep pkill from matching the shell running it.)
    await dockerExec(containerId, `pkill -f 'TCP-LISTEN:${SOUND_PORT}[,]' && while ${listensOn(SOUND_PORT)}; do sleep 0.05; done`);
    await dockerExec(containerId, `setsid bash -c "sleep 2; exec socat TCP-LISTEN:${SOUND_PORT},reuseaddr,fork,max-children=4 EXEC:/usr/local/bin/workspace-audio-out" </dev/null >/dev/null 2>&1 &`);
    // Until the bridge is back, Docker's port proxy accepts and hangs up (nothing listens behind it): a gateway that
    // took that for a refusal would answer 502 here.
    const stream = await opened(url('audio'), { cookie: ownerCookie });
    try {
      await packetsOf(stream, 10, 30_000);
    } finally {
      stream.ws.close();
    }
  });

  it('admits like the VNC stream: no cookie is 401, another site\'s page is 403', async () => {
    expect((await refusalOf(url('audio'), {})).status).toBe(401);
    expect((await refusalOf(url('audio'), { cookie: ownerCookie, origin: 'https://evil.example' })).status).toBe(403);
    expect((await refusalOf(url('audio'), { cookie: ownerCookie, origin: base })).status).toBe(101);
  });
});
