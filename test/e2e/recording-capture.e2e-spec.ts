import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { WebSocket } from 'ws';
import { DataSource } from 'typeorm';
import { AppConfig } from '@ws/common';
import { ImagesService } from '@ws/images';
import { JOB_QUEUE, jobId, JobProducer } from '@ws/queue';
import {
  CaptureRecord, CaptureRecordKind, CAPTURE_MAGIC, readCaptureRecords, recordHeader, SessionRecording, CaptureRows, capturePrefixOf, RecordingCapture, segmentFileName, ThreadedUploader, writeSpoolOwner,
} from '@ws/recordings';
import { ObjectStore, openStore, S3ObjectStore } from '@ws/storage';
import { runCli as cli, useApiForCli } from './cli-runner';
import { desktopImage, TestApi, TestKey, waitFor } from './harness';
import { closeStream, openStream, registerLocalServer, waitForRunningWorkspace } from './fixtures';
import { S3Server, startS3Server } from './s3-server';
import { WORKER_JS } from './worker-processes';

const dashed = (hex: string) => hex.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');

async function storedKeys(store: ObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of store.list(prefix)) keys.push(entry.key);
  return keys.sort();
}

async function recordsOf(store: ObjectStore, keys: string[]): Promise<CaptureRecord[]> {
  const records: CaptureRecord[] = [];
  async function* segments() {
    for (const key of keys) yield await store.get(key);
  }
  for await (const record of readCaptureRecords(segments())) records.push({ ...record, payload: Buffer.from(record.payload) });
  return records;
}

