// The pure parts of the benchmark: run order, medians and spread, the limits' record encoder, the
// report's ratios on a busy machine, and the CPU profile summariser.
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { crc32 } from 'node:zlib'
import { describe, expect, it } from 'vitest'

import { firstPassWorkRate } from '../bench/first-pass.js'
import { touchRegions } from '../bench/touch-ahead.js'
import { encodeRecord, putLoopEncodeRates, putLoopWorkRates, recordLength, workRegions, type LimitsResult } from '../bench/limits.js'
import { shortLocation, summarizeProfile, type CpuProfile } from '../bench/profile.js'
import { jsonReport, judgeTargets, ratioText, textReport, type BenchRuns } from '../bench/report.js'
import {
  BODY_SIZE,
  lookupResult,
  makeBody,
  PUT_BATCH,
  putInBatches,
  rotation,
  SCAN_RUNS,
  SCAN_STEADY_WARMUP_RUNS,
  SCAN_WARMUP_RUNS,
  spreadOf,
  threadClock,
  threadTimesSince,
  timeLookups,
  timeScan,
  type EngineResult,
} from '../bench/workload.js'
import { decodeMessage, OFFSET_BODYCRC } from '../lib/store/commitlog/record.js'
import { INDEX_COUNT_OFFSET, indexEntryPosition, topicKeyHash } from '../lib/store/index/index-layout.js'
import { MessageStore } from '../lib/store/message-store.js'
import { repoRoot, tempDir } from './helpers/tmp.js'

function engine(name: 'mqstore' | 'lmdb', putRate: number, scanRate: number): EngineResult {
  return {
    engine: name,
    version: '1',
    put: { count: 1, seconds: 1, rate: putRate, diskBytes: 1, bodyBytes: 1, rssBytes: 1 },
    scan: { count: 1, runs: [1], seconds: 1, rate: scanRate },
  }
}

/** One run's limits: the two every run has, and `extra` (the figures a test looks at). */
function limitsOf(extra: Partial<LimitsResult> = {}): LimitsResult {
  return { recordBytes: 372, jsEncode: 1000, memcpy: 4000, jsEncodeRuns: [], memcpyRuns: [], ...extra }
}

/** The text report's line that starts with `start`; undefined when there is none. */
function reportRow(b: BenchRuns, start: string): string | undefined {
  return textReport(b)
    .split('\n')
    .find((line) => line.startsWith(start))
}

function bench(loadAtStart: number, runs: [number, number][]): BenchRuns {
  return {
    config: { count: 1, lookups: 1, syncCount: 1, bigBytes: 1, phases: new Set(['put', 'scan']), seed: 1 },
    runs: runs.map(([mq, lm]) => ({ mqstore: engine('mqstore', mq, mq * 2), lmdb: engine('lmdb', lm, lm) })),
    orders: runs.map((_, k) => rotation(['mqstore', 'lmdb'], k)),
    limits: runs.map(() => limitsOf()),
    load: { atStart: [loadAtStart, 0, 0], valid: loadAtStart <= 1 },
    errors: [],
    profiles: [],
  }
}

