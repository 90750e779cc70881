#!/usr/bin/env node
// npm run soak [-- --cycles N]: the crash test of test/crash.test.ts, for many cycles.
//
// Each cycle starts test/fixtures/crash-writer.mjs on a store, SIGKILLs it at a random moment,
// reopens the store and checks that every acknowledged put is readable by commit-log offset, by
// queue and by key, and that every queue is gap-free (test/fixtures/crash-check.mjs, shared with
// the test). Cycles go round the six flush mode x put mode combinations; each combination keeps
// its store for --cycles-per-store cycles, then starts a fresh one (bounding disk use and the
// growing re-verification). A failing store is kept, with a copy of it as the crash left it.
//
// Builds nothing: it runs the compiled package in dist/, so `npm run build:ts` must have run
// (`npm run soak` does that first).
//
//   --cycles N            cycles in all (default 1000)
//   --cycles-per-store K  cycles on one store before a fresh one (default 20)
//   --seed S              replays a run (default random, printed)
//   --dir D               where stores go (default a new temporary directory)
//   --keep                keep every store, not only failing ones
//   --max-failures F      stop after F failing cycles (default 10)
//   --power-cut-schedules P  first, P simulated power-cut schedules per flush mode (test/power-cut.test.ts,
//                         default 150; 0 skips them)
//   --power-cut-steps S   steps per schedule (default 150)
//
// Exits 1 when any cycle failed.
import * as fs from 'node:fs'
import * as os from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

import { MessageStore } from '../dist/lib/index.js'
import { CrashHarness, FLUSH_MODES, PUT_MODES, formatReport } from '../test/fixtures/crash-check.mjs'

const { values } = parseArgs({
  options: {
    cycles: { type: 'string', default: '1000' },
    'cycles-per-store': { type: 'string', default: '20' },
    seed: { type: 'string' },
    dir: { type: 'string' },
    keep: { type: 'boolean', default: false },
    'max-failures': { type: 'string', default: '10' },
    'power-cut-schedules': { type: 'string', default: '150' },
    'power-cut-steps': { type: 'string', default: '150' },
  },
})

function positive(name) {
  const n = Number(values[name])
  if (!Number.isSafeInteger(n) || n < 1) {
    console.error(`[soak] --${name} must be a positive integer, got ${values[name]}`)
    process.exit(2)
  }
  return n
}

const cycles = positive('cycles')
const cyclesPerStore = positive('cycles-per-store')
const maxFailures = positive('max-failures')
const seed = values.seed !== undefined ? Number(values.seed) >>> 0 : (Math.random() * 2 ** 32) >>> 0
const baseDir = values.dir ?? fs.mkdtempSync(join(os.tmpdir(), 'mqstore-soak-'))
fs.mkdirSync(baseDir, { recursive: true })

const combinations = FLUSH_MODES.flatMap((flushMode) => PUT_MODES.map((putMode) => ({ flushMode, putMode })))
/** The current harness of each combination. */
const harnesses = new Map()
let storesStarted = 0

function harnessFor(combination) {
  const name = `${combination.flushMode}-${combination.putMode}`
  let harness = harnesses.get(name)
  if (harness === undefined || harness.cycles >= cyclesPerStore) {
    if (harness !== undefined && !values.keep) fs.rmSync(harness.base, { recursive: true, force: true })
    const base = join(baseDir, `${String(++storesStarted).padStart(4, '0')}-${name}`)
    harness = new CrashHarness({
      MessageStore,
      storeDir: join(base, 'store'),
      ackFile: join(base, 'acks.jsonl'),
      snapshotDir: join(base, 'store-before-reopen'),
      ...combination,
      seed: (seed + storesStarted) >>> 0,
    })
    harness.base = base
    harnesses.set(name, harness)
  }
  return harness
}

