import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { closeLogFiles, logFileStream, logFormat, loggerOptions, requestIdOf } from './log-options';

describe('log options', () => {
  it('redacts secrets wherever they sit, by configuration', () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => void (lines.push(chunk.toString()), done()) });
    const { redact, formatters, messageKey, timestamp } = loggerOptions({ LOG_LEVEL: 'log', LOG_FORMAT: 'json' }, 'test');
    const logger = pino({ redact, formatters, messageKey, timestamp }, sink);
    logger.info({ api_key: 'k1', api_key_secret: 's1', target_user: { username: 'u', password: 'p1' }, body: { user: { session_jwt: 'j1' } } }, 'hello');
    logger.info({ req: { headers: { authorization: 'Basic s2', cookie: 'c=s3', accept: '*/*' } } }, 'headers');
    const text = lines.join('');
    for (const secret of ['s1', 'p1', 'j1', 'Basic s2', 'c=s3']) expect(text).not.toContain(secret);
    const first = JSON.parse(lines[0]) as Record<string, unknown>;
    expect(first).toMatchObject({ level: 'info', msg: 'hello', api_key: 'k1', api_key_secret: '[redacted]', target_user: { username: 'u', password: '[redacted]' } });
    expect(Number.isNaN(Date.parse(first.time as string))).toBe(false);
    expect(JSON.parse(lines[1])).toMatchObject({ req: { headers: { accept: '*/*', authorization: '[redacted]', cookie: '[redacted]' } } });
  });

  it('keeps a sane X-Request-Id and makes one otherwise', () => {
    expect(requestIdOf({ headers: { 'x-request-id': 'abc-123.x:y_z' } })).toBe('abc-123.x:y_z');
    for (const bad of [undefined, '', 'a b', 'x'.repeat(129), '"quoted"']) expect(requestIdOf({ headers: { 'x-request-id': bad } })).toMatch(/^[0-9a-f]{32}$/);
  });

  it('LOG_FORMAT picks, else pretty on a terminal and JSON otherwise', () => {
    expect(logFormat({ LOG_LEVEL: 'log', LOG_FORMAT: 'json' }, true)).toBe('json');
    expect(logFormat({ LOG_LEVEL: 'log', LOG_FORMAT: 'pretty' }, false)).toBe('pretty');
    expect(logFormat({ LOG_LEVEL: 'log' }, true)).toBe('pretty');
    expect(logFormat({ LOG_LEVEL: 'log' }, false)).toBe('json');
  });
});

describe('LOG_FILE', () => {
  it('appends JSON lines to the file, whatever LOG_FORMAT says, one descriptor per path', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ws-log-file-'));
    const path = join(dir, 'sub', 'run.log');
    try {
      const settings = { LOG_LEVEL: 'log', LOG_FORMAT: 'pretty', LOG_FILE: path };
      expect(logFormat(settings, true)).toBe('json');
      const { redact, formatters, messageKey, timestamp } = loggerOptions(settings, 'test');
      const first = pino({ redact, formatters, messageKey, timestamp }, logFileStream(path));
      const second = pino({ redact, formatters, messageKey, timestamp }, logFileStream(path));
      first.info({ password: 'never-in-the-file' }, 'one');
      second.info('two');
      const lines = readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines).toMatchObject([{ msg: 'one', password: '[redacted]' }, { msg: 'two' }]);
    } finally {
      closeLogFiles();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
