// The acceptance test of "nothing acknowledged is lost": a child process writes to a store and is
// killed with SIGKILL at a random moment; the store is then reopened here and every put the child
// saw acknowledged must be readable by commit-log offset, by queue and by key, with every queue
// gap-free. Each flush mode x put mode combination keeps one store across its cycles, so later
// cycles also reopen stores that earlier crashes and recoveries left behind.
//
// CRASH_CYCLES (default 25) is the total number of cycles, spread over the six combinations;
// CRASH_SEED replays a run (the seed is printed with any failure); CRASH_VERBOSE=1 prints a line
// per cycle. The writer
// (test/fixtures/crash-writer.mjs) runs the compiled package: `npm test` builds it first, a bare
// `vitest run` needs `npm run build:ts`. The checks themselves live in test/fixtures/crash-check.mjs,
// shared with `npm run soak`.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'

import { MessageStore } from '../lib/store/message-store.js'
import { CrashHarness, FLUSH_MODES, PUT_MODES, formatReport, type CycleReport } from './fixtures/crash-check.mjs'
import { distEntry, tempDir } from './helpers/tmp.js'

const TOTAL_CYCLES = Math.max(1, Number(process.env.CRASH_CYCLES ?? 25) || 25)
const COMBINATIONS = FLUSH_MODES.flatMap((flushMode) => PUT_MODES.map((putMode) => ({ flushMode, putMode })))
const CYCLES_PER_COMBINATION = Math.ceil(TOTAL_CYCLES / COMBINATIONS.length)
const VERBOSE = process.env.CRASH_VERBOSE !== undefined && process.env.CRASH_VERBOSE !== ''
const SEED = process.env.CRASH_SEED !== undefined ? Number(process.env.CRASH_SEED) >>> 0 : (Math.random() * 2 ** 32) >>> 0

function reproduction(report: CycleReport): string {
  return [
    `crash cycle failed (CRASH_SEED=${SEED}): ${formatReport(report)}`,
    `store kept at ${report.storeDir}`,
    report.snapshotDir === undefined ? '' : `the store as the crash left it (before the reopen repaired it): ${report.snapshotDir}`,
    `ack file: ${report.ackFile}`,
    `writer exit: ${JSON.stringify(report.exit)}; recovery at reopen: ${JSON.stringify(report.recovery)}`,
  ]
    .filter((line) => line !== '')
    .join('\n')
}

beforeAll(() => {
  if (!fs.existsSync(fileURLToPath(distEntry))) {
    throw new Error('the crash writer runs the compiled package: run `npm run build:ts` first')
  }
})

describe('a writer killed with SIGKILL at a random moment loses nothing it had acknowledged', () => {
  COMBINATIONS.forEach(({ flushMode, putMode }, index) => {
    it(
      `${flushMode}, ${putMode} puts: after each of ${CYCLES_PER_COMBINATION} kills every acknowledged message is readable by offset, queue and key, and every queue is gap-free`,
      async () => {
        const base = tempDir('mqstore-crash-')
        const harness = new CrashHarness({
          MessageStore,
          storeDir: join(base, 'store'),
          ackFile: join(base, 'acks.jsonl'),
          snapshotDir: join(base, 'store-before-reopen'),
          flushMode,
          putMode,
          seed: (SEED + index) >>> 0,
        })
        let passed = false
        try {
          for (let i = 0; i < CYCLES_PER_COMBINATION; i++) {
            const report = await harness.cycle()
            if (VERBOSE) console.log(formatReport(report))
            // Killed by our SIGKILL, not by a fault of its own (SIGSEGV, SIGBUS) or an exception.
            expect(report.exit, reproduction(report)).toEqual({ code: null, signal: 'SIGKILL' })
            expect(report.failures, reproduction(report)).toEqual([])
            expect(report.failureCount).toBe(0)
            expect(report.recovery?.lastExitOK).toBe(false)
          }
          // The writers did write, across cycles, and the checks covered what they acknowledged.
          expect(harness.acks.length).toBeGreaterThan(0)
          passed = true
        } finally {
          if (passed) fs.rmSync(base, { recursive: true, force: true })
        }
      },
      CYCLES_PER_COMBINATION * 20_000 + 30_000,
    )
  })
})
