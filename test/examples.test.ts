// The programs in examples/ run as a user runs them: `node examples/x.mjs`, importing the package
// by its name (the built dist/), each bounded and stopping by itself.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { repoRoot, tempDir } from './helpers/tmp.js'

function runExample(name: string, args: string[]): Record<string, unknown> {
  const r = spawnSync(process.execPath, [join(repoRoot, 'examples', name), ...args], { encoding: 'utf8', timeout: 60_000, cwd: repoRoot })
  expect(r.stderr).toBe('')
  expect(r.status).toBe(0)
  const lines = r.stdout.trim().split('\n')
  return JSON.parse(lines[lines.length - 1]) as Record<string, unknown>
}

describe('examples', () => {
  it('producer-consumer: every order produced is consumed once, and a second run resumes from the committed offsets', () => {
    const dir = join(tempDir('mqstore-example-'), 'orders')
    const first = runExample('producer-consumer.mjs', ['--dir', dir, '--count', '400'])
    expect(first).toMatchObject({ produced: 400, consumed: 400, committed: [100, 100, 100, 100], timedOut: false })
    const second = runExample('producer-consumer.mjs', ['--dir', dir, '--count', '200'])
    expect(second).toMatchObject({ produced: 200, consumed: 200, committed: [150, 150, 150, 150], timedOut: false })
  })

  it('outbox: every accepted HTTP request is relayed, found by key, and a restart relays only new events', () => {
    const dir = join(tempDir('mqstore-example-'), 'outbox')
    const first = runExample('outbox.mjs', ['--dir', dir, '--requests', '120'])
    expect(first).toEqual({ accepted: 120, published: 120, everyIdPublished: true, firstFound: true, committed: 120 })
    const second = runExample('outbox.mjs', ['--dir', dir, '--requests', '30'])
    expect(second).toEqual({ accepted: 30, published: 30, everyIdPublished: true, firstFound: true, committed: 150 })
  })

  it("metrics: GET /metrics on 127.0.0.1 answers in the Prometheus text format with the store's figures", () => {
    const dir = join(tempDir('mqstore-example-'), 'metrics')
    const summary = runExample('metrics.mjs', ['--dir', dir, '--count', '60'])
    expect(summary).toEqual({
      status: 200,
      contentType: 'text/plain; version=0.0.4; charset=utf-8',
      putMessages: 60,
      getMessages: 60,
      putLatencyCount: 60,
      open: 1,
    })
  })

  it('cluster: workers produce through connect() into the store their primary owns, and every acknowledged order is there', () => {
    const dir = join(tempDir('mqstore-example-'), 'cluster')
    const summary = runExample('cluster.mjs', ['--dir', dir, '--workers', '3', '--count', '100'])
    expect(summary).toEqual({ workers: 3, acknowledged: 300, forwarded: 300, everyOrderFound: true })
  })
})
