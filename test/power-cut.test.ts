// Power cuts, simulated (test/helpers/power-loss.ts): at a random storage event the disk keeps
// every synced page and, for every page written since its last sync, the old or the new content at
// random; names created, renamed or unlinked since their directory's last fsync may or may not be
// there. Schedules of puts, reads, consumer offsets, clock advances, retention and compaction
// passes, clean reopens, crashes, cuts (during puts, flushes, passes, recovery, close, twice in a
// row) and damage run against a model (test/helpers/simulator.ts) that knows what must survive
// each of them.
//
// POWERCUT_SCHEDULES (default 8 per flush mode) and POWERCUT_STEPS (default 60) size the run;
// POWERCUT_SEED replays one (fast-check's seed: the failure message prints it, with the
// schedule seed of the failing run and its last log lines); POWERCUT_SCHEDULE=<schedule seed>
// (with POWERCUT_MODE) replays one schedule with its full log and keeps its directories, every
// cut image also as the cut left it; POWERCUT_SURVEY=1 runs SCHEDULES seeds from POWERCUT_SEED in
// both modes and tallies the failures by kind; POWERCUT_BREAK_MSYNC=1 runs every schedule against
// a store whose data syncs do nothing (the run fails); POWERCUT_STRICT=1 fails on known open issues
// too (KNOWN_OPEN in the simulator). `npm run soak` runs a long schedule first.
import * as fs from 'node:fs'
import { join } from 'node:path'
import * as fc from 'fast-check'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { MessageStore } from '../lib/index.js'
import { PowerLossDisk } from './helpers/power-loss.js'
import { simulate, type FlushMode, type SimulationOptions, type SimulationReport } from './helpers/simulator.js'
import { tempDir } from './helpers/tmp.js'

// 8 per mode keeps this file's share of npm test where it was before retention and compaction
// became steps (each step costs more now: more files to cut and recover).
const SCHEDULES = Math.max(1, Number(process.env.POWERCUT_SCHEDULES ?? 8) || 8)
const STEPS = Math.max(1, Number(process.env.POWERCUT_STEPS ?? 60) || 60)
/** POWERCUT_BREAK_MSYNC=1: every schedule runs with data syncs (msync, fdatasync) no-ops (the run must then fail). */
const BREAK_MSYNC = process.env.POWERCUT_BREAK_MSYNC !== undefined && process.env.POWERCUT_BREAK_MSYNC !== ''
// npm test runs one fixed seed, so that the rare open cases (counted in KNOWN_OPEN, and those the
// long runs still find) cannot turn a run red at random; POWERCUT_SEED=random, or `npm run soak`,
// draws new schedules.
const SEED_TEXT = process.env.POWERCUT_SEED ?? '1921906354'
const SEED = SEED_TEXT === 'random' ? (Math.random() * 2 ** 31) | 0 : Number(SEED_TEXT) | 0

const CLOCK_START = Date.UTC(2026, 0, 1) + Number(process.env.POWERCUT_CLOCK_START_MS ?? 0)

/**
 * Every schedule starts at the same simulated time (retention and compaction decide by it), so
 * that one replayed alone runs as it did among others.
 */
function simulateFromStart(options: SimulationOptions): Promise<SimulationReport> {
  vi.setSystemTime(CLOCK_START)
  return simulate(options)
}

let root: string
beforeEach(() => {
  root = tempDir('mqstore-powercut-')
  // A fake clock: the store's flush services run when a schedule advances it, so runs replay.
  vi.useFakeTimers({
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    now: CLOCK_START,
  })
})
afterEach(() => {
  vi.useRealTimers()
  fs.rmSync(root, { recursive: true, force: true })
})

function describeFailure(report: SimulationReport): string {
  return [
    `schedule seed ${report.seed} (${report.flushMode}) failed; replay the run with POWERCUT_SEED=${SEED}`,
    ...report.failures,
    'last steps:',
    ...report.log.slice(-25),
  ].join('\n')
}

/** Moves the fake clock without running the timers in between (a retention step's hours). */
const jump = (ms: number): void => void vi.setSystemTime(Date.now() + ms)

