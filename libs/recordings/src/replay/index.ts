export { ReplayDecodeError } from './errors';
export { RfbReplayDecoder } from './rfb-replay';
export type { RfbReplayOptions, ReplayImage, ReplayCursor, ReplayStats } from './rfb-replay';
