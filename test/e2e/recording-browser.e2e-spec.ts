import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { DataSource } from 'typeorm';
import { AppConfig, parseId, toWireId } from '@ws/common';
import { jobId, JobProducer } from '@ws/queue';
import { RecordingStores, SessionRecording } from '@ws/recordings';
import { launchChromium } from './browser';
import { freePort, TestApi, TestKey, waitFor } from './harness';
import { buildCapture, insertWorkspace, seedCapture } from './recording-fixtures';
import { S3Server, startS3Server } from './s3-server';

const SECONDS = 6;

/**
 * Chromium's <video> element plays a converted recording from its pre-authorized download link: metadata loads
 * with the recording's duration, playback advances, and a seek near the end completes. The
 * capture is seeded as the gateway writes it and converted by the worker's recording.convert; the file://
 * link is served by the api's storage route, the s3:// one by the S3-compatible server.
 */
describe.each(['file', 's3'] as const)('a recording plays in Chromium (%s backend)', (backend) => {
  let scratch: string;
  let s3: S3Server | null = null;
  let api: TestApi;
  let viewer: TestKey;
  let browser: Browser;
  let recording: { workspaceId: string; duration: number; link: string };

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), `ws-recording-browser-${backend}-`));
    const port = await freePort();
    let storage: Partial<AppConfig> = { STORAGE_URL: `file://${join(scratch, 'files')}` };
    if (backend === 's3') {
      s3 = await startS3Server(join(scratch, 's3'), 'ws-recording-browser');
      storage = {
        STORAGE_URL: `s3://${s3.bucket}/rec`, ...s3.settings, S3_PART_SIZE_MB: 5,
      };
    }
    api = await TestApi.start({ ...storage, PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, RECORDING_SPOOL_DIR: join(scratch, 'spool') }, { worker: true });
    await api.app.listen(port, '127.0.0.1');
    const db = api.app.get(DataSource);
    const admin = await api.key(['Global Admin']);
    viewer = await api.key(['Session Recordings View']);
    const userId = (await api.call('create_user', admin, { target_user: { username: `viewer-${backend}` } })).body.user.user_id as string;
    const workspace = await insertWorkspace(db, parseId(userId) as string, 'deleted');
    const store = api.app.get(RecordingStores).of(api.config.STORAGE_URL);
    const seeded = await seedCapture(
      db, store, { workspaceId: workspace.id, userId: parseId(userId), storageUrl: api.config.STORAGE_URL, startedAt: new Date(), seconds: SECONDS },
      buildCapture({ width: 160, height: 120, seconds: SECONDS, fps: 5, segments: 3 }),
    );
    await api.app.get(JobProducer).ensure('recording.convert', { recordingId: seeded.id }, jobId.convertRecording(seeded.id));
    await waitFor('the conversion', async () => ((await db.getRepository(SessionRecording).findOneBy({ id: seeded.id }))?.status === 'ready' ? true : undefined), 120_000, 250);
    const listed = await api.call('get_session_recordings', viewer, { target_workspace_id: toWireId(workspace.id), preauth_download_link: true });
    expect(listed.status).toBe(200);
    const [item] = listed.body.session_recordings;
    recording = { workspaceId: workspace.id, duration: item.session_recording_metadata.duration, link: item.session_recording_download_url };
    expect(recording.duration).toBe(SECONDS);
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await api?.close();
    await s3?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('loads its metadata with the recording duration, plays, and seeks', async () => {
    const page = await browser.newPage();
    try {
      await page.setContent(`<video id="v" muted preload="auto" src="${recording.link}"></video>`);
      const loaded = await page.waitForFunction(
        () => {
          const video = document.getElementById('v') as HTMLVideoElement;
          if (video.error) return { error: video.error.code };
          return video.readyState >= 1 ? { duration: video.duration } : null;
        },
        undefined,
        { timeout: 60_000, polling: 100 },
      );
      const metadata = (await loaded.jsonValue()) as { duration?: number; error?: number };
      expect(metadata.error).toBeUndefined();
      expect(Math.abs((metadata.duration as number) - recording.duration)).toBeLessThanOrEqual(1);

      await page.evaluate(() => (document.getElementById('v') as HTMLVideoElement).play());
      await page.waitForFunction(() => (document.getElementById('v') as HTMLVideoElement).currentTime > 0.5, undefined, { timeout: 60_000, polling: 100 });

      // A seek near the end completes and playback goes on from there (the links answer ranged requests with 206).
      const seekTo = recording.duration - 1.5;
      await page.evaluate((at) => {
        const video = document.getElementById('v') as HTMLVideoElement;
        video.pause();
        video.currentTime = at;
      }, seekTo);
      await page.waitForFunction((at) => {
        const video = document.getElementById('v') as HTMLVideoElement;
        return !video.seeking && Math.abs(video.currentTime - at) < 0.6 && video.readyState >= 2;
      }, seekTo, { timeout: 60_000, polling: 100 });
      await page.evaluate(() => (document.getElementById('v') as HTMLVideoElement).play());
      await page.waitForFunction((at) => (document.getElementById('v') as HTMLVideoElement).currentTime > at + 0.3, seekTo, { timeout: 60_000, polling: 100 });
    } finally {
      await page.close();
    }
  });
});
