// The package's entry points are bundles (scripts/bundle.mjs, dist/pkg): a program that imports
// `mqstore`, `mqstore/internals` or runs the `mqstore` command gets them, not the compiled modules
// the rest of the tests load. These run them in child processes, by the package's name.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { repoRoot, tempDir } from './helpers/tmp.js'

const BIN = join(repoRoot, 'dist', 'pkg', 'cli.js')

/** Runs an ES module given as text, from the package's folder, so that `mqstore` names the package itself. */
function runModule(source: string): string {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', source], { encoding: 'utf8', timeout: 60_000, cwd: repoRoot })
  expect(r.stderr).toBe('')
  expect(r.status).toBe(0)
  return r.stdout.trim()
}

function runBin(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60_000, cwd: repoRoot })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

describe('the bundled entry points', () => {
  it('are what the package name resolves to, and share one copy of each class between them', () => {
    const out = runModule(`
      const root = await import('mqstore')
      const internals = await import('mqstore/internals')
      let sameError = false
      try {
        internals.resolveConfig({ flushDiskType: 'NEITHER' })
      } catch (error) {
        sameError = error instanceof root.MQStoreError && error.code === 'INVALID_OPTION'
      }
      console.log(JSON.stringify({
        root: import.meta.resolve('mqstore'),
        internals: import.meta.resolve('mqstore/internals'),
        sameError,
        pageSize: internals.native.pageSize,
      }))
    `)
    const report = JSON.parse(out) as { root: string; internals: string; sameError: boolean; pageSize: number }
    expect(report.root).toMatch(/\/dist\/pkg\/index\.js$/)
    expect(report.internals).toMatch(/\/dist\/pkg\/internals\.js$/)
    expect(report.sameError).toBe(true)
    expect(report.pageSize).toBeGreaterThan(0)
  })

  it('store what the compiled modules read back: a store written through the bundle opens through dist/lib', () => {
    const dir = join(tempDir('mqstore-bundle-'), 'store')
    runModule(`
      const { MessageStore } = await import('mqstore')
      const store = await MessageStore.open(${JSON.stringify(dir)})
      for (let i = 0; i < 10; i++) {
        const r = await store.putMessage({ topic: 'bundled', queueId: 0, body: Buffer.from('m' + i), keys: 'k' + i })
        if (r.status !== 'PUT_OK') throw new Error(r.status)
      }
      await store.close()
    `)
    const out = runModule(`
      const { MessageStore } = await import('./dist/lib/index.js')
      const store = await MessageStore.open(${JSON.stringify(dir)})
      const got = store.getMessage('g', 'bundled', 0, 0, 32)
      const found = store.queryMessage('bundled', 'k7', 4, 0, Number.MAX_SAFE_INTEGER)
      console.log(JSON.stringify({ bodies: got.messages.map((m) => m.body.toString()), found: found.messages.map((m) => m.body.toString()), clean: store.stats().lastExitOK }))
      await store.close()
    `)
    expect(JSON.parse(out)).toEqual({
      bodies: Array.from({ length: 10 }, (_, i) => `m${i}`),
      found: ['m7'],
      clean: true,
    })
  })

  it('the mqstore command runs from its bundle: help, the demo and verify on the demo store, the benchmark found', () => {
    const help = runBin(['--help'])
    expect(help.status).toBe(0)
    expect(help.stdout).toContain('usage: mqstore <command>')

    const dir = join(tempDir('mqstore-bundle-cli-'), 'data')
    const demo = runBin(['demo', dir, '--json'])
    expect(demo.stderr).toBe('')
    expect(demo.status).toBe(0)
    expect(JSON.parse(demo.stdout)).toMatchObject({ produced: 6000, consumed: 1500, keysFound: 3 })
    const verify = runBin(['verify', dir, '--json'])
    expect(verify.status).toBe(0)
    expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true })

    // The runners are found from the package's root (dist/bench in a source checkout), not by a
    // path relative to the running file, which differs between dist/lib and the bundle.
    const sizes = runBin(['bench', 'sizes', '--help'])
    expect(sizes.status).toBe(0)
    expect(sizes.stdout).toContain('mqstore bench sizes')
  })
})
