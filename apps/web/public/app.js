// The browser client of workspace-server: routes, the connect flow and the page states.
// Test hooks: document.body.dataset.state and window.__rfb (the noVNC RFB object while a session exists).
// Timing: performance marks `client:…` along the connect flow (see mark() in session.js).
import { errorMessage, NetworkError, postJson, sleep, TRANSIENT_STATUSES } from './api.js';
import { openCastLink, SESSION_STORAGE_KEY, takeCastReturn } from './cast.js';
import { mountFiles } from './files.js';
import { parseLocation } from './route.js';
import { mark, openSession } from './session.js';
import { h, progressBar, showPage } from './ui.js';

// While the workspace starts, each call asks the server to answer at its next change (wait_while_starting), so
// `running` reaches the page at once. Only an answer that brings nothing new (a server that could not wait) is
// followed by a pause, growing from the first to the longest.
const START_POLL_FIRST_MS = 200;
const START_POLL_MAX_MS = 1000;
const START_WAIT_MAX_MS = 180_000;
const MAX_START_POLLS = 400;
const MAX_STREAM_RETRIES = 3;
const LINK_STORAGE_PREFIX = 'workspace-server.link.';
// noVNC: the bundle the page names (and preloads) in <meta name="viewer-module">; without one, its modules,
// relative to this module.
const NOVNC = document.querySelector('meta[name="viewer-module"]')?.content || new URL('./novnc/core/rfb.js', import.meta.url).href;

/** What the current route owns: aborted/closed when the route changes. */
let current = null;
let tipsShown = false;

function run() {
  if (current) {
    current.controller.abort(new DOMException('route changed', 'AbortError'));
    current.session?.close();
  }
  const controller = new AbortController();
  const { route, flags } = parseLocation(location);
  const mine = { controller, route, session: null, streamFailures: 0 };
  current = mine;
  const work = route.name === 'workspace' || route.name === 'join' ? connect(mine, route, flags)
    : route.name === 'login' ? login(mine, route)
      : route.name === 'cast' ? openCastLink(controller.signal, route, () => run())
      : Promise.resolve(landing());
  work.catch((err) => {
    if (controller.signal.aborted) return;
    console.error(err);
    showGenericError(err instanceof Error ? err.message : String(err), () => run());
  });
}

function landing() {
  document.title = 'workspace-server';
  showPage({
    state: 'landing',
    title: 'workspace-server',
    lead: 'Streamed desktops in your browser.',
    detail: 'To open a workspace, use the link you were given.',
  });
}

// ---------------------------------------------------------------------------------------------------------
// Connect flow