describe('bench runs', () => {
  it('rotates the engines run by run, so each starts once in three runs', () => {
    const engines = ['mqstore', 'lmdb', 'sqlite']
    expect([0, 1, 2, 3].map((run) => rotation(engines, run))).toEqual([
      ['mqstore', 'lmdb', 'sqlite'],
      ['lmdb', 'sqlite', 'mqstore'],
      ['sqlite', 'mqstore', 'lmdb'],
      ['mqstore', 'lmdb', 'sqlite'],
    ])
    expect(rotation([], 2)).toEqual([])
  })

  it('reports the median of the runs with their min and max, ignoring runs without the figure', () => {
    expect(spreadOf([3, 1, 2])).toEqual({ median: 2, min: 1, max: 3, values: [3, 1, 2] })
    expect(spreadOf([4, undefined, 1, Number.NaN])?.median).toBe(2.5)
    expect(spreadOf([undefined])).toBeUndefined()
  })

  it('judges medians against lmdb and against the limits; on a busy machine every ratio says it is not valid', () => {
    // put: mqstore 700, 800, 900 vs lmdb 100 each: 8x; against the JS encode limit (1000): 0.8.
    const quiet = bench(0.5, [
      [900, 100],
      [700, 100],
      [800, 100],
    ])
    const put = judgeTargets(quiet).find((t) => t.target === '>= 8x lmdb')
    expect(put).toMatchObject({ ratio: '8.00x', result: 'PASS' })
    const limit = judgeTargets(quiet).find((t) => t.target === '>= 0.6 of the limit')
    expect(limit).toMatchObject({ ratio: '0.80 of the limit', result: 'PASS' })
    // scan: mqstore 1,600 vs lmdb 100 (medians) is 16x, a pass; put at 7.9x misses.
    expect(judgeTargets(quiet).find((t) => t.phase.includes('getMessage'))).toMatchObject({ ratio: '16.00x', result: 'PASS' })
    const slower = bench(0.5, [[850, 100]])
    expect(judgeTargets(slower).find((t) => t.target === '>= 8x lmdb')?.result).toBe('PASS')
    expect(judgeTargets(bench(0.5, [[790, 100]])).find((t) => t.target === '>= 8x lmdb')?.result).toBe('MISS')

    const busy = bench(3.25, [
      [900, 100],
      [700, 100],
      [800, 100],
    ])
    expect(ratioText(2, busy)).toBe('2.00x (not valid: load average 3.25 at start)')
    for (const t of judgeTargets(busy).filter((t) => t.ratio !== '-')) {
      expect(t.ratio).toContain('not valid: load average 3.25 at start')
      if (t.target.includes('lmdb') || t.target.includes('limit')) expect(t.result).toBe('not valid')
    }
    const text = textReport(busy)
    expect(text).toContain('RATIOS NOT VALID')
    expect(text).toContain('700 - 900')
  })
})

describe('bench lookups', () => {
  it('times each lookup alone, counts the right ones, and reports the repeated pass beside the first', () => {
    const picks = [5, 7, 9]
    const pass = timeLookups(
      picks.length,
      (j) => (j === 1 ? undefined : picks[j]),
      (got, j) => got === picks[j],
    )
    expect(pass.found).toBe(2)
    expect(pass.latency).toHaveLength(3)
    for (const ns of pass.latency) expect(ns).toBeGreaterThanOrEqual(0)

    const first = Float64Array.from([1000, 2000, 3000])
    const again = Float64Array.from([4000, 5000, 6000])
    const result = lookupResult(3, 3, 0.5, first, again, 0)
    expect(result.rate).toBe(6)
    expect(result.latencyUs.max).toBe(3)
    expect(result.repeatLatencyUs?.max).toBe(6)

    const runs = bench(0.5, [[1, 1]])
    const mqstore = runs.runs[0].mqstore
    if (mqstore === undefined) throw new Error('no mqstore run')
    mqstore.lookup = result
    // p99 of 4, 5 and 6 us: 6.00 us, in its own row below the first pass's 3.00.
    expect(textReport(runs)).toMatch(/lookup latency p99, the same keys again +us \(-\) +6\.00/)
  })
})

describe('bench limits', () => {
  it("encodes the bench's message as the record mqstore writes for it", async () => {
    const i = 1_000_001
    const body = makeBody(i)
    const target = Buffer.alloc(1024)
    const view = new DataView(target.buffer, target.byteOffset, target.byteLength)
    const length = encodeRecord(target, view, 16, i, body, 0, 4096, 1_700_000_000_000)
    expect(length).toBe(recordLength(i))
    const decoded = decodeMessage(target, 16, true)
    expect(decoded).toMatchObject({ topic: 'BenchTopic1', queueId: 0, queueOffset: 62_500, storeSize: length, keys: [`k${i}`] })
    expect(decoded?.body.equals(body)).toBe(true)

    // The store writes a record of the same length for the same message.
    const store = await MessageStore.open(tempDir('mqstore-bench-limits-'), { messageIndexEnable: false })
    try {
      expect((await store.putMessage({ topic: 'BenchTopic1', queueId: 0, body, keys: `k${i}` })).status).toBe('PUT_OK')
      const got = store.getMessage('g', 'BenchTopic1', 0, 0, 1)
      expect(got.messages[0].storeSize).toBe(length)
      expect(got.messages[0].body.length).toBe(BODY_SIZE)
    } finally {
      await store.close()
    }
  })
})

