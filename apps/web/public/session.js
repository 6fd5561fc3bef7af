// A live desktop: the noVNC connection, the control panel, the clipboard and the tips dialog.
import { createAudio } from './audio.js';
import { h, setState, showScreen } from './ui.js';

const IDLE_CHECK_MS = 15_000;
/** The longest the sound and the files panel wait for the first picture (a desktop always sends one on request). */
const FIRST_FRAME_WAIT_MAX_MS = 3000;
/** The gateway's close code when it ended the stream after idle_disconnect minutes without input. */
const IDLE_CLOSE_CODE = 4001;

/**
 * A performance mark `client:<name>` (the connect flow's steps, for the first-frame bench and a browser's
 * performance panel); never fails the page.
 */
export function mark(name) {
  try {
    window.performance.mark(`client:${name}`);
  } catch {
    // no User Timing: nothing to record
  }
}

/**
 * Runs `fn(drawn)` once: with true when noVNC has drawn the first framebuffer update that carries pixels, with false
 * after FIRST_FRAME_WAIT_MAX_MS. noVNC has no event for it: its Display's flip() ends every update and draws it,
 * unless rectangles are still being decoded, when the render queue calls it again once they are; and its
 * _handleDataRect() handles each rectangle of pixels. The server's first answer is often made of pseudo-rectangles
 * only (cursor, LED state, desktop size: seen with TigerVNC), a flip with nothing of the desktop in it, so the
 * flips count only once a data rectangle was handled (noVNC 1.7, pinned in package-lock.json and bundled). Without
 * those methods (another noVNC) `fn(false)` runs at once, as before.
 */
function afterFirstFrame(rfb, fn) {
  const display = rfb._display;
  if (!display || typeof display.flip !== 'function' || typeof rfb._handleDataRect !== 'function') return fn(false);
  let done = false;
  let pixels = false;
  const run = (drawn) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    fn(drawn);
  };
  const handleDataRect = rfb._handleDataRect;
  // Both left wrapped (a boolean test per rectangle or update): unwrapping could undo a wrapper someone added since.
  rfb._handleDataRect = function handledDataRect(...args) {
    const handled = handleDataRect.apply(this, args);
    if (handled) pixels = true;
    return handled;
  };
  const flip = display.flip;
  display.flip = function flipped(fromQueue, ...rest) {
    // With rectangles still being decoded (JPEG) a flip is queued, and draws when the queue calls it again.
    const drawsNow = Boolean(fromQueue) || !Array.isArray(display._renderQ) || display._renderQ.length === 0;
    const result = flip.call(this, fromQueue, ...rest);
    if (drawsNow && pixels) run(true);
    return result;
  };
  const timer = setTimeout(() => run(false), FIRST_FRAME_WAIT_MAX_MS);
}

/**
 * Opens the stream described by a running `POST /api/client/connect` answer.
 * Calls `onConnect()` when the desktop's first picture is drawn, and `onEnd({reason, clean, detail, connected})` once when the
 * connection ends (reason: 'user' when the user pressed Disconnect, 'idle' after
 * client_settings.idle_disconnect minutes without input, 'security' when the handshake was refused,
 * otherwise 'lost'; connected: whether it ever got up). Answers `{close()}` to tear it down silently.
 */