async function connect(mine, route, flags) {
  const { signal } = mine.controller;
  const jwt = takeLinkJwt(route);
  if (!jwt) return showInvalidLink('This tab no longer holds the link\'s session. Open the link you were given again.');
  const body = route.name === 'join' ? { session_jwt: jwt, share_id: route.shareId } : { session_jwt: jwt, workspace_id: route.workspaceId };
  const retry = () => run();
  document.title = 'Connecting… · workspace-server';
  showPage({ state: 'loading', title: 'Connecting…', lead: 'Connecting to your workspace.' });

  let viewer = null;
  const giveUpAt = Date.now() + START_WAIT_MAX_MS;
  let pollMs = START_POLL_FIRST_MS;
  let lastSeen = '';
  for (let poll = 0; poll < MAX_START_POLLS && Date.now() < giveUpAt; poll++) {
    let answer;
    try {
      const send = () => postJson('/api/client/connect', poll === 0 ? body : { ...body, wait_while_starting: true }, { signal });
      const early = poll === 0 ? takeEarlyConnect(body) : null;
      if (!early) mark('connect-sent');
      // The page's own first call, when it answered; sent again (with postJson's retries) when it could not.
      const call = early ? early.then((answer) => (TRANSIENT_STATUSES.has(answer.status) ? send() : answer), send) : send();
      // The viewer loads while the first call runs: after it, so the call does not wait for a free connection.
      if (!viewer) {
        viewer = loadRfb(signal);
        viewer.catch(() => undefined); // seen where it is awaited; a link that fails never awaits it
      }
      answer = await call;
      mark('connect-answered');
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof NetworkError) return showNetworkError(retry);
      throw err;
    }
    if (signal.aborted) return;
    const { status, data } = answer;
    if (status === 200 && data && typeof data === 'object') {
      switch (data.operational_status) {
        case 'running':
          return startSession(mine, data, flags, viewer);
        case 'starting': {
          showStarting(data);
          const seen = `${data.operational_progress}\n${data.operational_message}`;
          if (poll > 0 && seen === lastSeen) {
            await sleep(pollMs, signal);
            pollMs = Math.min(START_POLL_MAX_MS, Math.round(pollMs * 1.5));
          }
          lastSeen = seen;
          continue;
        }
        case 'stopping':
        case 'stopped':
          return showEnded(data.operational_message);
        default:
          return showGenericError(`Unexpected workspace status "${String(data.operational_status)}".`, retry);
      }
    }
    if (status === 401) return showInvalidLink(errorMessage(data));
    if (status === 400) return showUnavailable(errorMessage(data));
    if (status === 403 || status === 409) return showRefused(errorMessage(data));
    return showGenericError(errorMessage(data) || `The server answered ${status}.`, retry);
  }
  showPage({
    state: 'error',
    key: 'start-timeout',
    title: 'The workspace did not start in time',
    lead: 'It is still not ready after several minutes. Try again, or ask for a new link.',
    actions: [{ label: 'Try again', onClick: retry }],
    tone: 'warn',
  });
}

/**
 * The first connect call the page's inline script sent for this very link (index.html) while these modules loaded,
 * taken once: its answer promise, or null when there is none or it was for another link.
 */
function takeEarlyConnect(body) {
  const early = window.__earlyConnect;
  window.__earlyConnect = undefined;
  if (!early || early.body.session_jwt !== body.session_jwt || early.body.workspace_id !== body.workspace_id || early.body.share_id !== body.share_id) return null;
  return early.answer;
}

/**
 * The link's JWT, moved out of the address bar (and so out of history, bookmarks and screen shares) into
 * this tab's sessionStorage before it is used: the address keeps the route without it, and a reload finds
 * the JWT there. Without storage (disabled) the JWT leaves the address all the same; a reload then asks for
 * the link again.
 */
function takeLinkJwt(route) {
  const key = `${LINK_STORAGE_PREFIX}${route.name}.${route.name === 'join' ? route.shareId : route.workspaceId}`;
  if (!route.jwt) {
    try {
      return sessionStorage.getItem(key);
    } catch {
      return null;
    }
  }
  try {
    sessionStorage.setItem(key, route.jwt);
  } catch {
    // storage disabled: this page load still works
  }
  const hash = location.hash;
  const query = hash.includes('?') ? hash.slice(hash.indexOf('?')) : '';
  const id = route.name === 'join' ? route.shareId : route.workspaceId;
  const kind = route.name === 'join' ? 'join' : 'workspace';
  try {
    history.replaceState(null, '', `${location.pathname}${location.search}#/connect/${kind}/${encodeURIComponent(id)}/${encodeURIComponent(route.userId)}${query}`);
  } catch {
    // not allowed (sandboxed): harmless
  }
  return route.jwt;
}

function showStarting(data) {
  document.title = 'Starting… · workspace-server';
  const message = typeof data.operational_message === 'string' && data.operational_message ? data.operational_message : 'Starting your workspace…';
  const existing = document.getElementById('start-progress');
  if (document.body.dataset.state === 'starting' && existing) {
    const pct = Math.max(0, Math.min(100, Math.round(Number(data.operational_progress) || 0)));
    existing.querySelector('progress').value = pct;
    existing.querySelector('.progress-value').textContent = `${pct}%`;
    const msg = document.getElementById('start-message');
    if (msg.textContent !== message) msg.textContent = message;
    return;
  }
  const bar = progressBar(data.operational_progress, 'Start-up progress');
  bar.id = 'start-progress';
  showPage({
    state: 'starting',
    title: 'Starting your workspace',
    body: [bar, h('p', { class: 'message', id: 'start-message', role: 'status' }, message)],
    detail: 'This page continues by itself when the workspace is ready.',
  });
}