describe('scan passes', () => {
  it("times a fresh process's first passes, then the steady ones after more untimed passes", async () => {
    // A clock that each pass moves on by its number (pass k takes k ms).
    let clock = 0n
    let passes = 0
    const result = await timeScan(
      1000,
      async () => {
        passes++
        clock += BigInt(passes) * 1_000_000n
      },
      () => clock,
    )
    expect(passes).toBe(SCAN_WARMUP_RUNS + SCAN_RUNS + SCAN_STEADY_WARMUP_RUNS + SCAN_RUNS)
    const ms = (from: number) => Array.from({ length: SCAN_RUNS }, (_, k) => (from + k) / 1000)
    expect(result.first?.runs).toEqual(ms(SCAN_WARMUP_RUNS + 1))
    expect(result.runs).toEqual(ms(SCAN_WARMUP_RUNS + SCAN_RUNS + SCAN_STEADY_WARMUP_RUNS + 1))
    // The median pass of each set, and the count over it.
    const steadyMedian = (SCAN_WARMUP_RUNS + SCAN_RUNS + SCAN_STEADY_WARMUP_RUNS + 1 + (SCAN_RUNS >> 1)) / 1000
    expect(result.seconds).toBeCloseTo(steadyMedian, 9)
    expect(result.rate).toBeCloseTo(1000 / steadyMedian, 6)
    expect(result.first?.rate).toBeCloseTo(1000 / ((SCAN_WARMUP_RUNS + 1 + (SCAN_RUNS >> 1)) / 1000), 6)
    expect(result.count).toBe(1000)
  })

  it("prints the first passes' rate beside the steady one, and no such row for results without them", () => {
    const b = bench(0.1, [[900, 100]])
    const mq = b.runs[0].mqstore!
    mq.scan = { count: 100, runs: [0.001], seconds: 0.001, rate: 100_000, first: { runs: [0.004], seconds: 0.004, rate: 25_000 } }
    const line = () => reportRow(b, "scan one queue, getMessage 32 at a time, a fresh process's first passes")
    expect(line()).toMatch(/msg\/s \(\+\) +25,000 /)
    expect(reportRow(b, 'scan one queue, getMessage 32 at a time  ')).toMatch(/100,000/)
    mq.scan = { count: 100, runs: [0.001], seconds: 0.001, rate: 100_000 }
    expect(line()).toBeUndefined()
  })
})

describe("a reader's rows", () => {
  it("prints a read-only opener's scan and lookups, and the zero-copy and compacted scans, for mqstore alone, and no such rows without them", () => {
    const b = bench(0.1, [[900, 100]])
    const row = (start: string) => reportRow(b, start)
    const scan = 'scan one queue, getMessage 32 at a time, a read-only opener (pread)'
    const lookups = 'lookup by key, a read-only opener (pread)'
    expect(row(scan)).toBeUndefined()
    expect(row(lookups)).toBeUndefined()
    const mq = b.runs[0].mqstore!
    mq.scanReader = { count: 100, runs: [0.0002], seconds: 0.0002, rate: 500_000 }
    const latencyUs = { p50: 1, p99: 1, p999: 1, max: 1, mean: 1 }
    mq.lookupReader = { count: 10, found: 10, seconds: 0.0002, rate: 50_000, latencyUs }
    expect(row(scan)).toMatch(/msg\/s \(\+\) +500,000 +- /)
    expect(row(lookups)).toMatch(/lookups\/s \(\+\) +50,000 +- /)
    const zeroCopy = 'scan one queue, getMessage 32 at a time, zero-copy (copyMessageBody: false)'
    const compacted = 'scan a compacted queue (each key put twice), getMessage 32 at a time'
    expect(row(zeroCopy)).toBeUndefined()
    expect(row(compacted)).toBeUndefined()
    mq.scanZeroCopy = { count: 100, runs: [0.00004], seconds: 0.00004, rate: 2_500_000 }
    mq.scanCompacted = { count: 100, runs: [0.00005], seconds: 0.00005, rate: 2_000_000 }
    expect(row(zeroCopy)).toMatch(/msg\/s \(\+\) +2,500,000 +- /)
    expect(row(compacted)).toMatch(/msg\/s \(\+\) +2,000,000 +- /)
  })
})

