/** Thrown by a job handler when retrying cannot help; the queue runner stops retrying it. */
export class PermanentFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PermanentFailure';
  }
}