// The simulated power cuts: the schedules of test/power-cut.test.ts, many and long. They run in
// vitest (the simulator is TypeScript under test/) with the same seed.
const powerCutSchedules = Number(values['power-cut-schedules'])
let powerCutFailed = false
if (Number.isSafeInteger(powerCutSchedules) && powerCutSchedules > 0) {
  const steps = positive('power-cut-steps')
  console.log(`[soak] power cuts: ${powerCutSchedules} schedules of ${steps} steps per flush mode, POWERCUT_SEED=${seed | 0}`)
  const root = fileURLToPath(new URL('..', import.meta.url))
  const run = spawnSync(process.execPath, [join(root, 'node_modules', 'vitest', 'vitest.mjs'), 'run', 'test/power-cut.test.ts'], {
    cwd: root,
    stdio: 'inherit',
    env: {
      ...process.env,
      POWERCUT_SCHEDULES: String(powerCutSchedules),
      POWERCUT_STEPS: String(steps),
      POWERCUT_SEED: String(seed | 0),
      POWERCUT_VERBOSE: '1',
    },
  })
  powerCutFailed = run.status !== 0
  console.log(`[soak] power cuts: ${powerCutFailed ? 'FAILED' : 'ok'}`)
}

console.log(`[soak] ${cycles} cycles, seed ${seed}, stores under ${baseDir}`)
const began = Date.now()
const totals = { cycles: 0, acked: 0, checks: 0, failedCycles: 0, failures: 0, tornLines: 0 }
const perCombination = new Map()
const failedStores = []

for (let i = 0; i < cycles; i++) {
  const combination = combinations[i % combinations.length]
  const harness = harnessFor(combination)
  const tornBefore = harness.tornLines
  const report = await harness.cycle()
  totals.cycles++
  totals.acked += report.acked
  totals.checks += report.checks
  totals.tornLines += harness.tornLines - tornBefore
  const key = `${combination.flushMode}/${combination.putMode}`
  const stats = perCombination.get(key) ?? { cycles: 0, acked: 0, failedCycles: 0 }
  stats.cycles++
  stats.acked += report.acked
  console.log(`[soak] ${i + 1}/${cycles} ${formatReport(report)}`)
  if (report.failureCount > 0) {
    stats.failedCycles++
    totals.failedCycles++
    totals.failures += report.failureCount
    failedStores.push(harness.base)
    console.log(`[soak] FAILURE (seed ${seed}) store kept at ${harness.base}`)
    console.log(JSON.stringify({ ...report, failures: report.failures }, null, 2))
    // Keep this store as it is; the combination starts a fresh one.
    harnesses.delete(`${combination.flushMode}-${combination.putMode}`)
    if (totals.failedCycles >= maxFailures) {
      console.log(`[soak] stopping after ${totals.failedCycles} failing cycles`)
      perCombination.set(key, stats)
      break
    }
  }
  perCombination.set(key, stats)
}

if (!values.keep) {
  for (const harness of harnesses.values()) fs.rmSync(harness.base, { recursive: true, force: true })
  if (failedStores.length === 0) fs.rmSync(baseDir, { recursive: true, force: true })
}

const seconds = ((Date.now() - began) / 1000).toFixed(1)
console.log(`[soak] summary (seed ${seed}, ${seconds} s):`)
for (const [key, stats] of perCombination) {
  console.log(`[soak]   ${key.padEnd(19)} ${stats.cycles} cycles, ${stats.acked} acknowledged, ${stats.failedCycles} failing`)
}
console.log(
  `[soak] cycles ${totals.cycles}, messages acknowledged ${totals.acked}, checks ${totals.checks}, ` +
    `failures ${totals.failures} in ${totals.failedCycles} cycles, torn ack lines ${totals.tornLines}`,
)
if (failedStores.length > 0) console.log(`[soak] failing stores kept: ${failedStores.join(', ')}`)
process.exit(totals.failedCycles > 0 || powerCutFailed ? 1 : 0)
