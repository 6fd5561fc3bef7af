// JSON calls to the api's browser endpoints (/api/client/*), with bounded retries on network errors.

/** The server could not be reached (after the retries). */
export class NetworkError extends Error {}

/** Resolves after `ms`, or rejects with the abort reason as soon as `signal` aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    function onAbort() {
      clearTimeout(timer);
      reject(signal.reason);
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Gateway answers retried here (and by app.js for the page's early connect call). */
export const TRANSIENT_STATUSES = new Set([502, 503, 504]);

/**
 * POSTs `body` as JSON and answers `{status, data}` (data: the parsed JSON body, or null).
 * Network failures and gateway errors (502/503/504) are retried `retries` times with a growing delay;
 * after that a NetworkError is thrown (or the last transient answer is returned).
 */
export function postJson(path, body, { signal, retries = 4 } = {}) {
  const init = { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) };
  return requestJson(path, init, { signal, retries });
}

/** GET `path` as JSON, answering `{status, data}` like postJson (same retries). */
export function getJson(path, { signal, retries = 4 } = {}) {
  return requestJson(path, { headers: { accept: 'application/json' } }, { signal, retries });
}

async function requestJson(path, init, { signal, retries }) {
  for (let attempt = 0; ; attempt++) {
    let response;
    try {
      response = await fetch(path, { ...init, credentials: 'same-origin', cache: 'no-store', signal });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (attempt >= retries) throw new NetworkError(err instanceof Error ? err.message : String(err));
      await sleep(backoff(attempt), signal);
      continue;
    }
    if (TRANSIENT_STATUSES.has(response.status) && attempt < retries) {
      await sleep(backoff(attempt), signal);
      continue;
    }
    let data = null;
    try {
      data = await response.json();
    } catch {
      if (signal?.aborted) throw signal.reason;
      data = null;
    }
    return { status: response.status, data };
  }
}

function backoff(attempt) {
  return Math.min(500 * 2 ** attempt, 4000);
}

/** The server's error_message, if the body carries one. */
export function errorMessage(data) {
  return data && typeof data.error_message === 'string' ? data.error_message : '';
}
