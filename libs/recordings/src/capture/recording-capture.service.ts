import { randomUUID } from 'node:crypto';
import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '@ws/common';
import { InjectObjectStore, ObjectStore } from '@ws/storage';
import { WorkspaceSettings } from '@ws/workspaces';
import { RecordingStores } from '../recording-stores';
import { ABANDONED_AFTER_SEGMENTS, CaptureRows, capturePrefixOf } from './capture-rows';
import { ThreadedUploader, UploadSegment, uploadInProcess } from './segment-uploader';
import { DEFAULT_RECORDER_LIMITS, RecorderLimits, SessionRecorder } from './session-recorder';
import { createSpoolDir, newSpoolOwner, recoverSpool, retireSpoolOwner, SpoolOwner } from './spool';

/** How long a shutting-down api waits for its open recordings to be stored and finalized. */
const SHUTDOWN_FINALIZE_MS = 30_000;

export interface RecordingTarget {
  workspaceId: string;
  /** The workspace's owner (account_id of the recording). */
  userId: string | null;
  /** The gateway connection (RfbSession id). */
  clientId: string;
}

/**
 * The api's side of session recordings: decides whether a stream connection is recorded, starts its
 * SessionRecorder, finishes what a previous process left in RECORDING_SPOOL_DIR at start, and finalizes the
 * open recordings when the api shuts down.
 */
@Injectable()
export class RecordingCapture implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(RecordingCapture.name);
  private readonly owner: SpoolOwner;
  private readonly live = new Set<SessionRecorder>();
  /** Limits of new recorders (tests and the bench may narrow them). */
  limits: RecorderLimits;
  /** The start-up recovery of the spool (tests wait on it). */
  recovery: Promise<string[]> = Promise.resolve([]);
  private readonly uploader: ThreadedUploader | null;
  private readonly upload: UploadSegment;

  constructor(
    private readonly config: AppConfig,
    private readonly rows: CaptureRows,
    private readonly settings: WorkspaceSettings,
    private readonly stores: RecordingStores,
    @InjectObjectStore() store: ObjectStore,
  ) {
    this.owner = newSpoolOwner(config.DEPLOYMENT_ID);
    this.limits = { ...DEFAULT_RECORDER_LIMITS, segmentBytes: config.RECORDING_SEGMENT_MB * 1024 * 1024, segmentMs: config.RECORDING_SEGMENT_SECONDS * 1000 };
    // Off the stream's event loop when built; the sources (tests) upload in process.
    this.uploader = ThreadedUploader.available(config.STORAGE_URL, config);
    this.upload = this.uploader?.upload ?? uploadInProcess(store);
  }

  onApplicationBootstrap(): void {
    // In the background: the api serves at once; recovered rows finish whenever their uploads do.
    this.recovery = recoverSpool({
      root: this.config.RECORDING_SPOOL_DIR,
      deployment: this.config.DEPLOYMENT_ID,
      rows: this.rows,
      storeFor: (url) => this.stores.of(url),
      abandonedBefore: new Date(Date.now() - ABANDONED_AFTER_SEGMENTS * this.limits.segmentMs),
      log: this.logger,
    }).catch((err: Error) => {
      this.logger.warn(`recording spool recovery failed: ${err.message}`);
      return [];
    });
  }

  async onModuleDestroy(): Promise<void> {
    const ending = Promise.all([...this.live].map((recorder) => recorder.end()));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), SHUTDOWN_FINALIZE_MS)));
    const outcome = await Promise.race([Promise.all([ending, this.recovery]).then(() => 'done' as const), timeout]).finally(() => clearTimeout(timer));
    if (outcome === 'timeout') this.logger.warn(`${this.live.size} recording(s) were not finalized within ${SHUTDOWN_FINALIZE_MS} ms; the next start finishes them from the spool`);
    retireSpoolOwner(this.owner);
    await this.uploader?.close();
  }

  /** Whether the owner's effective record_sessions is on; false (logged) when the settings cannot be read. */
  async shouldRecord(ownerId: string | null): Promise<boolean> {
    if (!ownerId) return false;
    try {
      return (await this.settings.of(ownerId)).recordSessions;
    } catch (err) {
      this.logger.warn(`record_sessions of ${ownerId} could not be read (${(err as Error).message}); the stream is not recorded`);
      return false;
    }
  }

  /**
   * Starts recording a connection: its spool directory now, its row in the background (the stream never waits
   * on the database or the store). Null, logged, when the spool cannot be created.
   */
  begin(target: RecordingTarget): SessionRecorder | null {
    const id = randomUUID();
    let spoolDir: string;
    try {
      spoolDir = createSpoolDir(this.config.RECORDING_SPOOL_DIR, id, this.owner);
    } catch (err) {
      this.logger.warn(`workspace ${target.workspaceId}: not recorded, the spool is unusable (${(err as Error).message})`);
      return null;
    }
    const startedAt = new Date();
    const capturePrefix = capturePrefixOf(target.workspaceId, id);
    const rowCreated = this.rows.create({ id, workspaceId: target.workspaceId, userId: target.userId, clientId: target.clientId, storageUrl: this.config.STORAGE_URL, capturePrefix, startedAt });
    const recorder = new SessionRecorder({ id, capturePrefix, spoolDir, startedAt, upload: this.upload, rows: this.rows, rowCreated, limits: this.limits, log: this.logger });
    this.live.add(recorder);
    // Only once finalized: a shutdown waits for recordings that are still uploading their last segment.
    const forget = () => this.live.delete(recorder);
    void rowCreated.catch(() => undefined);
    recorder.closed.then(forget, forget);
    return recorder;
  }

  /** Recordings of this api not finalized yet. */
  get openCount(): number {
    return this.live.size;
  }
}
