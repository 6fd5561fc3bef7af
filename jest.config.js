/** Unit tests sit beside the code (*.spec.ts); e2e tests live in test/e2e and talk to real services. */
const swc = ['@swc/jest', { jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: false }, target: 'es2022', keepClassNames: true } }];
/**
 * Packages that ship only ES modules, which jest's CommonJS loader cannot require: compiled like our sources.
 * content-disposition 3 comes with @fastify/static, which the queue dashboard (@bull-board/fastify) loads.
 */
const ESM_ONLY = ['content-disposition'];
const esmOnly = `(?:@fastify/static/node_modules/)?(?:${ESM_ONLY.join('|')})/`;
const shared = {
  transform: { '^.+\\.ts$': swc, [`/node_modules/${esmOnly}.+\\.js$`]: swc },
  transformIgnorePatterns: [`/node_modules/(?!${esmOnly})`],
  moduleFileExtensions: ['ts', 'js', 'json'],
  moduleNameMapper: { '^@ws/([a-z-]+)$': '<rootDir>/libs/$1/src', '^@workspace-server/client$': '<rootDir>/libs/client/src' },
  testEnvironment: 'node',
};
const { E2E_ALONE_LANES, E2E_EARLY } = require('./test/e2e/groups');
const filesPattern = (names) => `/test/e2e/(?:${names.join('|')})\\.e2e-spec\\.ts$`;
const E2E_ALONE = Object.values(E2E_ALONE_LANES).flat();
const only = (names) => ({ testRegex: [filesPattern(names)], testMatch: undefined });
const e2eGroup = {
  early: only(E2E_EARLY),
  shared: { testPathIgnorePatterns: ['/node_modules/', filesPattern(E2E_ALONE), filesPattern(E2E_EARLY)] },
  ...Object.fromEntries(Object.entries(E2E_ALONE_LANES).map(([lane, names]) => [lane, only(names)])),
}[process.env.WS_E2E_GROUP ?? ''] ?? {};
module.exports = {
  testTimeout: 180000,
  testSequencer: '<rootDir>/test/e2e/sequencer.js',
  projects: [
    { ...shared, displayName: 'unit', testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts', '<rootDir>/test/structure/**/*.spec.ts'] },
    { ...shared, displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'], ...e2eGroup },
  ],
};
