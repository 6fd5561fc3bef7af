/** A stored refusal replayed for an Idempotency-Key: the exception filter sends its status and body unchanged. */
export class ReplayedAnswer extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
  ) {
    super('replayed answer');
    this.name = 'ReplayedAnswer';
  }
}
