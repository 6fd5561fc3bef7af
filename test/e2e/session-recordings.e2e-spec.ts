import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { DataSource } from 'typeorm';
import { WebSocket } from 'ws';
import { AppConfig, newId, parseId, toWireId } from '@ws/common';
import { JOB_QUEUE, jobId, JobProducer } from '@ws/queue';
import { CaptureRows, RecordingRetention, RecordingStores, recordingVideoKey, segmentKey, SessionRecording } from '@ws/recordings';
import { ImagesService } from '@ws/images';
import { ObjectStore } from '@ws/storage';
import { desktopImage, freePort, HEX32, TestApi, TestKey, waitFor } from './harness';
import { openStream, registerLocalServer, waitForRunningWorkspace } from './fixtures';
import { buildCapture, insertWorkspace, makeWebm, probeDuration, seedCapture } from './recording-fixtures';
import { S3Server, startS3Server } from './s3-server';
import { WorkerProcess } from './worker-processes';

const LINK_TTL_SECONDS = 10;
const DAY_MS = 86_400_000;

type Backend = 'file' | 's3';

describe('session recordings: listing, links and retention (seeded rows, both backends)', () => {
  let scratch: string;
  let s3: S3Server;
  let api: TestApi;
  let base: string;
  let admin: TestKey;
  let viewer: TestKey;
  let db: DataSource;
  let userId: string;
  /** The test user's database id. */
  const owner = () => parseId(userId) as string;
  const storageUrls = {} as Record<Backend, string>;
  const stores = {} as Record<Backend, ObjectStore>;
  let webm: Buffer;
  const WEBM_SECONDS = 3;

  /** A `ready` recording as the conversion leaves it, with a real video object in `backend`'s store. */
  async function seedReady(workspaceId: string, backend: Backend, startedAt: Date, extra: Partial<SessionRecording> = {}): Promise<SessionRecording> {
    const id = newId();
    const videoKey = recordingVideoKey(workspaceId, id);
    await stores[backend].put(videoKey, Readable.from([webm]), { contentType: 'video/webm' });
    return db.getRepository(SessionRecording).save({
      id, workspaceId, userId, clientId: 'seeded', status: 'ready', storageUrl: storageUrls[backend], capturePrefix: `recordings/${workspaceId}/${id}/capture`,
      segmentCount: 1, captureBytes: 10, startedAt, endedAt: new Date(startedAt.getTime() + WEBM_SECONDS * 1000), videoKey, videoBytes: webm.length,
      videoContentType: 'video/webm', durationSeconds: WEBM_SECONDS, thumbnail: 'data:image/jpeg;base64,/9j/', ...extra,
    });
  }

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'ws-recordings-e2e-'));
    s3 = await startS3Server(join(scratch, 's3'), 'ws-recordings');
    // file:// links name PUBLIC_BASE_URL, so the api must know its port before it starts.
    const port = await freePort();
    storageUrls.file = `file://${join(scratch, 'files')}`;
    storageUrls.s3 = `s3://${s3.bucket}/deployment`;
    api = await TestApi.start({
      STORAGE_URL: storageUrls.file, PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, RECORDING_LINK_TTL_SECONDS: LINK_TTL_SECONDS, RECORDING_RETENTION_DAYS: 30,
      ...s3.settings, S3_PART_SIZE_MB: 5,
    });
    await api.app.listen(port, '127.0.0.1');
    base = `http://127.0.0.1:${port}`;
    db = api.app.get(DataSource);
    stores.file = api.app.get(RecordingStores).of(storageUrls.file);
    stores.s3 = api.app.get(RecordingStores).of(storageUrls.s3);
    admin = await api.key(['Global Admin']);
    viewer = await api.key(['Session Recordings View'], { readOnly: true });
    userId = (await api.call('create_user', admin, { target_user: { username: 'recorded-user' } })).body.user.user_id;
    await makeWebm(join(scratch, 'seed.webm'), WEBM_SECONDS);
    webm = readFileSync(join(scratch, 'seed.webm'));
  });

  afterAll(async () => {
    await api?.close();
    await s3?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('lists only ready recordings of the workspace, oldest first, in the spec shape; destroyed workspaces keep theirs', async () => {
    const workspace = await insertWorkspace(db, owner(), 'deleted');
    const later = await seedReady(workspace.id, 's3', new Date('2026-03-02T10:00:00.900Z'));
    const earlier = await seedReady(workspace.id, 'file', new Date('2026-03-01T10:00:00.250Z'), { durationSeconds: 7 });
    for (const status of ['recording', 'captured', 'failed'] as const) await seedReady(workspace.id, 'file', new Date('2026-02-01T00:00:00Z'), { status });

    const res = await api.call('get_session_recordings', viewer, { target_workspace_id: toWireId(workspace.id) });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      session_recordings: [
        {
          recording_id: toWireId(earlier.id), account_id: userId, session_recording_url: `${storageUrls.file}/${recordingVideoKey(workspace.id, earlier.id)}`,
          session_recording_metadata: { duration: 7, thumbnail: 'data:image/jpeg;base64,/9j/', timestamp: Math.floor(Date.parse('2026-03-01T10:00:00Z') / 1000) },
        },
        {
          recording_id: toWireId(later.id), account_id: userId, session_recording_url: `${storageUrls.s3}/${recordingVideoKey(workspace.id, later.id)}`,
          session_recording_metadata: { duration: WEBM_SECONDS, thumbnail: 'data:image/jpeg;base64,/9j/', timestamp: Math.floor(Date.parse('2026-03-02T10:00:00Z') / 1000) },
        },
      ],
    });
    expect(res.body.session_recordings[0].recording_id).toMatch(HEX32);
    // The dashed form names the same workspace.
    const dashed = await api.call('get_session_recordings', viewer, { target_workspace_id: workspace.id, preauth_download_link: false });
    expect(dashed.body).toEqual(res.body);
  });

  it('get_sessions_recordings answers each named workspace by its wire id, empty lists included', async () => {
    const recorded = await insertWorkspace(db, owner(), 'running');
    const quiet = await insertWorkspace(db, owner(), 'running');
    const one = await seedReady(recorded.id, 'file', new Date('2026-04-01T00:00:00Z'));
    const res = await api.call('get_sessions_recordings', viewer, { target_workspace_ids: [recorded.id, toWireId(quiet.id), toWireId(recorded.id)] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      workspace_sessions: {
        [toWireId(recorded.id)]: { session_recordings: [expect.objectContaining({ recording_id: toWireId(one.id) })] },
        [toWireId(quiet.id)]: { session_recordings: [] },
      },
    });
    expect(res.body.workspace_sessions[toWireId(recorded.id)].session_recordings[0].session_recording_download_url).toBeUndefined();
    expect((await api.call('get_sessions_recordings', viewer, { target_workspace_ids: [] })).body).toEqual({ workspace_sessions: {} });
  });

  it('refuses bad and unknown workspace ids and malformed fields with 400 naming them', async () => {
    const unknown = 'a'.repeat(32);
    const existing = toWireId((await insertWorkspace(db, owner(), 'running')).id);
    const cases: Array<[string, Record<string, unknown>, string | RegExp]> = [
      ['get_session_recordings', { target_workspace_id: 'nope' }, 'Invalid target_workspace_id (nope)'],
      ['get_session_recordings', { target_workspace_id: unknown }, `Invalid target_workspace_id (${unknown})`],
      ['get_session_recordings', {}, /^target_workspace_id /],
      ['get_session_recordings', { target_workspace_id: existing, preauth_download_link: 'yes' }, /^preauth_download_link must be a boolean/],
      ['get_sessions_recordings', { target_workspace_ids: [existing, unknown] }, `Invalid target_workspace_ids (${unknown})`],
      ['get_sessions_recordings', { target_workspace_ids: existing }, /target_workspace_ids must be an array/],
      ['get_sessions_recordings', { target_workspace_ids: [existing, 5] }, /^target_workspace_ids: each value in target_workspace_ids must be a string|^target_workspace_ids each value/],
      ['get_sessions_recordings', { target_workspace_ids: Array.from({ length: 501 }, () => existing) }, /^target_workspace_ids must contain no more than 500 elements/],
    ];
    for (const [operation, body, message] of cases) {
      const res = await api.call(operation, viewer, body);
      expect([operation, body, res.status]).toEqual([operation, body, 400]);
      if (typeof message === 'string') expect(res.body).toEqual({ error_message: message });
      else expect(res.body.error_message).toMatch(message);
    }
  });

  describe.each(['file', 's3'] as const)('%s backend', (backend) => {
    it('preauth_download_link adds a link that serves the video (ranges too, as <video> asks) until it expires, then is refused', async () => {
      const workspace = await insertWorkspace(db, owner(), 'running');
      await seedReady(workspace.id, backend, new Date());
      const res = await api.call('get_session_recordings', viewer, { target_workspace_id: toWireId(workspace.id), preauth_download_link: true });
      expect(res.status).toBe(200);
      const link: string = res.body.session_recordings[0].session_recording_download_url;
      expect(link).toMatch(backend === 'file' ? new RegExp(`^${base}/api/storage/recordings/`) : new RegExp(`^${s3.endpoint}/`));

      const whole = await fetch(link);
      expect(whole.status).toBe(200);
      expect(whole.headers.get('content-type')).toBe('video/webm');
      expect(Buffer.from(await whole.arrayBuffer()).equals(webm)).toBe(true);
      const part = await fetch(link, { headers: { range: 'bytes=10-109' } });
      expect(part.status).toBe(206);
      expect(part.headers.get('content-range')).toBe(`bytes 10-109/${webm.length}`);
      expect(part.headers.get('accept-ranges')).toBe('bytes');
      expect(Buffer.from(await part.arrayBuffer()).equals(webm.subarray(10, 110))).toBe(true);
      expect(Math.abs((await probeDuration(link)) - WEBM_SECONDS)).toBeLessThanOrEqual(1);

      await waitFor('the link to expire', async () => ([403, 410].includes((await fetch(link)).status) ? true : undefined), (LINK_TTL_SECONDS + 30) * 1000, 500);
    });

    it('the retention job deletes recordings older than RECORDING_RETENTION_DAYS with their objects, and nothing younger', async () => {
      const workspace = await insertWorkspace(db, owner(), 'deleted');
      const old = await seedReady(workspace.id, backend, new Date(Date.now() - 31 * DAY_MS));
      // A leftover capture segment (the conversion was killed after the row said ready) goes too.
      await stores[backend].put(segmentKey(old.capturePrefix, 0), Readable.from([Buffer.from('leftover')]));
      const failedOld = await seedReady(workspace.id, backend, new Date(Date.now() - 40 * DAY_MS), { status: 'failed', videoKey: null });
      await stores[backend].put(segmentKey(failedOld.capturePrefix, 0), Readable.from([Buffer.from('kept capture')]));
      const young = await seedReady(workspace.id, backend, new Date(Date.now() - 29 * DAY_MS));

      // RECORDING_RETENTION_DAYS 0 keeps everything.
      const retention = api.app.get(RecordingRetention);
      const keepForever = new RecordingRetention(db.getRepository(SessionRecording), api.app.get(RecordingStores), api.app.get(CaptureRows), api.app.get(JobProducer), {
        ...api.app.get(AppConfig), RECORDING_RETENTION_DAYS: 0,
      } as AppConfig);
      expect((await keepForever.run()).expired).toBe(0);
      expect(await db.getRepository(SessionRecording).countBy({ workspaceId: workspace.id })).toBe(3);

      const report = await retention.run();
      expect(report.expired).toBeGreaterThanOrEqual(2);
      const left = await db.getRepository(SessionRecording).findBy({ workspaceId: workspace.id });
      expect(left.map((r) => r.id)).toEqual([young.id]);
      expect(await stores[backend].head(recordingVideoKey(workspace.id, old.id))).toBeNull();
      expect(await stores[backend].head(segmentKey(old.capturePrefix, 0))).toBeNull();
      expect(await stores[backend].head(segmentKey(failedOld.capturePrefix, 0))).toBeNull();
      expect(await stores[backend].head(recordingVideoKey(workspace.id, young.id))).not.toBeNull();
    });
  });

  it('the retention job asks again for the conversion of a captured recording whose job was lost', async () => {
    const workspace = await insertWorkspace(db, owner(), 'running');
    const lost = await seedReady(workspace.id, 'file', new Date(Date.now() - 3600_000), { status: 'captured', videoKey: null });
    const fresh = await seedReady(workspace.id, 'file', new Date(), { status: 'captured', videoKey: null });
    await db.query(`UPDATE session_recordings SET updated_at = now() - interval '1 hour' WHERE id = $1`, [lost.id]);
    const queue = api.app.get(JobProducer).queue(JOB_QUEUE['recording.convert']);
    expect(await queue.getJob(jobId.convertRecording(lost.id))).toBeUndefined();
    await api.app.get(RecordingRetention).run();
    expect((await queue.getJob(jobId.convertRecording(lost.id)))?.data).toEqual({ recordingId: lost.id });
    expect(await queue.getJob(jobId.convertRecording(fresh.id))).toBeUndefined();
    expect(api.app.get(AppConfig).RECORDING_RETENTION_DAYS).toBe(30);
  });
});