export function openSession(RFB, { info, flags, onConnect, onEnd, showTips }) {
  const screen = document.getElementById('screen');
  screen.replaceChildren();
  const settings = info.client_settings ?? {};
  const viewOnly = info.view_only === true;

  let ended = false;
  let connected = false;
  let endReason = 'lost';
  let endDetail = '';
  const cleanups = [];
  const idleMinutes = Number(settings.idle_disconnect) || 0;

  // The websocket is ours (noVNC attaches to it) so the gateway's close reason is seen; this listener is
  // registered before noVNC's handler, so the reason is known when noVNC reports the disconnect.
  mark('stream-opening');
  const channel = new window.WebSocket(streamUrl(info.stream_path));
  channel.addEventListener('open', () => mark('stream-open'), { once: true });
  channel.addEventListener('close', (event) => {
    if (event.code !== IDLE_CLOSE_CODE) return;
    endReason = 'idle';
    endDetail = /after (.+?) without input/.exec(event.reason)?.[1] ?? `${idleMinutes} minute${idleMinutes === 1 ? '' : 's'}`;
  });
  const rfb = new RFB(screen, channel, { shared: true });
  window.__rfb = rfb;
  rfb.viewOnly = viewOnly;
  rfb.background = '#0f1115';
  // Fixed resolution (the default) scales the remote screen to the window, keeping its aspect ratio.
  // With disable_fixed_res=1 the owner (never a view-only joiner) asks the server to follow the window
  // size; scaling stays on so the picture still fits if the server keeps its size.
  rfb.resizeSession = flags.disable_fixed_res && !viewOnly;
  rfb.scaleViewport = true;
  rfb.focusOnClick = !viewOnly;

  const audio = createAudio({ streamPath: info.stream_path, settings, viewOnly });
  const panel = flags.disable_control_panel ? null : buildControlPanel(rfb, { settings, viewOnly, disconnect, extraItems: audio.controls });
  let tips = null;

  rfb.addEventListener('connect', () => {
    if (ended) return;
    mark('rfb-connected');
    connected = true;
    // The first picture first: the sound's encoder (it starts in the workspace when the audio stream opens) and
    // the files panel's call would otherwise compete with the first update for the workspace's CPU and the api.
    afterFirstFrame(rfb, (drawn) => {
      if (drawn) mark('first-frame');
      if (ended) return;
      onConnect?.();
      audio.start();
    });
    showScreen();
    setState('connected');
    if (panel) document.body.append(panel.element);
    if (showTips && !flags.disable_tips) {
      tips = buildTips({ viewOnly, panel: Boolean(panel) });
      document.body.append(tips);
    }
    if (!viewOnly) rfb.focus();
  });
  rfb.addEventListener('securityfailure', (event) => {
    endReason = 'security';
    endDetail = event.detail?.reason ?? '';
  });
  rfb.addEventListener('credentialsrequired', () => {
    // The gateway presents security type None; being asked for a password means something is misconfigured.
    endReason = 'security';
    endDetail = 'The stream asked for a password.';
    rfb.disconnect();
  });
  rfb.addEventListener('clipboard', (event) => {
    // The gateway sends a view-only joiner no clipboard at all; this only keeps the page consistent with it.
    if (settings.allow_workspace_clipboard_down === true && !viewOnly) panel?.clipboardReceived(event.detail?.text ?? '');
  });
  rfb.addEventListener('disconnect', (event) => {
    if (ended) return;
    finish();
    onEnd({ reason: endReason, clean: event.detail?.clean === true, detail: endDetail, connected });
  });

  // Idle disconnect (client_settings.idle_disconnect, minutes; 0 = never). The gateway enforces it for the
  // owner's stream (and says so with IDLE_CLOSE_CODE); this check ends the page's side without a round trip.
  if (idleMinutes > 0 && !viewOnly) {
    let lastInput = Date.now();
    const touch = () => { lastInput = Date.now(); };
    for (const type of ['pointerdown', 'pointermove', 'keydown', 'wheel', 'touchstart']) {
      window.addEventListener(type, touch, { capture: true, passive: true });
      cleanups.push(() => window.removeEventListener(type, touch, { capture: true }));
    }
    const timer = setInterval(() => {
      if (Date.now() - lastInput >= idleMinutes * 60_000) {
        endReason = 'idle';
        endDetail = `${idleMinutes} minute${idleMinutes === 1 ? '' : 's'}`;
        rfb.disconnect();
      }
    }, IDLE_CHECK_MS);
    cleanups.push(() => clearInterval(timer));
  }

  function disconnect() {
    endReason = 'user';
    rfb.disconnect();
  }

  function finish() {
    ended = true;
    audio.close();
    for (const cleanup of cleanups.splice(0)) cleanup();
    panel?.element.remove();
    panel?.dispose();
    tips?.remove();
    if (window.__rfb === rfb) window.__rfb = null;
  }

  return {
    rfb,
    /** Tears the session down without reporting (route change). */
    close() {
      if (ended) return;
      finish();
      try {
        rfb.disconnect();
      } catch {
        // already closed
      }
      screen.replaceChildren();
    },
  };
}

