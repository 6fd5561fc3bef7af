import { DatabaseError } from 'pg';
import { QueryFailedError } from 'typeorm';
import { describeError } from './api-exception.filter';

function serverError(code: string, message: string): DatabaseError {
  const error = new DatabaseError(message, message.length, 'error');
  error.severity = 'FATAL';
  error.code = code;
  return error;
}

describe('describeError: dependency outages', () => {
  it('a database that is shutting down answers 503 naming PostgreSQL, without an error_id', () => {
    expect(describeError(new QueryFailedError('SELECT 1', [], serverError('57P01', 'terminating connection due to administrator command'))))
      .toEqual({ status: 503, body: { error_message: 'PostgreSQL is unavailable; retry later' }, retryAfterSeconds: 5 });
  });

  it('a Redis command without an answer answers 503 naming Redis', () => {
    expect(describeError(new Error('Command timed out'))).toEqual({ status: 503, body: { error_message: 'Redis is unavailable; retry later' }, retryAfterSeconds: 5 });
  });

  it('a bug stays a 500 with an error_id', () => {
    const { status, body } = describeError(new QueryFailedError('INSERT', [], serverError('23505', 'duplicate key value violates unique constraint')));
    expect({ status, body }).toEqual({ status: 500, body: { error_message: 'Internal error', error_id: expect.stringMatching(/^[0-9a-f]{32}$/) } });
  });
});
