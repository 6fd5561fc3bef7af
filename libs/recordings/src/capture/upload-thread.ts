/** Entry point of the recording upload thread (ThreadedUploader in segment-uploader.ts). */
import { parentPort, workerData } from 'node:worker_threads';
import type { StorageSettings } from '@ws/storage';
import { serveUploads } from './segment-uploader';

const data = workerData as { url: string; settings: StorageSettings };
if (parentPort) serveUploads(parentPort, data.url, data.settings);
