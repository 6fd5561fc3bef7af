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
/**
 * e2e suites that must have the machine to themselves when suites run several at a time (scripts/test.sh): they start a
 * second dockerd with bridges of its own, a whole compose stack, or measure recovery from faults they inject on
 * timers that a neighbour's load would stretch. WS_E2E_GROUP=shared runs every other suite; =alone, just these.
 */
const E2E_ALONE = ['compose', 'two-engines', 'worker-pool', 'dependency-faults', 'worker-faults', 'host-health'];
const alonePattern = `/test/e2e/(?:${E2E_ALONE.join('|')})\\.e2e-spec\\.ts$`;
const e2eGroup = {
  shared: { testPathIgnorePatterns: ['/node_modules/', alonePattern] },
  alone: { testRegex: [alonePattern], testMatch: undefined },
}[process.env.WS_E2E_GROUP ?? ''] ?? {};
module.exports = {
  testTimeout: 180000,
  testSequencer: '<rootDir>/test/e2e/sequencer.js',
  projects: [
    { ...shared, displayName: 'unit', testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts', '<rootDir>/test/structure/**/*.spec.ts'] },
    { ...shared, displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'], ...e2eGroup },
  ],
};
