// Lint and layering. `npm run lint` = `eslint . --max-warnings 0`; tests/layering.test.ts proves
// every layering rule below fires on a small offending file and stays quiet on a clean one.
import { builtinModules } from 'node:module';
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import reactHooks from 'eslint-plugin-react-hooks';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import { layeringPlugin } from './scripts/eslint-layering.js';

const testFiles = ['**/*.test.ts', '**/*.test.tsx'];

const nodeBuiltins = {
  paths: builtinModules
    .filter((name) => !name.startsWith('_'))
    .map((name) => ({ name, message: 'No Node builtins here.' })),
  patterns: [{ group: ['node:*'], message: 'No Node builtins here.' }],
};
const electron = { name: 'electron', message: 'Only app/ may import electron; the broker runs headless too.' };

/** broker/contract and broker/core are pure: no I/O, no clock, no timers, no randomness (STYLE habit 2). */
const pureGlobals = [
  ['Date', 'Time comes in through the Clock port (broker/ports).'],
  ['setTimeout', 'No timers in pure code.'],
  ['setInterval', 'No timers in pure code.'],
  ['setImmediate', 'No timers in pure code.'],
  ['clearTimeout', 'No timers in pure code.'],
  ['clearInterval', 'No timers in pure code.'],
  ['queueMicrotask', 'No scheduling in pure code.'],
  ['performance', 'No clock reads in pure code.'],
  ['crypto', 'Randomness and ids come in through ports.'],
  ['process', 'No process state in pure code.'],
  ['fetch', 'No I/O in pure code.'],
  ['XMLHttpRequest', 'No I/O in pure code.'],
  ['WebSocket', 'No I/O in pure code.'],
  ['window', 'No DOM in broker code.'],
  ['document', 'No DOM in broker code.'],
  ['navigator', 'No DOM in broker code.'],
  ['localStorage', 'No DOM in broker code.'],
  ['globalThis', 'Reach for nothing global in pure code.'],
  ['global', 'Reach for nothing global in pure code.'],
  ['require', 'ESM imports only.'],
  ['Buffer', 'Use Uint8Array; Buffer is Node.'],
  ['__dirname', 'No file system in pure code.'],
  ['__filename', 'No file system in pure code.'],
].map(([name, message]) => ({ name, message }));

export default defineConfig(
  { ignores: ['node_modules/', 'dist/', '.tsbuild/', 'coverage/', 'test-results/', 'tmp/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
    },
  },
  { files: ['**/*.{js,mjs,cjs}'], languageOptions: { globals: globals.node } },
  {
    files: ['renderer/src/**/*.{ts,tsx}'],
    languageOptions: { globals: globals.browser },
    plugins: { 'react-hooks': reactHooks },
    rules: reactHooks.configs.recommended.rules,
  },

  {
    // STYLE: a function reads top to bottom on one screen. A longer one carries a named exception on the line
    // above it (`// eslint-disable-next-line max-lines-per-function -- <why this one is long>`).
    files: ['broker/**/*.ts', 'renderer/**/*.{ts,tsx}'],
    ignores: testFiles,
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true, IIFEs: true }] },
  },

  // ---- Layering (the may-import table in scripts/eslint-layering.js and ARCHITECTURE.md's code map) ----
  { plugins: { postern: layeringPlugin }, rules: { 'postern/may-import': 'error' } },
  {
    files: ['broker/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [electron] }] },
  },
  {
    files: ['broker/contract/**/*.ts', 'broker/core/**/*.ts'],
    ignores: testFiles,
    rules: {
      'no-restricted-imports': ['error', { paths: [electron, ...nodeBuiltins.paths], patterns: nodeBuiltins.patterns }],
      'no-restricted-globals': ['error', ...pureGlobals],
      'no-restricted-properties': [
        'error',
        { object: 'Math', property: 'random', message: 'Randomness comes in through ports.' },
        { object: 'Date', property: 'now', message: 'Time comes in through the Clock port.' },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: 'ImportExpression', message: 'No dynamic imports in pure code.' },
        { selector: "NewExpression[callee.name='Date']", message: 'Time comes in through the Clock port.' },
      ],
    },
  },
  {
    files: ['renderer/**/*.{ts,tsx}'],
    rules: {
      'no-restricted-imports': ['error', { paths: [electron, ...nodeBuiltins.paths], patterns: nodeBuiltins.patterns }],
    },
  },
  {
    // Config files under renderer/ run in Node at build time, not in the page.
    files: ['renderer/vite.config.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
);
