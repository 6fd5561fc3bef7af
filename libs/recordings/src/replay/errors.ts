import { CaptureFormatError } from '../capture-format';

/**
 * The recorded RFB stream cannot be decoded (garbage, an impossible size, an encoding the gateway never lets
 * through...). A CaptureFormatError: the capture itself is bad, so converting it again cannot succeed.
 */
export class ReplayDecodeError extends CaptureFormatError {
  constructor(message: string) {
    super(message);
    this.name = 'ReplayDecodeError';
  }
}
