export { convertCapture, THUMBNAIL_WIDTH } from './convert-capture';
export type { ConvertCaptureInput, ConvertedRecording } from './convert-capture';
export { probeVideo, VideoEncodingError } from './ffmpeg';
export type { VideoProbe } from './ffmpeg';