describe('the zero-copy lookup rows', () => {
  it("prints the zero-copy lookups' rate and p99s for mqstore alone, apart from the judged lookup rows, and no such rows without them", () => {
    const b = bench(0.1, [[900, 100]])
    const row = (start: string) => reportRow(b, `${start}  `)
    const rate = 'lookup by key, zero-copy (copyMessageBody: false)'
    const p99 = 'lookup latency p99, zero-copy'
    const again = 'lookup latency p99, zero-copy, the same keys again'
    for (const name of [rate, p99, again]) expect(row(name)).toBeUndefined()
    const mq = b.runs[0].mqstore!
    const latencyUs = { p50: 2, p99: 4.5, p999: 9, max: 20, mean: 2.5 }
    const repeatLatencyUs = { p50: 2, p99: 3.25, p999: 8, max: 20, mean: 2.2 }
    mq.lookupZeroCopy = { count: 10, found: 10, seconds: 0.00002, rate: 500_000, latencyUs, repeatLatencyUs }
    expect(row(rate)).toMatch(/lookups\/s \(\+\) +500,000 +- /)
    expect(row(p99)).toMatch(/us \(-\) +4\.50 +- /)
    expect(row(again)).toMatch(/us \(-\) +3\.25 +- /)
    // The judged lookup rows stay the safe lookups' (none in this bench).
    expect(textReport(b)).not.toMatch(/lookup by key +>= 4x lmdb +500,000/)
  })
})

describe("the put phase's loop", () => {
  it('hands over every message in order, a batch at a time, and stops at the first result that is not PUT_OK', async () => {
    const seen: number[] = []
    const sizes: number[] = []
    await putInBatches(PUT_BATCH + 5, async (batch) => {
      sizes.push(batch.length)
      for (const m of batch) seen.push(m.body.readUInt32BE(0))
      expect(batch[0]).toMatchObject({
        topic: `BenchTopic${seen[seen.length - batch.length] % 4}`,
        keys: `k${seen[seen.length - batch.length]}`,
      })
      return batch.map(() => ({ status: 'PUT_OK' }))
    })
    expect(sizes).toEqual([PUT_BATCH, 5])
    expect(seen).toEqual(Array.from({ length: PUT_BATCH + 5 }, (_, i) => i))

    let calls = 0
    const failing = putInBatches(3 * PUT_BATCH, async (batch) => {
      calls++
      return batch.map((_, j) => ({ status: calls === 2 && j === 7 ? 'SERVICE_NOT_AVAILABLE' : 'PUT_OK' }))
    })
    await expect(failing).rejects.toThrow(`put ${PUT_BATCH + 7}: SERVICE_NOT_AVAILABLE`)
    expect(calls).toBe(2)
    // A short answer is a failure too, not a pass.
    await expect(putInBatches(2, async () => [{ status: 'PUT_OK' }])).rejects.toThrow('put 1: undefined')
  })

  it('with the encode-only engine, writes each message as the record mqstore writes for it, and times passes of the loop', async () => {
    const target = Buffer.alloc(1024 * 1024)
    const rates = await putLoopEncodeRates(target, 2 * PUT_BATCH)
    expect(rates).toHaveLength(5)
    for (const rate of rates) expect(rate).toBeGreaterThan(0)
    // The last pass wrote messages 0, 1, ... from the start of the target (it wraps, and starts over).
    let at = 0
    for (let i = 0; i < 3; i++) {
      const decoded = decodeMessage(target, at, true)
      expect(decoded).toMatchObject({ topic: `BenchTopic${i % 4}`, keys: [`k${i}`], storeSize: recordLength(i) })
      expect(decoded?.body.equals(makeBody(i))).toBe(true)
      at += recordLength(i)
    }
  })
})

