// The put-path allocation figures (bench/allocations.ts): how a sampled heap profile is charged,
// and the script run for real on a few thousand puts.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { summarizeAllocations } from '../bench/allocations.js'
import { repoRoot } from './helpers/tmp.js'

const lib = (path: string) => new URL(`../lib/${path}`, import.meta.url).href
const bench = (path: string) => new URL(`../bench/${path}`, import.meta.url).href

interface Node {
  callFrame: { functionName: string; url: string; lineNumber: number }
  selfSize: number
  children: Node[]
}

function node(functionName: string, url: string, selfSize: number, children: Node[] = []): Node {
  return { callFrame: { functionName, url, lineNumber: 9 }, selfSize, children }
}

describe('bench allocations', () => {
  it("charges each sample to the innermost frame of mqstore or the bench, a builtin's to its caller, the rest to other", () => {
    const head = node('(root)', '', 0, [
      node('putInBatches', bench('workload.js'), 1000, [
        node('putMessages', lib('store/message-store.js'), 0, [
          node('append', lib('store/commitlog/commit-log.js'), 8800),
          // A Node internal called by mqstore: mqstore's allocation.
          node('FastBuffer', 'node:internal/buffer', 300),
        ]),
        node('Uint8Array', '', 500),
      ]),
      node('(garbage collector)', '', 40),
    ])
    const report = summarizeAllocations(head, 100, 1024, 10)
    expect(report.perMessage).toEqual({ mqstore: 91, bench: 15, other: 0.4 })
    expect(report.sites).toEqual([
      { origin: 'mqstore', site: 'append store/commitlog/commit-log.js:10', bytesPerMessage: 88 },
      { origin: 'bench', site: 'putInBatches workload.js:10', bytesPerMessage: 15 },
      { origin: 'mqstore', site: 'putMessages store/message-store.js:10', bytesPerMessage: 3 },
    ])
    expect(summarizeAllocations(head, 100, 1024, 1).sites).toHaveLength(1)
  })

  it('npm run bench:alloc samples a real put phase: the results are mqstore allocations, the bodies the bench loop', () => {
    const r = spawnSync(process.execPath, [join(repoRoot, 'dist/bench/allocations.js'), '--count', '3000', '--json'], {
      encoding: 'utf8',
      timeout: 120_000,
    })
    expect(r.status, r.stderr).toBe(0)
    const report = JSON.parse(r.stdout)
    expect(report.count).toBe(3000)
    expect(report.perMessage.mqstore).toBeGreaterThan(0)
    expect(report.perMessage.bench).toBeGreaterThan(0)
    const sites = report.sites.map((s: { origin: string; site: string }) => `${s.origin} ${s.site.split(' ')[0]}`)
    expect(sites).toContain('mqstore append')
    expect(sites).toContain('bench makeBodies')
    const bad = spawnSync(process.execPath, [join(repoRoot, 'dist/bench/allocations.js'), '--count', '0'], { encoding: 'utf8' })
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain('--count, --interval and --top take positive integers')
  })
})
