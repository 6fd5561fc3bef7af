// Hash routes of the browser client and the "session component control" query arguments.
//
//   #/connect/workspace/<workspace_id>/<user_id>/<session_jwt>[?args]
//   #/connect/join/<share_id>/<user_id>/<session_jwt>[?args]
//   the same without <session_jwt>: what the address bar shows once the client has taken the JWT out of it
//   (it keeps the JWT in sessionStorage, so a reload of the tab still works)
//   #/login/<secret>
//   #/cast/<key>[?workspace_url=…&container_network=…]: a casting link (the two arguments are passed on to
//   the api, which uses them only when the link allows it)
//   anything else: the landing page
//
// The query arguments are read from the query part after the hash route and from location.search;
// a flag is on when either says 1 (or true).

export const FLAG_NAMES = ['disable_control_panel', 'disable_tips', 'disable_chat', 'disable_fixed_res'];
/** Query arguments of a casting link that go to the api as they are. */
export const CAST_ARGUMENT_NAMES = ['workspace_url', 'container_network'];

/** @param {{hash: string, search: string}} loc */
export function parseLocation(loc) {
  const hash = loc.hash.startsWith('#') ? loc.hash.slice(1) : loc.hash;
  const q = hash.indexOf('?');
  const path = q === -1 ? hash : hash.slice(0, q);
  const hashQuery = q === -1 ? '' : hash.slice(q + 1);
  const sources = [new URLSearchParams(loc.search), new URLSearchParams(hashQuery)];
  const route = parsePath(path);
  if (route.name === 'cast') route.args = readArguments(sources, CAST_ARGUMENT_NAMES);
  return { route, flags: readFlags(sources) };
}

function parsePath(path) {
  const parts = path.split('/').filter((p) => p !== '');
  const decoded = [];
  for (const part of parts) {
    try {
      decoded.push(decodeURIComponent(part));
    } catch {
      return { name: 'landing' };
    }
  }
  const [a, b, c, d, e] = decoded;
  const linked = decoded.length === 5 || decoded.length === 4;
  const jwt = decoded.length === 5 ? e : null;
  if (linked && a === 'connect' && b === 'workspace') return { name: 'workspace', workspaceId: c, userId: d, jwt };
  if (linked && a === 'connect' && b === 'join') return { name: 'join', shareId: c, userId: d, jwt };
  if (decoded.length === 2 && a === 'login') return { name: 'login', secret: b };
  if (decoded.length === 2 && a === 'cast') return { name: 'cast', key: b };
  return { name: 'landing' };
}

/** @param {URLSearchParams[]} sources */
function readFlags(sources) {
  const flags = {};
  for (const name of FLAG_NAMES) {
    flags[name] = sources.some((params) => params.getAll(name).some((v) => v === '1' || v.toLowerCase() === 'true'));
  }
  return flags;
}

/** The named arguments that are present (the hash's query wins over location.search); absent ones are left out. */
function readArguments(sources, names) {
  const args = {};
  for (const name of names) {
    for (const params of sources) {
      const value = params.get(name);
      if (value !== null && value !== '') args[name] = value;
    }
  }
  return args;
}