async function startSession(mine, info, flags, viewer) {
  const { signal } = mine.controller;
  showPage({ state: 'loading', key: 'opening', title: 'Connecting…', lead: 'Opening the desktop stream.' });
  const RFB = await viewer;
  mark('viewer-ready');
  if (signal.aborted) return;
  document.title = `${info.username ? `${info.username} · ` : ''}workspace-server`;
  const showTips = !tipsShown;
  mine.session = openSession(RFB, {
    info,
    flags,
    showTips,
    onConnect: () => {
      mine.files?.dispose();
      mine.files = mountFiles(info, flags);
      mine.streamFailures = 0;
      if (showTips && !flags.disable_tips) tipsShown = true;
    },
    onEnd: (end) => {
      mine.session = null;
      mine.files?.dispose();
      if (signal.aborted) return;
      // A stream that never opened is retried a few times (a network change can abort a websocket that
      // is still connecting); the connect flow runs again, so a workspace that ended says so.
      if (!end.connected && end.reason === 'lost' && mine.streamFailures < MAX_STREAM_RETRIES) {
        mine.streamFailures += 1;
        sleep(500 * mine.streamFailures, signal).then(() => connect(mine, mine.route, flags)).catch((err) => {
          if (signal.aborted) return;
          console.error(err);
          showGenericError(err instanceof Error ? err.message : String(err), () => run());
        });
        return;
      }
      showDisconnected(end);
    },
  });
}

/**
 * noVNC, loaded on first use (the landing and login pages do not need it). A failed module fetch (for
 * example net::ERR_NETWORK_CHANGED while the module graph loads) is retried a few times.
 */
async function loadRfb(signal) {
  for (let attempt = 0; ; attempt++) {
    try {
      const module = await import(NOVNC);
      return module.default;
    } catch (err) {
      if (signal.aborted) throw err;
      if (attempt >= 3) throw new Error(`The desktop viewer could not be loaded (${err instanceof Error ? err.message : String(err)}). Reload the page to try again.`);
      await sleep(300 * 2 ** attempt, signal);
    }
  }
}

function showDisconnected({ reason, detail }) {
  document.title = 'Disconnected · workspace-server';
  if (reason === 'security') {
    showPage({
      state: 'error',
      key: 'security',
      title: 'Could not open the desktop stream',
      lead: 'The connection to the workspace was refused.',
      detail: detail || undefined,
      actions: [{ label: 'Try again', onClick: () => run() }],
      tone: 'bad',
    });
    return;
  }
  const lead = reason === 'user' ? 'You disconnected from the workspace.'
    : reason === 'idle' ? `You were disconnected after ${detail} without activity.`
      : 'The connection to the workspace was lost.';
  showPage({
    state: 'disconnected',
    title: 'Disconnected',
    lead,
    actions: [{ label: 'Reconnect', onClick: () => run() }],
  });
}

function showEnded(message) {
  document.title = 'Workspace ended · workspace-server';
  showPage({
    state: 'ended',
    title: 'This workspace has ended',
    lead: 'It is no longer running. Ask for a new workspace if you need one.',
    detail: typeof message === 'string' && message ? message : undefined,
  });
}

function showInvalidLink(message) {
  document.title = 'Link no longer valid · workspace-server';
  showPage({
    state: 'error',
    key: 'invalid-link',
    title: 'This link is no longer valid',
    lead: 'Ask for a new link.',
    detail: message || undefined,
    tone: 'warn',
  });
}

function showRefused(message) {
  document.title = 'Access refused · workspace-server';
  showPage({
    state: 'error',
    key: 'refused',
    title: 'This workspace cannot be opened',
    lead: 'Access to it was refused.',
    detail: message || undefined,
    tone: 'warn',
  });
}

