/**
 * Issue 19, hole 6: the desktop's audio ports are published on the host like VNC's, so, like VNC, they take only a
 * client holding the workspace's credential. The attack: a raw TCP connection to the published sound port got Ogg
 * Opus at once, and the microphone port played whatever PCM it was sent. Now a connection without the credential
 * (nothing, a wrong secret, the 8 characters VNC checks, or PCM straight away) gets no byte and is closed, and its
 * PCM never reaches the workspace's microphone; the gateway, which presents the credential, still streams.
 */
import { connect, Socket } from 'node:net';
import { DataSource } from 'typeorm';
import { WebSocket } from 'ws';
import { randomSecret } from '@ws/common';
import { GroupsService } from '@ws/groups';
import { Workspace } from '@ws/workspaces';
import { dockerExec, registerAudioDesktop, rms, sinePcm, waitForSound } from './audio-fixtures';
import { TestApi, waitFor } from './harness';
import { streamCookie, waitForRunningWorkspace } from './fixtures';

/** Louder than this (RMS of s16le, 0..32767) is sound; nothing played into the microphone records as zeros. */
const SOUND_RMS = 1000;
const SILENCE_RMS = 100;
/** The image's bridges wait 5 s for the credential; well beyond that, a connection still open is a failure. */
const CLOSE_WITHIN_MS = 30_000;

interface RawOutcome {
  /** Every byte the port sent. */
  received: Buffer;
  closed: boolean;
}

/**
 * Connects to a published port of the workspace as anyone on the network could, writes `send` (if any), and
 * collects what arrives until the port closes the connection, or until `untilMs` or `endWhen` (then answers closed: false).
 */
function rawConnection(port: number, send: Buffer | null, untilMs: number, endWhen?: Promise<unknown>): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket: Socket = connect({ host: '127.0.0.1', port });
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ received: Buffer.concat(chunks), closed });
    };
    const timer = setTimeout(() => done(false), untilMs);
    void endWhen?.then(() => done(false), () => done(false));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // A write the port no longer reads resets the connection: that is a close as well.
    socket.on('error', () => undefined);
    socket.on('close', () => done(true));
    socket.once('connect', () => {
      if (send) socket.write(send);
    });
  });
}