describe("the put loop's work engine", () => {
  it('writes each record with its body CRC, a unit in its queue and its key in the index, and times passes of the loop', async () => {
    const target = Buffer.alloc(1024 * 1024)
    const regions = workRegions(200, 1024, 8192)
    const rates = await putLoopWorkRates(target, regions, 2 * PUT_BATCH)
    expect(rates).toHaveLength(5)
    for (const rate of rates) expect(rate).toBeGreaterThan(0)
    // The last pass wrote messages 0, 1, ... from the start of the target and of each region.
    let at = 0
    const starts: number[] = []
    for (let i = 0; i < 17; i++) {
      const decoded = decodeMessage(target, at, true)
      expect(decoded).toMatchObject({ topic: `BenchTopic${i % 4}`, keys: [`k${i}`], storeSize: recordLength(i) })
      expect(target.readInt32BE(at + OFFSET_BODYCRC)).toBe((crc32(makeBody(i)) & 0x7fffffff) | 0)
      starts.push(at)
      at += recordLength(i)
    }
    // Messages 0 and 16 are the first two of topic 0's queue 0.
    const units = regions.units[0]
    expect([units.getUint32(4), units.getInt32(8), units.getUint32(24), units.getInt32(28)]).toEqual([
      starts[0],
      recordLength(0),
      starts[16],
      recordLength(16),
    ])
    // Key k5 is entry 6 (entries count from 1), at record 5's offset; the header counts the pass.
    const entry = indexEntryPosition(6, regions.slots)
    expect(regions.index.getInt32(entry)).toBe(topicKeyHash('BenchTopic1', 'k5'))
    expect(regions.index.getUint32(entry + 8)).toBe(starts[5])
    expect(regions.index.getInt32(INDEX_COUNT_OFFSET)).toBe(2 * PUT_BATCH + 1)
  })
})

describe("the work engine's first pass", () => {
  it('times one pass after warm-up passes, each into regions of its own, in this process', async () => {
    expect(await firstPassWorkRate(2 * PUT_BATCH, PUT_BATCH, 1)).toBeGreaterThan(0)
  })

  it('runs in child processes of its own, one after the other (real processes, from the build)', async () => {
    const { firstPassWorkRates } = (await import(
      pathToFileURL(join(repoRoot, 'dist/bench/first-pass-runs.js')).href
    )) as typeof import('../bench/first-pass-runs.js')
    const rates = await firstPassWorkRates(2 * PUT_BATCH, 2, PUT_BATCH)
    expect(rates).toHaveLength(2)
    for (const rate of rates) expect(rate).toBeGreaterThan(0)
  })

  it('runs over new memory that a worker thread faults in ahead of the writer (real processes, from the build)', async () => {
    const { firstPassWorkRates } = (await import(
      pathToFileURL(join(repoRoot, 'dist/bench/first-pass-runs.js')).href
    )) as typeof import('../bench/first-pass-runs.js')
    const rates = await firstPassWorkRates(2 * PUT_BATCH, 1, PUT_BATCH, 'ahead')
    expect(rates).toHaveLength(1)
    expect(rates[0]).toBeGreaterThan(0)
  })

  it('faults pages in without changing a byte the writer may already have written', () => {
    const shared = new SharedArrayBuffer(3 * 4096 + 100)
    const bytes = new Uint8Array(shared)
    bytes.fill(7, 0, 5000)
    bytes[4096 * 3] = 9
    touchRegions([[shared, shared.byteLength]])
    expect(bytes.subarray(0, 5000).every((b) => b === 7)).toBe(true)
    expect(bytes[4096 * 3]).toBe(9)
    expect(bytes.subarray(5000, 4096 * 3).every((b) => b === 0)).toBe(true)
  })
})

