import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Native addons are not safe in worker_threads; each test file runs in its own child process.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    execArgv: ['--expose-gc'],
    // Coverage of the TypeScript sources as the test files run them (code that only child
    // processes run, from dist/, is not counted). The thresholds sit a little below what the
    // suite reaches, so that a change that drops tests (or adds untested code) fails.
    coverage: {
      provider: 'v8',
      include: ['lib/**/*.ts'],
      reporter: ['text-summary'],
      thresholds: { lines: 80, functions: 80, branches: 70, statements: 78 },
    },
  },
})
