export { convertCapture, ConvertCaptureInput, ConvertedRecording, THUMBNAIL_WIDTH } from './convert-capture';
export { probeVideo, VideoProbe, VideoEncodingError } from './ffmpeg';