describe('bench limits in the report', () => {
  // Each put-loop limit: its row, the words of its line in the limits table, its runs, their median
  // and the put's median (800) over it.
  const putLoops = [
    {
      name: 'putLoopEncode',
      row: 'put, against the put loop with an engine that only encodes',
      line: "the put phase's own loop",
      runs: [4000, 3000, 5000],
      median: '4,000',
      spread: '3000 - 5000',
      share: '0\\.20',
    },
    {
      name: 'putLoopWork',
      row: "put, against the put loop with an engine that does the put's own work",
      line: 'the work a put cannot leave out',
      runs: [2000, 1600, 2500],
      median: '2,000',
      spread: '1600 - 2500',
      share: '0\\.40',
    },
    {
      name: 'putLoopWorkFirstPass',
      row: "put, against that engine's first pass in a process of its own",
      line: "that engine's first pass in a process of its own",
      runs: [1000, 900, 1300],
      median: '1,000',
      spread: '900 - 1300',
      share: '0\\.80',
    },
    {
      name: 'putLoopWorkFirstPassAhead',
      row: 'put, against that first pass with its new memory faulted in ahead',
      line: 'faulted in during the pass by a thread of its own',
      runs: [1000, 700, 1600],
      median: '1,000',
      spread: '700 - 1600',
      share: '0\\.80',
    },
  ] as const
  for (const loop of putLoops) {
    it(`reads the put against ${loop.name} and prints that limit's median and spread`, () => {
      const b = bench(0.1, [
        [900, 100],
        [800, 100],
        [700, 100],
      ])
      b.limits = loop.runs.map((figure) => limitsOf({ jsEncode: 8000, [loop.name]: figure }))
      const lines = textReport(b).split('\n')
      expect(lines.find((l) => l.startsWith(loop.row))).toMatch(new RegExp(`msg/s \\(\\+\\) +800 .* ${loop.share} *\\|?$`))
      const limit = lines.find((l) => l.includes(loop.line))
      expect(limit).toContain(loop.median)
      expect(limit).toContain(loop.spread)
    })
  }

  it("prints the private copy's p99 as the median of the runs, with their spread, beside the lookups", () => {
    const b = bench(0.1, [
      [900, 100],
      [800, 100],
      [700, 100],
    ])
    b.limits = [14.2, 9.5, 21].map((p99) => limitsOf({ privateCopyP99Us: p99 }))
    const row = textReport(b)
      .split('\n')
      .find((line) => line.includes('buffer of its own'))
    expect(row).toContain('14.20')
    expect(row).toContain('9.50 - 21.00')
    expect(row).toContain('lookup p99')
    // Runs measured before the figure existed print a dash, not a zero.
    b.limits = b.limits.map(() => limitsOf())
    expect(
      textReport(b)
        .split('\n')
        .find((line) => line.includes('buffer of its own')),
    ).toMatch(/us +- +- +lookup p99/)
  })

  it("prints the lookup-touch limit as lookups/s, and mqstore's lookups as a fraction of it", () => {
    const b = bench(0.1, [
      [900, 100],
      [800, 100],
      [700, 100],
    ])
    b.limits = [360_000, 300_000, 400_000].map((lookupTouches) => limitsOf({ lookupTouches, lookupTouchesOnly: lookupTouches * 5 }))
    for (const run of b.runs) {
      run.mqstore!.lookup = { count: 10, found: 10, seconds: 1, rate: 180_000, latencyUs: { p50: 2, p99: 9, p999: 20, max: 30, mean: 3 } }
    }
    const lines = textReport(b).split('\n')
    const limit = lines.find((line) => line.includes("a lookup's memory touches alone"))
    expect(limit).toContain('360,000')
    expect(limit).toContain('300 k - 400 k')
    // The touches without the copy, on the next row: what the copy's buffer costs is the difference.
    const touches = lines[lines.indexOf(limit!) + 1]
    expect(touches).toContain('the same touches without the private copy')
    expect(touches).toContain('1,800,000')
    expect(touches).toContain('1.50 M - 2.00 M')
    expect((jsonReport(b) as { limits: { lookupTouchesOnly: { median: number } } }).limits.lookupTouchesOnly.median).toBe(1_800_000)
    expect(lines.find((line) => line.startsWith('lookup by key ') && line.includes('lookups/s'))).toMatch(/ 0\.50$/)
  })

  it('prints the cost of an ArrayBuffer with and without the concurrent sweeper, and the node flags the engines ran with', () => {
    const b = bench(0.1, [
      [900, 100],
      [800, 100],
      [700, 100],
    ])
    b.limits = [2100, 1900, 2400].map((ns) => limitsOf({ arrayBufferNs: ns, arrayBufferUnsweptNs: ns / 5 }))
    const lines = textReport(b).split('\n')
    const swept = lines.find((line) => line.includes("with V8's concurrent array-buffer sweeping (the default)"))
    expect(swept).toContain('2,100')
    expect(swept).toContain('1,900 - 2,400')
    expect(swept).toContain("lmdb's getRange makes one per value")
    const unswept = lines.find((line) => line.includes('the same with --no-concurrent-array-buffer-sweeping'))
    expect(unswept).toContain('420')
    expect(unswept).toContain('380 - 480')
    // Whatever flags the test process has (vitest gives its forks --expose-gc), the header names them.
    expect(lines.find((line) => line.startsWith('node v'))).toMatch(/^node v\S+ \((no node flags|node flags: [^)]+)\), /)
    const json = jsonReport(b) as { environment: { nodeFlags: string[] } }
    expect(json.environment.nodeFlags).toEqual(process.execArgv.filter((flag) => !flag.startsWith('--cpu-prof')))
  })
})

