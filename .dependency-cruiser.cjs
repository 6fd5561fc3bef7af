/**
 * The library boundaries of ../shared/ARCHITECTURE.md, checked by `npm run lint` (depcruise). Dependencies point
 * down: apps → feature libraries → identity and catalog libraries → infrastructure. A library is used through its
 * index. No cycles, between libraries or between the files of one. test/structure/dependency-rules.spec.ts plants a
 * violation of each rule and sees the check fail.
 */
const INFRASTRUCTURE = ['common', 'database', 'queue', 'agent', 'stream', 'storage', 'settings'];
const IDENTITY = ['users', 'groups', 'images', 'servers', 'zones', 'licensing', 'egress', 'auth'];
const FEATURES = ['workspaces', 'staging', 'casting', 'recordings', 'files', 'profiles', 'server-sessions', 'webhooks'];
/** Published on its own (@workspace-server/client): it talks HTTP to the api and imports no server code. */
const STANDALONE = ['client'];

const libs = (names) => `^libs/(${names.join('|')})/`;

module.exports = {
  forbidden: [
    {
      name: 'infrastructure-points-up',
      comment: 'An infrastructure library imports no area library and no app: it is handed an interface or subscribes instead.',
      severity: 'error',
      from: { path: libs(INFRASTRUCTURE) },
      to: { path: [libs([...IDENTITY, ...FEATURES]), '^apps/'] },
    },
    {
      name: 'identity-points-up',
      comment: 'An identity or catalog library imports no feature library and no app.',
      severity: 'error',
      from: { path: libs(IDENTITY) },
      to: { path: [libs(FEATURES), '^apps/'] },
    },
    {
      name: 'feature-points-up',
      comment: 'A library imports no app.',
      severity: 'error',
      from: { path: libs(FEATURES) },
      to: { path: '^apps/' },
    },
    {
      name: 'client-stands-alone',
      comment: 'The typed client (libs/client) is published alone: it imports nothing of the apps or the other libraries.',
      severity: 'error',
      from: { path: libs(STANDALONE) },
      to: { path: '^(apps|libs)/', pathNot: libs(STANDALONE) },
    },
    {
      name: 'server-code-does-not-use-the-client',
      comment: 'Only tests, benchmarks and the OpenAPI drift check use the client; the server never calls itself through it.',
      severity: 'error',
      from: { path: '^(apps|libs)/', pathNot: [libs(STANDALONE), '\\.spec\\.ts$'] },
      to: { path: libs(STANDALONE) },
    },
    {
      name: 'every-library-has-a-layer',
      comment: 'A new library is placed in a layer here before anything imports it.',
      severity: 'error',
      from: {},
      to: { path: '^libs/', pathNot: libs([...INFRASTRUCTURE, ...IDENTITY, ...FEATURES, ...STANDALONE]) },
    },
    {
      name: 'no-cycle',
      comment: 'No cycle, between libraries or between the files of one library.',
      severity: 'error',
      from: { path: '^(apps|libs)/' },
      to: { circular: true },
    },
    {
      name: 'library-through-its-index',
      comment: 'Another library is imported through its index (@ws/<lib>), never a file inside it.',
      severity: 'error',
      from: { path: '^libs/([^/]+)/' },
      to: { path: '^libs/[^/]+/src/', pathNot: ['^libs/$1/', '^libs/[^/]+/src/index\\.ts$'] },
    },
    {
      name: 'apps-and-tests-through-the-index',
      comment: 'Apps, tests and benchmarks use a library through its index too.',
      severity: 'error',
      from: { path: '^(apps|test|bench)/' },
      to: { path: '^libs/[^/]+/src/', pathNot: '^libs/[^/]+/src/index\\.ts$' },
    },
    {
      name: 'resolvable',
      comment: 'Every import resolves (a deep @ws/<lib>/<file> path no longer does: tsconfig maps only @ws/<lib>).',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['^dist/', '^node_modules/', '^apps/web/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