/** The retention and compaction steps of a set of runs, for the summaries. */
function passes(reports: SimulationReport[]): string {
  const sum = (f: (r: SimulationReport) => number) => reports.reduce((a, r) => a + f(r), 0)
  return (
    `${sum((r) => r.retentionPasses)} retention passes (${sum((r) => r.cutsDuringRetention)} cut, ${sum((r) => r.filesDeletedByRetention)} commit-log files deleted), ` +
    `${sum((r) => r.compactionPasses)} compaction passes (${sum((r) => r.cutsDuringCompaction)} cut, ${sum((r) => r.recordsCompactedAway)} records dropped)`
  )
}

const ONE = process.env.POWERCUT_SCHEDULE !== undefined ? Number(process.env.POWERCUT_SCHEDULE) : null

describe.skipIf(process.platform !== 'linux')(
  'power cuts (Linux only: the power-loss model resolves descriptors through /proc/self/fd)',
  () => {
    if (process.env.POWERCUT_SURVEY !== undefined) {
      it('survey', async () => {
        const kinds = new Map<string, number[]>()
        const all: SimulationReport[] = []
        for (let i = 0; i < SCHEDULES; i++) {
          for (const flushMode of ['SYNC_FLUSH', 'ASYNC_FLUSH'] as const) {
            const seed = (SEED + i) >>> 0
            const dir = join(root, `s-${i}-${flushMode}`)
            fs.mkdirSync(dir)
            const report = await simulateFromStart({
              seed,
              flushMode,
              steps: STEPS,
              dir,
              disableDataSyncs: BREAK_MSYNC,
              advance: (ms) => vi.advanceTimersByTimeAsync(ms),
              jump,
            })
            all.push(report)
            for (const f of [...report.failures, ...report.knownOpen.map((k) => `KNOWN ${k}`)]) {
              const k = `${flushMode} ${f
                .replace(/^step \d+: /, '')
                .replace(/\d+/g, 'N')
                .slice(0, 160)}`
              kinds.set(k, [...(kinds.get(k) ?? []), seed])
            }
            fs.rmSync(dir, { recursive: true, force: true })
          }
        }
        for (const [k, seeds] of kinds) console.log(`${seeds.length}x ${k} seeds ${seeds.slice(0, 4)}`)
        const sum = (f: (r: SimulationReport) => number) => all.reduce((a, r) => a + f(r), 0)
        console.log(
          `survey: ${all.length} schedules from seed ${SEED}, ${sum((r) => r.steps)} steps, ${sum((r) => r.puts)} puts, ${sum((r) => r.powerCuts)} power cuts ` +
            `(${sum((r) => r.cutsDuringRecovery)} more during recovery, ${sum((r) => r.cutsDuringClose)} during close), ${sum((r) => r.crashes)} crashes, ` +
            `${sum((r) => r.damages)} damages, ${passes(all)}, ${sum((r) => r.requiredChecked)} durable messages found again, ` +
            `${all.filter((r) => r.failures.length > 0).length} failing, ${all.filter((r) => r.knownOpen.length > 0).length} ended by a known open issue`,
        )
        expect(kinds.size).toBeGreaterThanOrEqual(0)
      }, 1_800_000)
      return
    }
    if (ONE !== null) {
      // POWERCUT_SCHEDULE=<schedule seed> [POWERCUT_MODE=ASYNC_FLUSH]: one schedule, its full log, its directories kept.
      it(`schedule ${ONE} alone, directories kept`, async () => {
        const flushMode = (process.env.POWERCUT_MODE ?? 'SYNC_FLUSH') as FlushMode
        const dir = tempDir('mqstore-powercut-replay-')
        const report = await simulateFromStart({
          seed: ONE,
          flushMode,
          steps: STEPS,
          dir,
          keepImages: true,
          advance: (ms) => vi.advanceTimersByTimeAsync(ms),
          jump,
        })
        console.log(`${dir}\n${report.log.join('\n')}\nknown open: ${report.knownOpen.join('\n')}`)
        expect(report.failures).toEqual([])
      }, 600_000)
      return
    }
    for (const flushMode of ['SYNC_FLUSH', 'ASYNC_FLUSH'] as const) {
      it(`${flushMode}: ${SCHEDULES} schedules of ${STEPS} steps keep every durable put, serve nothing changed or twice, and verify clean`, async () => {
        const reports: SimulationReport[] = []
        let run = 0
        await fc.assert(
          fc.asyncProperty(fc.integer({ min: 1, max: 2 ** 31 - 1 }), async (seed) => {
            const dir = join(root, `run-${run++}`)
            fs.mkdirSync(dir)
            const report = await simulateFromStart({
              seed,
              flushMode,
              steps: STEPS,
              dir,
              disableDataSyncs: BREAK_MSYNC,
              advance: (ms) => vi.advanceTimersByTimeAsync(ms),
              jump,
            })
            reports.push(report)
            if (report.failures.length > 0) throw new Error(describeFailure(report))
            fs.rmSync(dir, { recursive: true, force: true })
          }),
          { numRuns: SCHEDULES, seed: SEED, endOnFailure: true },
        )
        const sum = (f: (r: SimulationReport) => number) => reports.reduce((a, r) => a + f(r), 0)
        const knownOpen = reports.flatMap((r) => r.knownOpen.map((k) => `schedule ${r.seed}: ${k}`))
        if (process.env.POWERCUT_VERBOSE || knownOpen.length > 0) {
          console.log(
            `${flushMode}: ${reports.length} schedules (POWERCUT_SEED=${SEED}), ${sum((r) => r.steps)} steps, ${sum((r) => r.puts)} puts (${sum((r) => r.acked)} acknowledged), ${sum((r) => r.reads)} reads, ` +
              `${sum((r) => r.powerCuts)} power cuts (${sum((r) => r.cutsDuringRecovery)} more during recovery, ${sum((r) => r.cutsDuringClose)} during close), ` +
              `${sum((r) => r.crashes)} crashes, ${sum((r) => r.damages)} damages, ${sum((r) => r.cleanReopens)} clean reopens, ${passes(reports)}, ` +
              `${sum((r) => r.requiredChecked)} durable messages found again, ${sum((r) => r.lostUnflushed)} unflushed ones lost (allowed), ` +
              `${knownOpen.length} schedules ended by a known open issue${knownOpen.length > 0 ? `:\n  ${knownOpen.join('\n  ')}` : ''}`,
          )
        }
        // The schedules did what they are for: cuts, with durable data to check after them.
        expect(sum((r) => r.powerCuts)).toBeGreaterThanOrEqual(SCHEDULES)
        expect(sum((r) => r.acked)).toBeGreaterThan(0)
        expect(sum((r) => r.requiredChecked)).toBeGreaterThan(0)
      }, 600_000)
    }

    // Found by the retention steps: a reopened store rebuilt its compaction logs in directories it
    // never made durable, and retention then deleted the commit-log files they copied; a cut lost
    // the latest value of every key. Cleanup now syncs the copies first, and the directories are
    // created durably.
    it('compaction logs survive a power cut after retention deleted the commit-log files they copy', async () => {
      const storeDir = join(root, 'store')
      fs.mkdirSync(storeDir)
      // The worst cut: every unsynced page and name comes back old.
      const disk = new PowerLossDisk({ root: storeDir, seed: 7, imageRoot: join(root, 'images'), mode: 'lose-unsynced' }).arm()
      const options = {
        flushDiskType: 'SYNC_FLUSH' as const,
        mappedFileSizeCommitLog: 4096,
        maxHashSlotNum: 64,
        maxIndexNum: 256,
        fileReservedTime: 1,
        deleteCommitLogFilesInterval: 0,
        deleteConsumeQueueFilesInterval: 0,
        topics: { kv: { cleanupPolicy: 'compact' as const } },
        compaction: { enabled: false },
        diskUsage: { usage: () => ({ totalBytes: 2 ** 40, availableBytes: 2 ** 39, usedRatio: 0.5 }) },
      }
      let cutDir: string
      const store = await MessageStore.open(storeDir, options)
      try {
        for (let i = 0; i < 12; i++) {
          const put = await store.putMessage({ topic: 'kv', queueId: 0, keys: [`k${i % 4}`], body: Buffer.alloc(900, i) })
          expect(put.status).toBe('PUT_OK')
        }
        // Other topics' puts fill the next files, so that retention may take every file with a key.
        for (let i = 0; i < 10; i++)
          expect((await store.putMessage({ topic: 'other', queueId: 0, body: Buffer.alloc(900) })).status).toBe('PUT_OK')
        // Every commit-log file but the one being written is two hours old.
        const names = fs.readdirSync(join(storeDir, 'commitlog')).sort()
        expect(names.length).toBeGreaterThan(2)
        const old = (Date.now() - 2 * 3_600_000) / 1000
        for (const name of names.slice(0, -1)) fs.utimesSync(join(storeDir, 'commitlog', name), old, old)
        store.executeDeleteFilesManually()
        await store.runCleanupPass()
        // Every record of the compacted topic is now only in its compaction log.
        expect(store.getMinPhyOffset()).toBeGreaterThan(12 * 1000)
        cutDir = disk.cutNow('after a cleanup pass').dir
      } finally {
        await store.close()
        disk.disarm()
      }
      const reopened = await MessageStore.open(cutDir, options)
      try {
        const latest = new Map<string, number>()
        for (const m of reopened.getMessage('g', 'kv', 0, 0, 32).messages) latest.set(m.keys.join(' '), m.body[0])
        expect(latest).toEqual(
          new Map([
            ['k0', 8],
            ['k1', 9],
            ['k2', 10],
            ['k3', 11],
          ]),
        )
      } finally {
        await reopened.close()
      }
    })

    // Found by the compaction steps: a compaction log cut back at open (the commit log had lost its
    // last records) zeroed the dropped records without syncing them, then rolled a new file below
    // their offsets; a power cut brought the dropped records back and the next open refused the
    // store (two files holding the same offsets).
    it('records a compaction log dropped at open do not come back after a power cut', async () => {
      const storeDir = join(root, 'store')
      const options = {
        flushDiskType: 'SYNC_FLUSH' as const,
        maxHashSlotNum: 64,
        maxIndexNum: 256,
        topics: { kv: { cleanupPolicy: 'compact' as const, segmentBytes: 4096 } },
        compaction: { enabled: false },
        diskUsage: { usage: () => ({ totalBytes: 2 ** 40, availableBytes: 2 ** 39, usedRatio: 0.5 }) },
      }
      const put = async (store: MessageStore, i: number, bytes: number): Promise<number> => {
        const r = await store.putMessage({ topic: 'kv', queueId: 0, keys: [`k${i % 5}`], body: Buffer.alloc(bytes, i) })
        expect(r.status).toBe('PUT_OK')
        return r.wroteOffset
      }
      const first = await MessageStore.open(storeDir, options)
      const offsets: number[] = []
      for (let i = 0; i < 30; i++) offsets.push(await put(first, i, 200))
      await first.close()
      const logDir = join(storeDir, 'compaction', 'kv', '0')
      expect(fs.readdirSync(logDir).length).toBeGreaterThan(1)
      // The commit log loses its records from queue offset 10 on (damage to the real file).
      const commitLog = join(storeDir, 'commitlog', fs.readdirSync(join(storeDir, 'commitlog')).sort()[0])
      const data = fs.readFileSync(commitLog)
      data.fill(0, offsets[10])
      fs.writeFileSync(commitLog, data)

      const disk = new PowerLossDisk({ root: storeDir, seed: 11, imageRoot: join(root, 'images'), mode: 'lose-unsynced' }).arm()
      let cutDir: string
      const store = await MessageStore.open(storeDir, options)
      try {
        expect(store.getMaxOffsetInQueue('kv', 0)).toBe(10)
        // Larger records: the log rolls a new file at a lower offset than the one it dropped.
        for (let i = 10; i < 20; i++) await put(store, i, 1500)
        cutDir = disk.cutNow('after a roll').dir
      } finally {
        await store.close()
        disk.disarm()
      }
      const reopened = await MessageStore.open(cutDir, options)
      try {
        const got = reopened.getMessage('g', 'kv', 0, 0, 64).messages
        expect(got.length).toBeGreaterThan(0)
        for (const m of got) expect(m.body.length).toBe(m.queueOffset < 10 ? 200 : 1500)
      } finally {
        await reopened.close()
      }
    })

    it('the same schedules catch a store whose data syncs do nothing (SYNC_FLUSH: acknowledged puts are lost)', async () => {
      const lost: string[] = []
      for (let i = 0; i < 8 && lost.length === 0; i++) {
        const dir = join(root, `broken-${i}`)
        fs.mkdirSync(dir)
        const report = await simulateFromStart({
          seed: (SEED + i) | 0 || 1,
          flushMode: 'SYNC_FLUSH',
          steps: STEPS,
          dir,
          disableDataSyncs: true,
          advance: (ms) => vi.advanceTimersByTimeAsync(ms),
          jump,
        })
        lost.push(...report.failures.filter((f) => f.includes('was durable and is lost')))
      }
      expect(lost.length).toBeGreaterThan(0)
    }, 600_000)
  },
)