describe('big store rows', () => {
  it('reads the scan after a power cut against a raw read of the same log, in the same run', () => {
    const b = bench(0.1, [[900, 100]])
    const mq = b.runs[0].mqstore!
    // 1 GB scanned in 2 s (0.5 GB/s); the same GB read raw in 0.25 s (4 GB/s): 0.125 of it.
    mq.big = {
      messages: 1,
      logicalBytes: 1e9,
      diskBytes: 1e9,
      crashOpenMs: 1000,
      scannedBytes: 1e9,
      cleanOpenMs: 5,
      rebootOpenMs: 2000,
      rebootScannedBytes: 1e9,
      rawReadMs: 250,
      rawReadBytes: 1e9,
    }
    const lines = textReport(b).split('\n')
    expect(lines.find((l) => l.startsWith('big store: raw read of its commit log'))).toMatch(/GB\/s \(\+\) +4\.00/)
    expect(lines.find((l) => l.startsWith('big store: recovery scan after a power cut / raw read'))).toMatch(/x \(\+\) +0\.13/)
    // A result from before the raw read has no such figures, and no ratio.
    mq.big = { ...mq.big, rawReadMs: undefined, rawReadBytes: undefined }
    expect(
      textReport(b)
        .split('\n')
        .find((l) => l.startsWith('big store: recovery scan after a power cut / raw read')),
    ).toBeUndefined()
  })
})

describe('thread times of the put', () => {
  it("reads the JS thread's run and wait times and the other threads' CPU over a phase (Linux: /proc; elsewhere none)", () => {
    const start = threadClock()
    const until = performance.now() + 60
    let spins = 0
    while (performance.now() < until) spins++
    const times = threadTimesSince(start)
    expect(spins).toBeGreaterThan(0)
    if (process.platform !== 'linux') {
      expect(times).toBeUndefined()
      return
    }
    // 60 ms of spinning: the thread ran for most of it, and no clock went backwards. The run time
    // the kernel reports may lag by the running slice (up to a scheduler tick) at either reading.
    expect(times!.wallNs).toBeGreaterThanOrEqual(60e6)
    expect(times!.jsRunNs).toBeGreaterThan(20e6)
    expect(times!.jsRunNs).toBeLessThanOrEqual(times!.wallNs + 10e6)
    expect(times!.jsWaitNs).toBeGreaterThanOrEqual(0)
    expect(times!.otherCpuNs).toBeGreaterThanOrEqual(0)
    expect(threadTimesSince(undefined)).toBeUndefined()
  })

  it('prints each as a share of the put time, and nothing for a result without them', () => {
    const b = bench(0.1, [[900, 100]])
    const put = b.runs[0].mqstore!.put!
    put.threads = { wallNs: 1e9, jsRunNs: 0.69e9, jsWaitNs: 0.18e9, otherCpuNs: 0.8e9 }
    const lines = textReport(b).split('\n')
    expect(lines.find((l) => l.startsWith('put: JS thread on a CPU'))).toMatch(/share \(\+\) +0\.69/)
    expect(lines.find((l) => l.startsWith('put: JS thread ready but waiting'))).toMatch(/share \(-\) +0\.18/)
    expect(lines.find((l) => l.startsWith("put: the process's other threads"))).toMatch(/share \(-\) +0\.80/)
    // The SYNC phase's row is there only with a SYNC result that has the figures.
    expect(lines.find((l) => l.startsWith('SYNC put: JS thread on a CPU'))).toBeUndefined()
    const runs = b.runs[0].mqstore!
    runs.sync = {
      count: 1,
      producers: 64,
      seconds: 1,
      rate: 1,
      latencyUs: { p50: 1, p99: 1, p999: 1, max: 1, mean: 1 },
      mode: 'm',
      threads: { wallNs: 2e9, jsRunNs: 0.5e9, jsWaitNs: 0, otherCpuNs: 0.2e9 },
    }
    expect(
      textReport(b)
        .split('\n')
        .find((l) => l.startsWith('SYNC put: JS thread on a CPU')),
    ).toMatch(/share \(\+\) +0\.25/)
    put.threads = undefined
    expect(
      textReport(b)
        .split('\n')
        .find((l) => l.startsWith('put: JS thread on a CPU')),
    ).toBeUndefined()
  })
})