/** ws(s)://<this host><stream_path>: same origin, so the cookie set by /api/client/connect goes along. */
export function streamUrl(streamPath) {
  const url = new URL(streamPath, location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  url.hash = '';
  return url.href;
}

function buildControlPanel(rfb, { settings, viewOnly, disconnect, extraItems = [] }) {
  const cleanups = [];
  const clipboardUp = settings.allow_workspace_clipboard_up === true && !viewOnly;
  // A view-only joiner never gets the workspace's clipboard (the gateway drops it), so no drawer for it either.
  const clipboardDown = settings.allow_workspace_clipboard_down === true && !viewOnly;

  const items = [];

  if (document.fullscreenEnabled) {
    const fullscreen = h('button', { type: 'button', id: 'fullscreen-button', 'aria-pressed': 'false' }, 'Fullscreen');
    fullscreen.addEventListener('click', () => {
      if (document.fullscreenElement) document.exitFullscreen().catch(() => undefined);
      else document.documentElement.requestFullscreen().catch(() => undefined);
    });
    const sync = () => {
      const on = Boolean(document.fullscreenElement);
      fullscreen.setAttribute('aria-pressed', String(on));
      fullscreen.textContent = on ? 'Exit fullscreen' : 'Fullscreen';
    };
    document.addEventListener('fullscreenchange', sync);
    cleanups.push(() => document.removeEventListener('fullscreenchange', sync));
    items.push(fullscreen);
  }

  let clipboardText = null;
  let drawer = null;
  if (clipboardUp || clipboardDown) {
    clipboardText = h('textarea', { id: 'clipboard-text', rows: '4', spellcheck: 'false', 'aria-describedby': 'clipboard-help' });
    const help = clipboardUp && clipboardDown
      ? 'Text copied in the workspace appears here. Edit it and send it to paste into the workspace.'
      : clipboardUp ? 'Send text here to the workspace clipboard.' : 'Text copied in the workspace appears here.';
    drawer = h('div', { class: 'drawer', id: 'clipboard-drawer', hidden: true },
      h('label', { for: 'clipboard-text' }, 'Clipboard'),
      clipboardText,
      h('p', { class: 'help', id: 'clipboard-help' }, help),
      clipboardUp ? h('button', { type: 'button', class: 'primary', onclick: () => rfb.clipboardPasteFrom(clipboardText.value) }, 'Send to workspace') : null,
    );
    const toggle = h('button', { type: 'button', id: 'clipboard-button', 'aria-expanded': 'false', 'aria-controls': 'clipboard-drawer' }, 'Clipboard');
    toggle.addEventListener('click', () => {
      const open = drawer.hidden;
      drawer.hidden = !open;
      toggle.setAttribute('aria-expanded', String(open));
      element.classList.toggle('pinned', open);
      if (open) clipboardText.focus();
    });
    items.push(toggle);
  }

  items.push(...extraItems);
  items.push(h('button', { type: 'button', id: 'disconnect-button', class: 'danger', onclick: disconnect }, 'Disconnect'));

  const handle = h('button', { type: 'button', class: 'handle', 'aria-expanded': 'false', 'aria-controls': 'control-panel-items', title: 'Control panel' }, 'Controls');
  // The tab stays on screen when the panel is folded away: the handle, and for joiners the view-only badge.
  const badge = viewOnly ? h('span', { class: 'badge', id: 'view-only-badge', role: 'status', title: 'You can watch this workspace but not control it' }, 'View only') : null;
  const element = h('nav', { id: 'control-panel', class: 'control-panel', 'aria-label': 'Workspace controls' },
    h('div', { class: 'bar', id: 'control-panel-items' }, ...items),
    drawer,
    h('div', { class: 'tab' }, badge, handle),
  );
  handle.addEventListener('click', () => {
    const open = !element.classList.contains('pinned');
    element.classList.toggle('pinned', open);
    handle.setAttribute('aria-expanded', String(open));
  });

  return {
    element,
    clipboardReceived(text) {
      if (clipboardText) clipboardText.value = text;
    },
    dispose() {
      for (const cleanup of cleanups.splice(0)) cleanup();
    },
  };
}

function buildTips({ viewOnly, panel }) {
  const tips = [];
  if (panel) tips.push('Move the pointer to the top edge of the window for the control panel (disconnect, fullscreen, clipboard).');
  if (viewOnly) tips.push('You are watching a shared workspace: your mouse and keyboard are not sent to it.');
  else tips.push('Click the desktop to give it your keyboard.');
  const dialog = h('div', { class: 'tips', id: 'tips-dialog', role: 'dialog', 'aria-modal': 'false', 'aria-labelledby': 'tips-title' },
    h('h2', { id: 'tips-title' }, 'Tips'),
    h('ul', {}, ...tips.map((t) => h('li', {}, t))),
  );
  dialog.append(h('button', { type: 'button', class: 'primary', onclick: () => dialog.remove() }, 'Got it'));
  return dialog;
}
