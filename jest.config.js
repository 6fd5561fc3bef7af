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
module.exports = {
  testTimeout: 180000,
  projects: [
    { ...shared, displayName: 'unit', testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts', '<rootDir>/test/structure/**/*.spec.ts'] },
    { ...shared, displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'] },
  ],
};