describe.each(['file', 's3'] as const)('a recorded session on a real desktop, converted by the worker (%s backend)', (backend) => {
  let scratch: string;
  let s3: S3Server | null = null;
  let api: TestApi;
  let base: string;
  let admin: TestKey;
  let viewer: TestKey;
  let db: DataSource;
  let store: ObjectStore;
  let userId: string;
  let imageId: string;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), `ws-recorded-${backend}-`));
    const port = await freePort();
    let storage: Partial<AppConfig> = { STORAGE_URL: `file://${join(scratch, 'files')}` };
    if (backend === 's3') {
      s3 = await startS3Server(join(scratch, 's3'), 'ws-recorded');
      storage = {
        STORAGE_URL: `s3://${s3.bucket}/rec`, ...s3.settings, S3_PART_SIZE_MB: 5,
      };
    }
    api = await TestApi.start(
      {
        ...storage, PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, RECORDING_LINK_TTL_SECONDS: LINK_TTL_SECONDS, RECORDING_RETENTION_DAYS: 30,
        RECORDING_SPOOL_DIR: join(scratch, 'spool'), RECORDING_SEGMENT_SECONDS: 2,
      },
      { worker: true },
    );
    await api.app.listen(port, '127.0.0.1');
    base = `http://127.0.0.1:${port}`;
    db = api.app.get(DataSource);
    store = api.app.get(RecordingStores).of(api.config.STORAGE_URL);
    await registerLocalServer(api);
    imageId = (await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600 })).id;
    admin = await api.key(['Global Admin']);
    viewer = await api.key(['Session Recordings View']);
    await db.query(`UPDATE groups SET record_sessions = true WHERE system_key = 'all_users'`);
    userId = (await api.call('create_user', admin, { target_user: { username: `recorded-${backend}` } })).body.user.user_id;
  });

  afterAll(async () => {
    await api?.close();
    await s3?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('lists the closed session with its duration; the link serves a video ffprobe reads at that duration until it expires; retention deletes it', async () => {
    const requested = (await api.call('request_workspace', admin, { user_id: userId, image_id: imageId })).body;
    const running = await waitForRunningWorkspace(api, admin, requested.workspace_id, userId);
    const jwt = running.workspace_url.split('/').pop() as string;

    // The session, measured at the client: from the stream's opening until it is closed.
    const { ws, rfb, openedAt } = await openStream(base, requested.workspace_id, jwt);
    let sessionMs: number;
    try {
      await rfb.captureFrame({ timeoutMs: 15_000 });
      // Screen activity for about 4 s: the background changes and the client asks for whole frames (always answered).
      const colours = ['#aa3300', '#0033aa', '#22aa44', '#aaaa00'];
      for (let step = 0; Date.now() - openedAt < 4000 && step < 200; step++) {
        await api.call('exec_command_workspace', admin, { workspace_id: requested.workspace_id, user_id: userId, exec_config: { cmd: `DISPLAY=:1 xsetroot -solid '${colours[step % colours.length]}'` }, wait: true });
        await rfb.update({ incremental: false, timeoutMs: 10_000 });
      }
    } finally {
      await rfb.close().catch(() => undefined);
      ws.close();
      await waitFor('the stream closed', async () => (ws.readyState === WebSocket.CLOSED ? true : undefined), 15_000, 20);
      sessionMs = Date.now() - openedAt;
    }
    const sessionSeconds = sessionMs / 1000;

    const listed = await waitFor('the recording to be listed', async () => {
      const res = await api.call('get_session_recordings', viewer, { target_workspace_id: requested.workspace_id, preauth_download_link: true });
      expect(res.status).toBe(200);
      return res.body.session_recordings.length > 0 ? res.body.session_recordings : undefined;
    }, 180_000, 500);
    expect(listed).toHaveLength(1);
    const [recording] = listed;
    const row = await db.getRepository(SessionRecording).findOneByOrFail({ id: parseId(recording.recording_id) as string });
    expect(recording).toEqual({
      recording_id: expect.stringMatching(HEX32), account_id: userId,
      session_recording_url: `${api.config.STORAGE_URL}/recordings/${parseId(requested.workspace_id)}/${row.id}/video.webm`,
      session_recording_metadata: { duration: expect.any(Number), thumbnail: expect.stringMatching(/^data:image\/jpeg;base64,[A-Za-z0-9+/]+=*$/), timestamp: expect.any(Number) },
      session_recording_download_url: expect.any(String),
    });
    expect(Math.abs(recording.session_recording_metadata.duration - sessionSeconds)).toBeLessThanOrEqual(1);
    expect(Math.abs(recording.session_recording_metadata.timestamp - openedAt / 1000)).toBeLessThanOrEqual(2);
    // The thumbnail is a JPEG.
    expect(Buffer.from(recording.session_recording_metadata.thumbnail.split(',')[1], 'base64').subarray(0, 2)).toEqual(Buffer.from([0xff, 0xd8]));

    const link: string = recording.session_recording_download_url;
    const head = await fetch(link, { headers: { range: 'bytes=0-3' } });
    expect(head.status).toBe(206);
    expect(head.headers.get('content-type')).toBe('video/webm');
    expect(Buffer.from(await head.arrayBuffer())).toEqual(Buffer.from([0x1a, 0x45, 0xdf, 0xa3])); // EBML: a Matroska/WebM file
    expect(Math.abs((await probeDuration(link)) - sessionSeconds)).toBeLessThanOrEqual(1);
    // The raw capture is gone once the video is verified and the row says ready.
    const leftovers: string[] = [];
    for await (const entry of store.list(`${row.capturePrefix}/`)) leftovers.push(entry.key);
    expect(leftovers).toEqual([]);
    await waitFor('the link to expire', async () => ([403, 410].includes((await fetch(link)).status) ? true : undefined), (LINK_TTL_SECONDS + 30) * 1000, 500);

    // Retention, by the worker's maintenance job: the recording aged past RECORDING_RETENTION_DAYS goes with its video.
    await db.query(`UPDATE session_recordings SET started_at = now() - interval '31 days' WHERE id = $1`, [row.id]);
    await api.app.get(JobProducer).enqueue('maintenance.expire-recordings', {});
    await waitFor('the expired recording to be deleted', async () => ((await db.getRepository(SessionRecording).findOneBy({ id: row.id })) ? undefined : true), 60_000, 250);
    expect(await store.head(row.videoKey as string)).toBeNull();
    expect((await api.call('get_session_recordings', viewer, { target_workspace_id: requested.workspace_id })).body).toEqual({ session_recordings: [] });
  }, 300_000);

  it('a conversion retried after the row said ready only deletes leftover segments; a corrupt capture fails for good and is kept', async () => {
    const workspace = await insertWorkspace(db, parseId(userId) as string, 'deleted');
    const producer = api.app.get(JobProducer);
    const segments = buildCapture({ width: 64, height: 48, seconds: 2, fps: 5, segments: 2 });
    const ready = await seedCapture(db, store, { workspaceId: workspace.id, userId: parseId(userId), storageUrl: api.config.STORAGE_URL, startedAt: new Date(), seconds: 2 }, segments);
    await producer.ensure('recording.convert', { recordingId: ready.id }, jobId.convertRecording(ready.id));
    const converted = await waitFor('the seeded capture converted', async () => {
      const row = await db.getRepository(SessionRecording).findOneBy({ id: ready.id });
      return row?.status === 'ready' ? row : undefined;
    }, 120_000, 250);
    expect(converted).toMatchObject({ videoKey: recordingVideoKey(workspace.id, ready.id), videoContentType: 'video/webm', durationSeconds: 2, error: null });
    expect((await store.head(converted.videoKey as string))?.size).toBe(converted.videoBytes);

    // Killed after the switch, before the segments went: the retry finds the row ready and deletes them, nothing else.
    await store.put(segmentKey(ready.capturePrefix, 0), Readable.from([segments[0]]));
    const videoBefore = await store.head(converted.videoKey as string);
    await producer.ensure('recording.convert', { recordingId: ready.id }, jobId.convertRecording(ready.id));
    await waitFor('the leftover segment deleted', async () => ((await store.head(segmentKey(ready.capturePrefix, 0))) ? undefined : true), 60_000, 250);
    expect((await store.head(converted.videoKey as string))?.etag).toBe(videoBefore?.etag);

    const corrupt = await seedCapture(
      db, store, { workspaceId: workspace.id, userId: parseId(userId), storageUrl: api.config.STORAGE_URL, startedAt: new Date(), seconds: 2 },
      [Buffer.from('not a capture segment at all')],
    );
    await producer.ensure('recording.convert', { recordingId: corrupt.id }, jobId.convertRecording(corrupt.id));
    const failed = await waitFor('the corrupt capture failed', async () => {
      const row = await db.getRepository(SessionRecording).findOneBy({ id: corrupt.id });
      return row?.status === 'failed' ? row : undefined;
    }, 60_000, 250);
    expect(failed.error).toMatch(/not a capture segment/);
    expect(await store.head(segmentKey(corrupt.capturePrefix, 0))).not.toBeNull();
    expect((await api.call('get_session_recordings', viewer, { target_workspace_id: workspace.id })).body.session_recordings.map((r: { recording_id: string }) => r.recording_id)).toEqual([
      toWireId(ready.id),
    ]);
  });
});

