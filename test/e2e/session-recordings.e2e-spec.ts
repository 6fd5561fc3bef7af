import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { DataSource } from 'typeorm';
import { AppConfig, newId, parseId, toWireId } from '@ws/common';
import { jobId, JobProducer } from '@ws/queue';
import { RecordingRetention, RecordingStores, recordingVideoKey, segmentKey, SessionRecording } from '@ws/recordings';
import { ObjectStore } from '@ws/storage';
import { HEX32, TestApi, TestKey, waitFor } from './harness';
import { freePort, insertWorkspace, makeWebm, probeDuration } from './recording-fixtures';
import { S3Server, startS3Server } from './s3-server';

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
      S3_ENDPOINT: s3.endpoint, S3_FORCE_PATH_STYLE: true, S3_ACCESS_KEY_ID: s3.accessKeyId, S3_SECRET_ACCESS_KEY: s3.secretAccessKey, S3_PART_SIZE_MB: 5,
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

      const report = await api.app.get(RecordingRetention).run();
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
    const queue = api.app.get(JobProducer).queue('maintenance');
    expect(await queue.getJob(jobId.convertRecording(lost.id))).toBeUndefined();
    await api.app.get(RecordingRetention).run();
    expect((await queue.getJob(jobId.convertRecording(lost.id)))?.data).toEqual({ recordingId: lost.id });
    expect(await queue.getJob(jobId.convertRecording(fresh.id))).toBeUndefined();
    expect(api.app.get(AppConfig).RECORDING_RETENTION_DAYS).toBe(30);
  });
});