describe('audio ports: no sound and no microphone without the workspace\'s credential (issue 19, hole 6)', () => {
  let api: TestApi;
  let base: string;
  let workspaceId: string;
  let containerId: string;
  let cookie: string;
  let ports: { audio: number; audioInput: number };
  let credential: string;

  beforeAll(async () => {
    api = await TestApi.start({}, { worker: true });
    base = await api.listen();
    const image = await registerAudioDesktop(api);
    const key = await api.key(['Users Auth Session', 'User']);
    const admin = await api.key(['Global Admin']);
    const userId = (await api.call('create_user', admin, { target_user: { username: 'audio-auth-owner' } })).body.user.user_id;
    workspaceId = (await api.call('request_workspace', key, { user_id: userId, image_id: image.id })).body.workspace_id;
    const running = await waitForRunningWorkspace(api, key, workspaceId, userId);
    containerId = running.workspace.container_id;
    cookie = await streamCookie(api.app, running.workspace_url.split('/').pop(), { workspace_id: workspaceId });
    await api.app.get(GroupsService).updateSettings('All Users', { clientSettings: { allow_workspace_audio: true } });
    const row = await api.app.get(DataSource).getRepository(Workspace).findOneByOrFail({ id: workspaceId });
    ports = { audio: row.hostPorts.audio, audioInput: row.hostPorts.audio_input };
    credential = row.token;
    expect(ports.audio).toBeGreaterThan(0);
    expect(ports.audioInput).toBeGreaterThan(0);
    // The bridges listen once the sound server answers.
    await waitForSound(containerId);
  }, 300_000);
  afterAll(async () => api?.close());

  it('the sound port sends nothing to a connection that sends nothing, and closes it', async () => {
    const outcome = await rawConnection(ports.audio, null, CLOSE_WITHIN_MS);
    expect(outcome).toEqual({ received: Buffer.alloc(0), closed: true });
  });

  it('the sound port sends nothing to a wrong credential (another secret, the 8 characters VNC checks, an empty line), and closes it', async () => {
    for (const wrong of [randomSecret(32), credential.slice(0, 8), '', `${credential}x`]) {
      const outcome = await rawConnection(ports.audio, Buffer.from(`${wrong}\n`), CLOSE_WITHIN_MS);
      expect(outcome).toEqual({ received: Buffer.alloc(0), closed: true });
    }
  });

  it('the microphone port answers nothing to a connection without the credential, and closes it', async () => {
    for (const send of [null, Buffer.from(`${randomSecret(32)}\n`)]) {
      const outcome = await rawConnection(ports.audioInput, send, CLOSE_WITHIN_MS);
      expect(outcome).toEqual({ received: Buffer.alloc(0), closed: true });
    }
  });

  /**
   * Records the workspace's microphone (its default source) for 4 s while `send` goes to the raw microphone port;
   * answers what the connection got (until the port closed it, or until the recording ended when `accepted`) and
   * the recording's RMS.
   */
  async function recordWhileSending(send: Buffer, accepted: boolean): Promise<{ outcome: RawOutcome; level: number }> {
    const file = `/tmp/mic-${randomSecret(4)}.raw`;
    const recording = dockerExec(containerId, `timeout 4 parec --format=s16le --rate=48000 --channels=1 --raw --latency-msec=20 > ${file}; wc -c < ${file}`);
    await waitFor('the recorder', async () => ((await dockerExec(containerId, 'pactl list short source-outputs')).toString().trim() ? true : undefined), 15_000, 100);
    const [outcome, out] = await Promise.all([rawConnection(ports.audioInput, send, CLOSE_WITHIN_MS, accepted ? recording : undefined), recording]);
    expect(Number(out.toString().trim())).toBeGreaterThan(48_000);
    return { outcome, level: rms(await dockerExec(containerId, `cat ${file}; rm -f ${file}`)) };
  }

  it('PCM sent to the microphone port without the credential (straight away, or after a wrong one) never reaches the microphone; with it, it does', async () => {
    const tone = sinePcm(4);
    for (const send of [tone, Buffer.concat([Buffer.from(`${randomSecret(32)}\n`), tone])]) {
      const { outcome, level } = await recordWhileSending(send, false);
      expect(outcome).toEqual({ received: Buffer.alloc(0), closed: true });
      expect(level).toBeLessThan(SILENCE_RMS);
    }
    // Positive control: the same recording hears the tone sent after the right credential.
    const { outcome, level } = await recordWhileSending(Buffer.concat([Buffer.from(`${credential}\n`), tone]), true);
    expect(outcome.received.toString('latin1')).toBe('OK\n');
    expect(level).toBeGreaterThan(SOUND_RMS);
  });

  it('with the workspace\'s credential the sound port streams Ogg Opus right after OK', async () => {
    const chunks: Buffer[] = [];
    const socket = connect({ host: '127.0.0.1', port: ports.audio });
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.once('connect', () => socket.write(`${credential}\n`));
    try {
      const received = await waitFor('the first Ogg page', async () => {
        const all = Buffer.concat(chunks);
        return all.length >= 7 ? all : undefined;
      }, CLOSE_WITHIN_MS, 50);
      expect(received.subarray(0, 7).toString('latin1')).toBe('OK\nOggS');
    } finally {
      socket.destroy();
    }
  });

  it('the gateway presents the credential: its audio route streams Opus packets to the owner', async () => {
    const ws = new WebSocket(`${base.replace('http', 'ws')}/api/stream/${workspaceId}/audio`, { headers: { cookie } });
    const messages: Array<{ binary: boolean; data: Buffer }> = [];
    ws.on('message', (data: Buffer, binary: boolean) => messages.push({ binary, data }));
    ws.on('error', () => undefined);
    try {
      await waitFor('25 audio packets', async () => {
        if (ws.readyState === WebSocket.CLOSED) throw new Error('the audio stream closed');
        return messages.filter((m) => m.binary).length >= 25 ? true : undefined;
      }, CLOSE_WITHIN_MS, 50);
      expect(JSON.parse(messages[0].data.toString())).toEqual({ codec: 'opus', sample_rate: 48000, channels: 2 });
    } finally {
      ws.close();
    }
  });
});
