// Casting links (#/cast/<key>): ask the api what the link needs (GET /api/client/cast/<key>/info), show the
// captcha or send the visitor to sign in when it says so, then launch (POST /api/client/cast) and follow the
// answer's workspace_url into the connect flow; a refusal goes to the link's error_url, else to an error page
// that names the reason.
import { errorMessage, getJson, NetworkError, postJson } from './api.js';
import { h, showPage } from './ui.js';

export const SESSION_STORAGE_KEY = 'workspace-server.session';
/** The casting link to come back to after signing in (the login page reads it). */
export const CAST_RETURN_KEY = 'workspace-server.cast-return';
/** The captcha provider's script when the api's info does not name one (explicit rendering, see loadCaptcha). */
const DEFAULT_CAPTCHA_SCRIPT_URL = 'https://www.google.com/recaptcha/api.js';
const CAPTCHA_READY_POLLS = 150;
const CAPTCHA_READY_POLL_MS = 100;

/** Reasons the api gives (spec, Errors 3) with what the page says about each. */
const REASONS = {
  unknown_link: ['This link is not valid', 'Check the address, or ask for a new link.'],
  expired: ['This link has expired', 'Ask for a new link.'],
  referrer: ['This link cannot be opened from here', 'Open it from the page that offers it.'],
  session_limit: ['This link has been used up', 'It allows no more sessions.'],
  address_limit: ['Too many sessions from your address', 'Wait a while, then try again.'],
  login_required: ['Sign in to open this link', 'Open the login link you were given in this tab; you come back here after signing in.'],
  captcha_required: ['Confirm that you are a person', 'The captcha must be solved first.'],
  captcha_failed: ['The captcha was not accepted', 'Try again.'],
  network_not_allowed: ['This network cannot be chosen', 'The link does not allow the requested container network.'],
  no_capacity: ['No workspace is free right now', 'Try again in a few minutes.'],
  session_limit_reached: ['All workspaces of this service are in use', 'Try again in a few minutes.'],
  not_licensed: ['This link is not available', 'The service is not licensed for launch links.'],
};

/**
 * @param {AbortSignal} signal aborted when the route changes
 * @param {{key: string, args: Record<string, string>}} route
 * @param {() => void} retry runs the route again
 */
export async function openCastLink(signal, route, retry) {
  document.title = 'Opening… · workspace-server';
  showPage({ state: 'loading', key: 'cast', title: 'Opening…', lead: 'Checking your link.' });
  const infoAnswer = await call(() => getJson(`/api/client/cast/${encodeURIComponent(route.key)}/info`, { signal }), signal, retry);
  if (!infoAnswer) return;
  if (infoAnswer.status !== 200 || !infoAnswer.data || typeof infoAnswer.data !== 'object') {
    return showRefusal(infoAnswer.status === 404 ? 'unknown_link' : infoAnswer.data?.reason, errorMessage(infoAnswer.data), retry);
  }
  const info = infoAnswer.data;
  const session = signedInSession();
  if (!info.allow_anonymous && !session) return showSignIn();

  const body = { key: route.key, ...route.args };
  if (session) body.session_jwt = session.session_jwt;
  // The page that sent the visitor here (allowed_referrers): the POST's own Referer would be this page's
  // address at most (the client sends none), so the client passes the document's.
  if (document.referrer) body.referrer = document.referrer;
  if (info.require_recaptcha) {
    const token = await solveCaptcha(signal, info);
    if (token === null) return;
    body.recaptcha_token = token;
  }
  showPage({ state: 'loading', key: 'cast-launch', title: 'Opening…', lead: 'Starting your workspace.' });
  const answer = await call(() => postJson('/api/client/cast', body, { signal, retries: 0 }), signal, retry);
  if (!answer) return;
  const { status, data } = answer;
  if (status === 200 && data && typeof data.workspace_url === 'string' && isClientPath(data.workspace_url)) {
    forgetReturn();
    location.replace(data.workspace_url);
    return;
  }
  const errorUrl = data && typeof data.error_url === 'string' ? data.error_url : '';
  if (errorUrl && /^https?:\/\//i.test(errorUrl)) {
    location.replace(errorUrl);
    return;
  }
  if (data?.reason === 'login_required') return showSignIn();
  showRefusal(data?.reason, errorMessage(data) || `The server answered ${status}.`, retry);
}