describe('the reopen phase', () => {
  it('prints the second open beside the first, and no such row for results without it', () => {
    const b = bench(0.1, [[900, 100]])
    const row = () =>
      textReport(b)
        .split('\n')
        .find((l) => l.startsWith('reopen of the put store: a second close and open'))
    b.runs[0].mqstore!.reopen = { closeMs: 20, openMs: 9, totalMs: 29 }
    expect(row()).toBeUndefined()
    b.runs[0].mqstore!.reopen = { closeMs: 20, openMs: 9, totalMs: 29, secondOpenMs: 4.25 }
    b.runs[0].lmdb!.reopen = { closeMs: 10, openMs: 1.5, totalMs: 11.5, secondOpenMs: 1.25 }
    expect(row()).toMatch(/ms \(-\) +4\.3 +1\.3/)
  })
})

describe('group commits of the SYNC phase', () => {
  it("prints mqstore's puts per commit, mean commit and share of the phase in commits, and no such rows without the figures", () => {
    const b = bench(0.1, [[900, 100]])
    const sync = {
      count: 6400,
      producers: 64,
      seconds: 0.08,
      rate: 80_000,
      latencyUs: { p50: 1, p99: 1, p999: 1, max: 1, mean: 1 },
      mode: 'm',
    }
    b.runs[0].mqstore!.sync = { ...sync }
    const row = (start: string) =>
      textReport(b)
        .split('\n')
        .find((l) => l.startsWith(start))
    expect(row('SYNC put: puts answered per group commit')).toBeUndefined()
    // 100 commits of 6,400 puts in 50 ms of the phase's 80.
    b.runs[0].mqstore!.sync = { ...sync, groupCommits: { commits: 100, requests: 6400, micros: 50_000 } }
    expect(row('SYNC put: puts answered per group commit')).toMatch(/puts \(\+\) +64\.0/)
    expect(row('SYNC put: mean group commit')).toMatch(/us \(-\) +500/)
    expect(row('SYNC put: time in group commits')).toMatch(/share \(\+\) +0\.63/)
  })
})

describe('bench profile summariser', () => {
  // main -> encode (hot) and main -> (garbage collector); samples every 1 ms from t = 1000 us.
  const profile: CpuProfile = {
    nodes: [
      { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 } },
      { id: 2, callFrame: { functionName: 'main', url: 'file:///x/dist/bench/run.js', lineNumber: 9 } },
      { id: 3, callFrame: { functionName: 'encode', url: 'file:///x/dist/lib/store/a.js', lineNumber: 41 } },
      { id: 4, callFrame: { functionName: '', url: 'file:///x/dist/lib/store/a.js', lineNumber: 99 } },
      { id: 5, callFrame: { functionName: 'encode', url: 'file:///x/dist/lib/store/a.js', lineNumber: 41 } },
    ],
    startTime: 1000,
    endTime: 9000,
    samples: [2, 3, 3, 5, 4, 3, 2, 3],
    timeDeltas: [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
  }

  it('sums self time by function name and file:line, over the whole profile or a window', () => {
    const whole = summarizeProfile(profile)
    expect(whole.totalMs).toBe(8)
    expect(whole.entries[0]).toEqual({ name: 'encode', location: 'dist/lib/store/a.js:42', selfMs: 5, share: 5 / 8 })
    expect(whole.entries.map((e) => e.name)).toEqual(['encode', 'main', '(anonymous)'])
    // Samples at 2000..9000 us; the window [4000, 6000] holds 4000 (id 5), 5000 (4), 6000 (3).
    const window = summarizeProfile(profile, { name: 'put', fromUs: 4000, toUs: 6000 })
    expect(window.window).toBe('put')
    expect(window.totalMs).toBe(3)
    expect(window.entries.find((e) => e.name === 'encode')?.selfMs).toBe(2)
    expect(summarizeProfile(profile, undefined, 1).entries).toHaveLength(1)
    expect(shortLocation('node:internal/buffer', 959)).toBe('node:internal/buffer:960')
    expect(shortLocation('', -1)).toBe('')
  })
})
