// Small DOM helpers and the full-page states (everything but the live desktop).

/**
 * Creates an element. `attrs`: `class`, `on<event>` handlers, `hidden`/boolean attributes (true/false),
 * anything else as an attribute. Children: nodes or text (null/false skipped). Never parses HTML.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** The state tests and styles key on: loading|starting|connected|disconnected|error|ended|landing|logged-in. */
export function setState(state) {
  document.body.dataset.state = state;
}

const pageEl = () => document.getElementById('page');
const screenEl = () => document.getElementById('screen');

/**
 * Replaces the page with a card. `key` identifies the kind of page: re-showing the same key updates the
 * card without moving focus (progress updates); a new key moves focus to the heading for screen readers.
 */
export function showPage({ state, key = state, title, lead, detail, actions = [], body = [], tone = 'neutral' }) {
  setState(state);
  const page = pageEl();
  const previousKey = page.dataset.key;
  page.dataset.key = key;
  page.hidden = false;
  screenEl().hidden = true;
  const heading = h('h1', { id: 'page-title', tabindex: '-1' }, title);
  // The server's message in small print, unless it only repeats the lead.
  const same = (a, b) => a.trim().replace(/\.$/, '').toLowerCase() === b.trim().replace(/\.$/, '').toLowerCase();
  if (detail && lead && same(detail, lead)) detail = undefined;
  page.replaceChildren(
    h('section', { class: `card tone-${tone}`, 'aria-labelledby': 'page-title' },
      heading,
      lead ? h('p', { class: 'lead' }, lead) : null,
      ...body,
      detail ? h('p', { class: 'detail' }, detail) : null,
      actions.length ? h('div', { class: 'actions' }, ...actions.map(({ label, onClick, primary = true }) =>
        h('button', { type: 'button', class: primary ? 'primary' : 'secondary', onclick: onClick }, label))) : null,
    ),
  );
  if (previousKey !== key) heading.focus({ preventScroll: true });
}

/** Shows the desktop and hides the page. */
export function showScreen() {
  const page = pageEl();
  page.hidden = true;
  page.dataset.key = '';
  page.replaceChildren();
  screenEl().hidden = false;
}

export function progressBar(value, label) {
  const pct = Math.max(0, Math.min(100, Math.round(Number(value) || 0)));
  return h('div', { class: 'progress' },
    h('progress', { max: '100', value: String(pct), 'aria-label': label }),
    h('span', { class: 'progress-value', 'aria-hidden': 'true' }, `${pct}%`));
}