describe('a worker SIGKILLed mid-conversion (worker processes, file:// backend)', () => {
  let scratch: string;
  let api: TestApi;
  let db: DataSource;
  let store: ObjectStore;
  const workers: WorkerProcess[] = [];
  const SECONDS = 60;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'ws-recording-kill-'));
    // A short lock: the killed worker's job is handed to the other one within seconds. 30 fps: the encode takes a while.
    api = await TestApi.start({ STORAGE_URL: `file://${join(scratch, 'files')}`, RECORDING_SPOOL_DIR: join(scratch, 'spool'), WORKER_LOCK_MS: 3000, RECORDING_FPS: 30 });
    db = api.app.get(DataSource);
    store = api.app.get(RecordingStores).of(api.config.STORAGE_URL);
  });

  afterAll(async () => {
    for (const worker of workers) await worker.kill().catch(() => undefined);
    await api?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('the next worker converts from the kept capture: one verified video, the capture deleted, no scratch left', async () => {
    const userId = (await api.call('create_user', await api.key(['Global Admin']), { target_user: { username: 'killed-conversion' } })).body.user.user_id as string;
    const workspace = await insertWorkspace(db, parseId(userId) as string, 'running');
    const seeded = await seedCapture(
      db, store, { workspaceId: workspace.id, userId: parseId(userId), storageUrl: api.config.STORAGE_URL, startedAt: new Date(), seconds: SECONDS },
      buildCapture({ width: 640, height: 480, seconds: SECONDS, fps: 5, segments: 3, maxFrames: 12 }),
    );
    const scratchDirs = () => readdirSync(tmpdir()).filter((name) => name.startsWith(`ws-recording-${seeded.id}-`));

    const first = WorkerProcess.spawn(api.settings);
    workers.push(first);
    await first.ready();
    await api.app.get(JobProducer).ensure('recording.convert', { recordingId: seeded.id }, jobId.convertRecording(seeded.id));
    const queue = api.app.get(JobProducer).queue(JOB_QUEUE['recording.convert']);
    // Killed while converting: its job is active on it and it has begun writing the video in its scratch directory.
    await waitFor('the first worker converting', async () => {
      const job = await queue.getJob(jobId.convertRecording(seeded.id));
      const active = job && (await job.getState()) === 'active' && job.processedBy?.endsWith(`:${first.pid}`);
      return active && scratchDirs().length > 0 ? true : undefined;
    }, 120_000, 50);
    await first.kill('SIGKILL');
    expect((await db.getRepository(SessionRecording).findOneByOrFail({ id: seeded.id })).status).toBe('captured');
    expect(await store.head(segmentKey(seeded.capturePrefix, 0))).not.toBeNull();

    const second = WorkerProcess.spawn(api.settings);
    workers.push(second);
    await second.ready();
    const ready = await waitFor('the conversion finished by the second worker', async () => {
      const row = await db.getRepository(SessionRecording).findOneBy({ id: seeded.id });
      if (row?.status === 'failed') throw new Error(`conversion failed: ${row.error}`);
      return row?.status === 'ready' ? row : undefined;
    }, 300_000, 500);
    expect(ready.durationSeconds).toBe(SECONDS);
    const video = join(scratch, 'files', ready.videoKey as string);
    expect(Math.abs((await probeDuration(video)) - SECONDS)).toBeLessThanOrEqual(1);
    expect((await store.head(ready.videoKey as string))?.size).toBe(ready.videoBytes);
    await waitFor('the capture deleted', async () => {
      const left: string[] = [];
      for await (const entry of store.list(`${seeded.capturePrefix}/`)) left.push(entry.key);
      return left.length === 0 ? true : undefined;
    }, 30_000, 250);
    expect(scratchDirs()).toEqual([]);
  }, 600_000);
});
