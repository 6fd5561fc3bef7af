// What other libraries and the apps use of @ws/stream; everything else is internal to it.
export type { BottleneckFigures } from './bottleneck';
export { vncAuthResponse } from './des';
export { Encoding } from './encodings';
export { RfbError, toApiError } from './errors';
export { StreamFeeder, read, skip } from './feeder';
export type { Need, ParserGenerator } from './feeder';
export { RGBX32, compactPixelSize, encodePixelFormat, isValidBpp, parsePixelFormat } from './pixel-format';
export type { PixelFormat } from './pixel-format';
export { ReadBufferPool } from './read-buffer-pool';
export { authenticateToServer, greetBrowser } from './rfb-handshake';
export { ClientMessage, TightFilter, readColourMapHeader, readCutTextHeader, readDesktopName, readFence, readRectHeader, readServerInit, readTightData, readTightHead, readUpdateHeader, ServerMessage } from './rfb-messages';
export { DEFAULT_MAX_PIXELS, RfbClient } from './rfb-client';
export type { RfbFrame } from './rfb-client';
export { RfbSession, RfbSessionRegistry } from './rfb-proxy';
export type { RfbSessionRecorder, RfbSessionStats } from './rfb-proxy';
export { cat, compactLength, rectHeader, serverInit, u16, u32, u8, update } from './rfb-test-helpers';
export { captureJpeg, encodeScaledJpeg, scaleRgba } from './screenshot';
export { checkVncServer } from './vnc-server-check';
