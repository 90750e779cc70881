import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Native addons are not safe in worker_threads; each test file runs in its own child process.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    execArgv: ['--expose-gc'],
  },
})
