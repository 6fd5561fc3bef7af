export { ReplayDecodeError } from './errors';
export { RfbReplayDecoder, RfbReplayOptions, ReplayImage, ReplayCursor, ReplayStats } from './rfb-replay';
