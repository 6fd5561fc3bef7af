import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { Webhook as StandardWebhook } from 'standardwebhooks';

/** Bound of one delivery, connect to last byte of the answer (issue 22: 10 s). */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** Of the answer only this much is read (the rest is dropped): receivers' bodies are not kept. */
const MAX_ANSWER_BYTES = 4096;

export interface SendResult {
  statusCode: number | null;
  durationMs: number;
  error: string | null;
}

/**
 * The `webhook-signature` header: a `v1,<base64>` signature (standardwebhooks' own `sign`) with each secret, space
 * separated, so a receiver holding either secret of a rotation verifies.
 */
export function signatures(secrets: string[], msgId: string, at: Date, body: string): string {
  return secrets.map((secret) => new StandardWebhook(secret).sign(msgId, at, body)).join(' ');
}

/**
 * POSTs one signed body to `url`, connecting to `address` (the resolved and checked address: a second lookup
 * could answer otherwise); TLS still verifies the certificate against the url's host name. Redirects are not
 * followed (a 3xx is a failure). Never throws.
 */
export function send(url: URL, address: string, headers: Record<string, string>, body: string): Promise<SendResult> {
  const started = performance.now();
  const family = isIP(address) === 6 ? 6 : 4;
  const doRequest = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<SendResult>((resolve) => {
    let done = false;
    const finish = (statusCode: number | null, error: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ statusCode, durationMs: Math.round(performance.now() - started), error });
    };
    const req = doRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'workspace-server-webhooks/1', ...headers },
      lookup: (_host, options, callback) => {
        if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address, family }]);
        else callback(null, address, family);
      },
      agent: false,
    }, (res) => {
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_ANSWER_BYTES) res.destroy();
      });
      const status = res.statusCode ?? null;
      res.on('end', () => finish(status, status !== null && status >= 200 && status < 300 ? null : `HTTP ${status}`));
      res.on('close', () => finish(status, status !== null && status >= 200 && status < 300 ? null : `HTTP ${status}`));
      res.on('error', () => finish(status, `HTTP ${status}`));
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer within ${DELIVERY_TIMEOUT_MS / 1000} s`));
    }, DELIVERY_TIMEOUT_MS);
    req.on('error', (err: NodeJS.ErrnoException) => finish(null, err.code && !err.message.includes(err.code) ? `${err.code}: ${err.message}` : err.message));
    req.end(body);
  });
}
