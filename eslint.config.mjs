import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', '.dist-*/**', 'node_modules/**', 'data/**', 'apps/web/dist/**', 'apps/web/vendor/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-console': ['error', { allow: ['error', 'warn'] }],
    },
  },
  {
    files: ['apps/cli/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts', 'libs/database/src/migrate.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    files: ['apps/web/**/*.js'],
    languageOptions: { sourceType: 'module', globals: { window: 'readonly', document: 'readonly', location: 'readonly', sessionStorage: 'readonly', fetch: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', URLSearchParams: 'readonly', history: 'readonly', navigator: 'readonly', console: 'readonly', HTMLElement: 'readonly', Event: 'readonly', KeyboardEvent: 'readonly', AbortController: 'readonly', DOMException: 'readonly', URL: 'readonly', Node: 'readonly', XMLHttpRequest: 'readonly', queueMicrotask: 'readonly' } },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
    languageOptions: { globals: { require: 'readonly', module: 'writable', process: 'readonly', console: 'readonly', __dirname: 'readonly' } },
  },
);
