// The put's CPU time by part (bench/put-parts.ts): how a CPU profile's samples are charged, the
// medians over rounds, and the script run for real on a few thousand puts.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import type { CpuProfile } from '../bench/profile.js'
import { medianParts, putPartsOf, type PutPartsRun } from '../bench/put-parts.js'
import { repoRoot } from './helpers/tmp.js'

const lib = (path: string) => new URL(`../lib/${path}`, import.meta.url).href
const bench = (path: string) => new URL(`../bench/${path}`, import.meta.url).href

/** A profile whose node `id` has the given frame and children; samples[i] took deltas[i] us. */
function profile(
  nodes: [id: number, functionName: string, url: string, children: number[]][],
  samples: number[],
  deltas: number[],
): CpuProfile {
  return {
    nodes: nodes.map(([id, functionName, url, children]) => ({ id, callFrame: { functionName, url, lineNumber: 0 }, children })),
    startTime: 0,
    endTime: deltas.reduce((a, b) => a + b, 0),
    samples,
    timeDeltas: deltas,
  }
}

describe('bench put parts', () => {
  it("charges each sample to the loop, the put's own code by module, the calls that code makes, the GC or other", () => {
    const p = profile(
      [
        [1, '(root)', '', [2, 8, 9]],
        [2, 'putInBatches', bench('workload.js'), [3, 7]],
        [3, 'putMessages', lib('store/message-store.js'), [4]],
        [4, 'append', lib('store/commitlog/commit-log.js'), [5, 6]],
        // A native function and a Node built-in called by mqstore: the put's calls.
        [5, 'allocate', '', []],
        [6, 'FastBuffer', 'node:internal/buffer', []],
        // A built-in called by the loop: the loop's.
        [7, 'subarray', 'node:buffer', []],
        [8, '(garbage collector)', '', []],
        [9, '(program)', '', []],
      ],
      [2, 3, 4, 4, 5, 6, 7, 8, 9],
      [1000, 2000, 3000, 500, 4000, 250, 1500, 6000, 700],
    )
    const parts = putPartsOf(p)
    expect(parts).toEqual({
      loop: 2.5,
      own: 5.5,
      calls: 4.25,
      gc: 6,
      other: 0.7,
      total: 18.95,
      modules: { 'store/message-store.js': 2, 'store/commitlog/commit-log.js': 3.5 },
    })
    // The work engine's code is the put's own too.
    const engine = profile(
      [
        [1, '(root)', '', [2]],
        [2, 'putInBatches', bench('workload.js'), [3]],
        [3, 'engine', bench('limits.js'), [4]],
        [4, 'crc32Ranges', '', []],
      ],
      [3, 4],
      [800, 200],
    )
    expect(putPartsOf(engine)).toMatchObject({ own: 0.8, calls: 0.2, loop: 0, modules: { 'limits.js': 0.8 } })
  })

  it('medians each part over the runs, a module missing from a run counting 0 there', () => {
    const run = (passMs: number, own: number, modules: Record<string, number>): PutPartsRun => ({
      side: 'mqstore',
      passMs,
      parts: { loop: own / 2, own, calls: 1, gc: 2, other: 0, total: own * 2, modules },
    })
    const m = medianParts([run(10, 5, { a: 5 }), run(30, 9, { a: 4, b: 5 }), run(20, 7, { a: 7 })])
    expect(m.passMs).toBe(20)
    expect(m.parts).toEqual({ loop: 3.5, own: 7, calls: 1, gc: 2, other: 0, total: 14, modules: { a: 5, b: 0 } })
  })

  it('npm run bench:put-parts profiles a real put phase and the work engine, each in a process of its own', () => {
    const script = join(repoRoot, 'dist/bench/put-parts.js')
    const r = spawnSync(process.execPath, [script, '--count', '30000', '--warmup', '5000', '--runs', '1', '--json'], {
      encoding: 'utf8',
      timeout: 120_000,
    })
    expect(r.status, r.stderr).toBe(0)
    const report = JSON.parse(r.stdout)
    expect(report.count).toBe(30000)
    expect(report.runs.map((run: PutPartsRun) => run.side).sort()).toEqual(['engine', 'mqstore'])
    const { mqstore, engine } = report.median
    expect(mqstore.passMs).toBeGreaterThan(0)
    expect(mqstore.parts.own).toBeGreaterThan(0)
    expect(Object.keys(mqstore.parts.modules).every((name) => name.startsWith('store/') || !name.includes('/'))).toBe(true)
    expect(Object.keys(mqstore.parts.modules)).toContain('store/commitlog/commit-log.js')
    expect(engine.parts.own).toBeGreaterThan(0)
    expect(Object.keys(engine.parts.modules)).toContain('limits.js')
    const text = spawnSync(process.execPath, [script, '--count', '2000', '--warmup', '500', '--runs', '1'], {
      encoding: 'utf8',
      timeout: 120_000,
    })
    expect(text.status, text.stderr).toBe(0)
    expect(text.stdout).toContain("| the put's own JavaScript (mqstore's modules / the engine) |")
    const bad = spawnSync(process.execPath, [script, '--runs', '0'], { encoding: 'utf8' })
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain('usage:')
  })
})