describe.each(['file', 's3'] as const)('session recording capture through the gateway (%s store)', (kind) => {
  let scratch: string;
  let s3: S3Server | null = null;
  let api: TestApi;
  let base: string;
  let store: ObjectStore;
  let key: TestKey;
  let admin: TestKey;
  let userId: string;
  let workspace: { workspace_id: string; share_id: string };
  let ownerJwt: string;
  let restoreEnv: () => Promise<void> = async () => undefined;

  const rowsOf = (workspaceId: string) => api.app.get(DataSource).getRepository(SessionRecording).find({ where: { workspaceId: dashed(workspaceId) }, order: { startedAt: 'ASC' } });
  const recordSessions = async (value: 'true' | 'false' | 'none') => expect(await cli('group', 'set', 'All Users', '--record-sessions', value)).toContain(`record_sessions=${value}`);
  const convertJob = (id: string) => api.app.get(JobProducer).queue(JOB_QUEUE['recording.convert']).getJob(jobId.convertRecording(id));

  /** Streams with screen activity for a moment, closes, and answers the connection's recording once it left `recording`. */
  async function recordedSession(colours: string[]): Promise<SessionRecording> {
    const before = new Set((await rowsOf(workspace.workspace_id)).map((r) => r.id));
    const stream = await openStream(base, workspace.workspace_id, ownerJwt);
    await stream.rfb.captureFrame({ timeoutMs: 15_000 });
    for (const [i, colour] of colours.entries()) {
      stream.rfb.sendPointerEvent(100 + i, 120);
      await api.call('exec_command_workspace', admin, { workspace_id: workspace.workspace_id, user_id: userId, exec_config: { cmd: `DISPLAY=:1 xsetroot -solid '${colour}'` }, wait: true });
      await stream.rfb.update({ incremental: false, timeoutMs: 5000 });
    }
    await closeStream(stream);
    return waitFor('the recording to be finalized', async () => {
      const row = (await rowsOf(workspace.workspace_id)).find((r) => !before.has(r.id));
      return row && row.status !== 'recording' ? row : undefined;
    }, 60_000, 100);
  }

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'ws-recording-capture-'));
    const overrides: Partial<AppConfig> = { RECORDING_SPOOL_DIR: join(scratch, 'spool') };
    if (kind === 's3') {
      s3 = await startS3Server(join(scratch, 's3'), 'ws-recordings');
      Object.assign(overrides, { STORAGE_URL: `s3://${s3.bucket}/capture-e2e`, ...s3.settings });
    } else {
      overrides.STORAGE_URL = `file://${join(scratch, 'store')}`;
    }
    api = await TestApi.start(overrides, { worker: true });
    base = await api.listen();
    store = openStore(api.config.STORAGE_URL, api.config);
    restoreEnv = useApiForCli(api);
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600 });
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    userId = (await api.call('create_user', admin, { target_user: { username: `recorded-${kind}` } })).body.user.user_id;
    const requested = (await api.call('request_workspace', key, { user_id: userId, image_id: image.id, enable_sharing: true })).body;
    const running = await waitForRunningWorkspace(api, key, requested.workspace_id, userId);
    workspace = { workspace_id: requested.workspace_id, share_id: requested.share_id };
    ownerJwt = running.workspace_url.split('/').pop();
    // Without a worker the conversion jobs stay queued: the raw capture stays in the store for the assertions.
    await api.stopWorker();
  }, 240_000);

  afterAll(async () => {
    await restoreEnv();
    if (store instanceof S3ObjectStore) store.close();
    await api?.close();
    await s3?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('records an owner connection: row captured, segments stored from ServerInit to End, conversion enqueued', async () => {
    await recordSessions('true');
    const row = await recordedSession(['#aa3300', '#0033aa']);
    expect(row).toMatchObject({ status: 'captured', userId: dashed(userId), storageUrl: api.config.STORAGE_URL, capturePrefix: capturePrefixOf(dashed(workspace.workspace_id), row.id), error: null });
    expect(row.clientId).toMatch(/^[0-9a-f]{8}$/);
    expect(row.endedAt?.getTime()).toBeGreaterThan(row.startedAt.getTime());
    expect(row.segmentCount).toBeGreaterThanOrEqual(1);

    const keys = await storedKeys(store, row.capturePrefix);
    expect(keys).toEqual(Array.from({ length: row.segmentCount }, (_, i) => `${row.capturePrefix}/${segmentFileName(i)}`));
    const records = await recordsOf(store, keys);
    const first = records[0];
    expect(first.kind).toBe(CaptureRecordKind.Server);
    expect([first.payload.readUInt16BE(0), first.payload.readUInt16BE(2)]).toEqual([800, 600]);
    expect(records.filter((r) => r.kind === CaptureRecordKind.PixelFormat).map((r) => r.payload.length)).toContain(16);
    expect(records[records.length - 1].kind).toBe(CaptureRecordKind.End);
    expect(records.filter((r) => r.kind === CaptureRecordKind.End)).toHaveLength(1);
    // Where the owner moved the pointer (recordedSession: one position per colour), and nothing else of their input.
    expect(records.filter((r) => r.kind === CaptureRecordKind.Pointer).map((r) => [r.payload.readUInt16BE(0), r.payload.readUInt16BE(2)])).toEqual([[100, 120], [101, 120]]);
    for (let i = 1; i < records.length; i++) expect(records[i].at).toBeGreaterThanOrEqual(records[i - 1].at);
    // Server bytes well beyond ServerInit: the frames the browser received.
    expect(records.filter((r) => r.kind === CaptureRecordKind.Server).reduce((sum, r) => sum + r.payload.length, 0)).toBeGreaterThan(100_000);
    expect(row.captureBytes).toBe(records.reduce((sum, r) => sum + 9 + r.payload.length, 0) + keys.length * CAPTURE_MAGIC.length);

    expect(await convertJob(row.id)).toMatchObject({ name: 'recording.convert', data: { recordingId: row.id } });
    expect(readdirSync(api.config.RECORDING_SPOOL_DIR)).toEqual([]);
  }, 120_000);

  it('cuts a long capture into several segments, in order', async () => {
    const capture = api.app.get(RecordingCapture);
    const limits = capture.limits;
    // Many small segments queue up for the store: the test is about rotation, not about a store that lags.
    capture.limits = { ...limits, segmentBytes: 256 * 1024, maxPendingSegments: 10_000 };
    try {
      await recordSessions('true');
      const row = await recordedSession(['#112233', '#445566', '#778899']);
      expect(row).toMatchObject({ status: 'captured', error: null });
      expect(row.segmentCount).toBeGreaterThan(2);
      const keys = await storedKeys(store, row.capturePrefix);
      expect(keys).toEqual(Array.from({ length: row.segmentCount }, (_, i) => `${row.capturePrefix}/${segmentFileName(i)}`));
      const records = await recordsOf(store, keys);
      expect(records[0].kind).toBe(CaptureRecordKind.Server);
      expect(records[records.length - 1].kind).toBe(CaptureRecordKind.End);
      for (let i = 1; i < records.length; i++) expect(records[i].at).toBeGreaterThanOrEqual(records[i - 1].at);
    } finally {
      capture.limits = limits;
    }
  }, 120_000);

  it('a spool that cannot keep up stops the recording, not the stream', async () => {
    const capture = api.app.get(RecordingCapture);
    const limits = capture.limits;
    capture.limits = { ...limits, maxSpoolBacklogBytes: 0 };
    try {
      await recordSessions('true');
      const before = new Set((await rowsOf(workspace.workspace_id)).map((r) => r.id));
      const stream = await openStream(base, workspace.workspace_id, ownerJwt);
      await stream.rfb.captureFrame({ timeoutMs: 15_000 });
      const row = await waitFor('the recording to stop', async () => {
        const found = (await rowsOf(workspace.workspace_id)).find((r) => !before.has(r.id));
        return found && found.status !== 'recording' ? found : undefined;
      }, 30_000, 100);
      expect(row).toMatchObject({ status: 'failed', segmentCount: 0, error: expect.stringMatching(/^the recording stopped early: the spool disk did not keep up/) });
      // The browser's stream goes on.
      await api.call('exec_command_workspace', admin, { workspace_id: workspace.workspace_id, user_id: userId, exec_config: { cmd: "DISPLAY=:1 xsetroot -solid '#335577'" }, wait: true });
      expect((await stream.rfb.update({ incremental: false, timeoutMs: 5000 })).rects.length).toBeGreaterThan(0);
      expect(stream.ws.readyState).toBe(WebSocket.OPEN);
      await closeStream(stream);
      expect(await storedKeys(store, row.capturePrefix)).toEqual([]);
    } finally {
      capture.limits = limits;
    }
  }, 120_000);

  it('an api that shuts down finalizes its open recordings', async () => {
    await recordSessions('true');
    const before = new Set((await rowsOf(workspace.workspace_id)).map((r) => r.id));
    const replica = await api.replica();
    let closed = false;
    try {
      await replica.listen(0, '127.0.0.1');
      const replicaBase = `http://127.0.0.1:${(replica.getHttpServer().address() as { port: number }).port}`;
      const stream = await openStream(replicaBase, workspace.workspace_id, ownerJwt);
      await stream.rfb.captureFrame({ timeoutMs: 15_000 });
      const ended = new Promise<void>((resolve) => stream.ws.once('close', () => resolve()));
      await replica.close();
      closed = true;
      await ended;
    } finally {
      if (!closed) await replica.close();
    }
    // Finalized before close() returned: no waiting.
    const row = (await rowsOf(workspace.workspace_id)).find((r) => !before.has(r.id));
    expect(row).toMatchObject({ status: 'captured', error: null });
    const records = await recordsOf(store, await storedKeys(store, (row as SessionRecording).capturePrefix));
    expect(records[0].kind).toBe(CaptureRecordKind.Server);
    expect(records[records.length - 1].kind).toBe(CaptureRecordKind.End);
  }, 120_000);

  it('records neither a view-only connection nor a user whose record_sessions is off', async () => {
    await recordSessions('true');
    const before = (await rowsOf(workspace.workspace_id)).length;
    const joined = await api.call('join_workspace', key, { share_id: workspace.share_id });
    expect(joined.status).toBe(200);
    const viewer = await openStream(base, workspace.workspace_id, joined.body.session_token);
    await viewer.rfb.captureFrame({ timeoutMs: 15_000 });
    await closeStream(viewer);

    await recordSessions('false');
    const owner = await openStream(base, workspace.workspace_id, ownerJwt);
    await owner.rfb.captureFrame({ timeoutMs: 15_000 });
    await closeStream(owner);
    await recordSessions('none');
    const listed = JSON.parse(await cli('group', 'list', '--json')) as Array<{ name: string; record_sessions: boolean | null }>;
    expect(listed.find((g) => g.name === 'All Users')?.record_sessions).toBeNull();
    await expect(cli('group', 'set', 'All Users', '--record-sessions', 'yes')).rejects.toThrow('expected true, false or none');
    const unset = await openStream(base, workspace.workspace_id, ownerJwt);
    await unset.rfb.captureFrame({ timeoutMs: 15_000 });
    await closeStream(unset);
    // The decision is taken before the upgrade completes: a row would exist by now.
    expect(await rowsOf(workspace.workspace_id)).toHaveLength(before);
    expect(api.app.get(RecordingCapture).openCount).toBe(0);
  }, 120_000);

  it('a starting api finishes the spool a dead one left: whole records stored, End added, row captured', async () => {
    const rows = api.app.get(CaptureRows);
    const id = '7d0e3c1a-0000-4000-8000-' + (kind === 'file' ? '000000000001' : '000000000002');
    const startedAt = new Date(Date.now() - 60_000);
    const capturePrefix = capturePrefixOf(dashed(workspace.workspace_id), id);
    await rows.create({ id, workspaceId: dashed(workspace.workspace_id), userId: dashed(userId), clientId: 'deadbeef', storageUrl: api.config.STORAGE_URL, capturePrefix, startedAt });
    // The dead writer: a process of this host that has exited.
    const dead = spawnSync('true');
    const dir = join(api.config.RECORDING_SPOOL_DIR, id);
    await writeSpoolOwner(dir, { deployment: api.config.DEPLOYMENT_ID, host: hostname(), pid: dead.pid as number, instance: 'gone' });
    const serverInit = Buffer.alloc(24 + 4);
    serverInit.writeUInt16BE(640, 0);
    serverInit.writeUInt16BE(480, 2);
    serverInit.writeUInt32BE(4, 20);
    serverInit.write('dead', 24, 'latin1');
    const frame = Buffer.alloc(1000, 7);
    const truncated = Buffer.concat([recordHeader(CaptureRecordKind.Server, 2500, 5000), Buffer.alloc(100)]);
    writeFileSync(join(dir, segmentFileName(0)), Buffer.concat([CAPTURE_MAGIC, recordHeader(CaptureRecordKind.Server, 10, serverInit.length), serverInit, recordHeader(CaptureRecordKind.Server, 2000, frame.length), frame, truncated]));

    const replica = await api.replica();
    try {
      const recovered = await replica.get(RecordingCapture).recovery;
      expect(recovered).toEqual([id]);
    } finally {
      await replica.close();
    }
    const row = await rows.find(id);
    expect(row).toMatchObject({ status: 'captured', segmentCount: 1, endedAt: new Date(startedAt.getTime() + 2000) });
    const records = await recordsOf(store, await storedKeys(store, capturePrefix));
    expect(records.map((r) => [r.kind, r.at, r.payload.length])).toEqual([[CaptureRecordKind.Server, 10, serverInit.length], [CaptureRecordKind.Server, 2000, 1000], [CaptureRecordKind.End, 2000, 0]]);
    expect(existsSync(dir)).toBe(false);
    expect(await convertJob(id)).toMatchObject({ data: { recordingId: id } });
  }, 60_000);

  it('the upload thread of a build stores segments as the in-process upload does', async () => {
    // The api uploads in a thread when it runs built; these tests run the sources, so the thread comes from a build.
    const built = join(dirname(WORKER_JS), '../../../libs/recordings/src/capture/upload-thread.js');
    const uploader = ThreadedUploader.available(api.config.STORAGE_URL, api.config, built);
    if (!uploader) {
      console.warn(`no built upload thread at ${built}: the threaded upload is not tested in this run`);
      return;
    }
    try {
      const body = Buffer.concat([CAPTURE_MAGIC, recordHeader(CaptureRecordKind.Server, 5, 3), Buffer.from('abc'), recordHeader(CaptureRecordKind.End, 9, 0)]);
      const keys = ['recordings/thread-test/capture/segment-000000.wsrc', 'recordings/thread-test/capture/segment-000001.wsrc'];
      // The store takes each spool file (file:// renames it into place): one file per upload.
      const files = keys.map((_, i) => join(scratch, `thread-segment-${i}.wsrc`));
      for (const file of files) writeFileSync(file, body);
      const sizes = await Promise.all(keys.map((k, i) => uploader.upload(k, files[i])));
      expect(sizes).toEqual([{ size: body.length }, { size: body.length }]);
      expect(files.filter((file) => existsSync(file))).toEqual([]);
      expect((await recordsOf(store, [keys[0]])).map((r) => [r.kind, r.at, r.payload.toString()])).toEqual([[CaptureRecordKind.Server, 5, 'abc'], [CaptureRecordKind.End, 9, '']]);
      await expect(uploader.upload('recordings/thread-test/missing.wsrc', join(scratch, 'no-such-file'))).rejects.toThrow(/ENOENT/);
    } finally {
      await uploader.close();
    }
  }, 60_000);

  it('finalizeAbandoned ends rows whose api stopped refreshing them', async () => {
    const rows = api.app.get(CaptureRows);
    const db = api.app.get(DataSource);
    const ids = ['1', '2', '3'].map((n) => `8e1f4d2b-0000-4000-8000-${kind === 'file' ? '1' : '2'}0000000000${n}`);
    for (const id of ids) {
      await rows.create({ id, workspaceId: dashed(workspace.workspace_id), userId: dashed(userId), clientId: 'cafebabe', storageUrl: api.config.STORAGE_URL, capturePrefix: capturePrefixOf(dashed(workspace.workspace_id), id), startedAt: new Date(Date.now() - 3600_000) });
    }
    const stale = new Date(Date.now() - (3 * api.config.RECORDING_SEGMENT_SECONDS + 60) * 1000);
    await db.query(`UPDATE session_recordings SET segment_count = 2, capture_bytes = 1000, updated_at = $2 WHERE id = $1`, [ids[0], stale]);
    await db.query(`UPDATE session_recordings SET updated_at = $2 WHERE id = $1`, [ids[1], stale]);
    // ids[2] was refreshed just now: its api is alive.
    expect(await rows.finalizeAbandoned(new Date())).toBe(2);
    const [withSegments, empty, live] = await Promise.all(ids.map((id) => rows.find(id)));
    expect(withSegments).toMatchObject({ status: 'captured', segmentCount: 2, endedAt: stale });
    expect(empty).toMatchObject({ status: 'failed', error: 'no capture was stored' });
    expect(live?.status).toBe('recording');
    expect(await convertJob(ids[0])).toMatchObject({ data: { recordingId: ids[0] } });
    expect(await convertJob(ids[1])).toBeUndefined();
    expect(await rows.finalizeAbandoned(new Date())).toBe(0);
  }, 60_000);
});