/** After a sign-in: the casting link that sent the visitor there, once (null when none). */
export function takeCastReturn() {
  try {
    const target = sessionStorage.getItem(CAST_RETURN_KEY);
    sessionStorage.removeItem(CAST_RETURN_KEY);
    return target && target.startsWith('#/cast/') ? target : null;
  } catch {
    return null;
  }
}

async function call(request, signal, retry) {
  try {
    return await request();
  } catch (err) {
    if (signal.aborted) return null;
    if (err instanceof NetworkError) {
      showRefusal('network', 'The server could not be reached.', retry);
      return null;
    }
    throw err;
  }
}

/** The login session this tab holds (from a #/login/ link), unless it has expired. */
function signedInSession() {
  try {
    const stored = JSON.parse(sessionStorage.getItem(SESSION_STORAGE_KEY) ?? 'null');
    if (!stored || typeof stored.session_jwt !== 'string') return null;
    if (stored.expires_at && Date.parse(stored.expires_at) <= Date.now()) return null;
    return stored;
  } catch {
    return null;
  }
}

/** The connect route of this client, never another site or scheme (the answer is followed as it is). */
function isClientPath(url) {
  return url.startsWith('/#/connect/') || url.startsWith('#/connect/');
}

function showSignIn() {
  try {
    sessionStorage.setItem(CAST_RETURN_KEY, location.hash);
  } catch {
    // storage disabled: the visitor opens the casting link again after signing in
  }
  const [title, lead] = REASONS.login_required;
  document.title = 'Sign in · workspace-server';
  showPage({ state: 'login-required', key: 'cast-login', title, lead, tone: 'warn' });
}

function showRefusal(reason, message, retry) {
  const known = typeof reason === 'string' && Object.hasOwn(REASONS, reason);
  const [title, lead] = known ? REASONS[reason] : ['This link cannot be opened', 'Try again later.'];
  document.title = `${title} · workspace-server`;
  const again = !known || ['address_limit', 'captcha_failed', 'no_capacity', 'session_limit_reached'].includes(reason);
  showPage({
    state: 'error',
    key: `cast-${known ? reason : 'error'}`,
    title,
    lead,
    body: [h('p', { class: 'meta' }, 'Reason: ', h('code', { id: 'cast-reason' }, known ? reason : String(reason ?? 'error')))],
    detail: message || undefined,
    actions: again ? [{ label: 'Try again', onClick: retry }] : [],
    tone: 'warn',
  });
}

function forgetReturn() {
  try {
    sessionStorage.removeItem(CAST_RETURN_KEY);
  } catch {
    // storage disabled
  }
}

/**
 * Shows the captcha with the site key from the info answer and resolves with its token (null when the
 * route changed). The provider's script is loaded only here, from the info answer's recaptcha_script_url when
 * given (tests point it at a loopback stand-in), rendered explicitly into the page's card.
 */
async function solveCaptcha(signal, info) {
  const box = h('div', { id: 'cast-captcha' });
  document.title = 'Confirm · workspace-server';
  showPage({ state: 'captcha', key: 'cast-captcha', title: REASONS.captcha_required[0], lead: 'Solve the captcha to open your workspace.', body: [box] });
  const captcha = await loadCaptcha(info.recaptcha_script_url || DEFAULT_CAPTCHA_SCRIPT_URL, signal);
  if (signal.aborted) return null;
  return new Promise((resolve) => {
    signal.addEventListener('abort', () => resolve(null), { once: true });
    captcha.render(box, { sitekey: String(info.recaptcha_site_key ?? ''), callback: (token) => resolve(String(token)) });
  });
}

async function loadCaptcha(scriptUrl, signal) {
  const ready = () => window.grecaptcha && typeof window.grecaptcha.render === 'function';
  if (!ready()) {
    const url = new URL(scriptUrl, location.href);
    url.searchParams.set('render', 'explicit');
    await new Promise((resolve, reject) => {
      const script = h('script', { src: url.href, async: true });
      script.addEventListener('load', resolve, { once: true });
      script.addEventListener('error', () => reject(new Error('The captcha could not be loaded. Reload the page to try again.')), { once: true });
      document.head.append(script);
    });
  }
  // The provider's script defines grecaptcha.render once its own parts have loaded.
  for (let poll = 0; poll < CAPTCHA_READY_POLLS && !ready(); poll++) {
    if (signal.aborted) return null;
    await new Promise((resolve) => setTimeout(resolve, CAPTCHA_READY_POLL_MS));
  }
  if (!ready()) throw new Error('The captcha did not start. Reload the page to try again.');
  return window.grecaptcha;
}