function showUnavailable(message) {
  document.title = 'Not available · workspace-server';
  showPage({
    state: 'error',
    key: 'unavailable',
    title: 'This workspace is not available',
    lead: 'It may have been removed, or the link is wrong.',
    detail: message || undefined,
    tone: 'warn',
  });
}

function showNetworkError(retry) {
  document.title = 'Connection problem · workspace-server';
  showPage({
    state: 'error',
    key: 'network',
    title: 'Cannot reach the server',
    lead: 'Check your network connection and try again.',
    actions: [{ label: 'Try again', onClick: retry }],
    tone: 'bad',
  });
}

function showGenericError(message, retry) {
  document.title = 'Error · workspace-server';
  showPage({
    state: 'error',
    key: 'generic',
    title: 'Something went wrong',
    lead: 'The workspace could not be opened.',
    detail: message || undefined,
    actions: retry ? [{ label: 'Try again', onClick: retry }] : [],
    tone: 'bad',
  });
}

// ---------------------------------------------------------------------------------------------------------
// Login links (#/login/<secret>, from get_login)

async function login(mine, route) {
  const { signal } = mine.controller;
  document.title = 'Signing in… · workspace-server';
  showPage({ state: 'loading', title: 'Signing in…', lead: 'Checking your login link.' });
  let answer;
  try {
    answer = await postJson('/api/client/login', { login_token: route.secret }, { signal });
  } catch (err) {
    if (signal.aborted) return;
    if (err instanceof NetworkError) return showNetworkError(() => run());
    throw err;
  }
  if (signal.aborted) return;
  const { status, data } = answer;
  if (status === 200 || status === 400 || status === 401) forgetSecretInAddress();
  if (status === 200 && data && typeof data === 'object' && data.session_token?.session_jwt) {
    try {
      sessionStorage.setItem(SESSION_STORAGE_KEY, JSON.stringify({
        user_id: data.user_id,
        session_jwt: data.session_token.session_jwt,
        expires_at: data.session_token.expires_at ?? null,
      }));
    } catch {
      // storage disabled (private mode, sandboxed iframe): the sign-in still happened
    }
    // Sent here by a casting link that needs a signed-in visitor: back to it.
    const castLink = takeCastReturn();
    if (castLink) {
      location.replace(castLink);
      return;
    }
    document.title = 'Signed in · workspace-server';
    showPage({
      state: 'logged-in',
      title: 'Signed in',
      lead: 'You are signed in.',
      body: [h('p', { class: 'meta' }, 'User ID: ', h('code', { id: 'signed-in-user' }, String(data.user_id)))],
      tone: 'good',
    });
    return;
  }
  if (status === 409) {
    document.title = 'Cannot sign in · workspace-server';
    showPage({
      state: 'error',
      key: 'login-refused',
      title: 'Cannot sign in',
      lead: 'This account cannot sign in at the moment.',
      detail: errorMessage(data) || undefined,
      tone: 'warn',
    });
    return;
  }
  if (status === 400 || status === 401) {
    document.title = 'Login link not valid · workspace-server';
    showPage({
      state: 'error',
      key: 'invalid-login',
      title: 'Cannot sign in',
      lead: 'This login link is invalid, expired or already used.',
      detail: errorMessage(data) || undefined,
      tone: 'warn',
    });
    return;
  }
  showGenericError(errorMessage(data) || `The server answered ${status}.`, () => run());
}

/** A login secret is single-use: take it out of the address bar and history once it has been spent. */
function forgetSecretInAddress() {
  try {
    history.replaceState(null, '', `${location.pathname}${location.search}#/`);
  } catch {
    // not allowed (sandboxed): harmless
  }
}

// ---------------------------------------------------------------------------------------------------------

window.addEventListener('hashchange', () => run());
document.documentElement.dataset.app = 'ready';
mark('page-start');
run();
