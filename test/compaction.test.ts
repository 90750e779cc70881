// The compaction unit on its own: real compaction-log files, real mmap, a manual clock.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import fc from 'fast-check'

import { CompactionService, type CompactionOptions } from '../lib/store/compaction/compaction-service.js'
import { CleanerManager } from '../lib/store/compaction/cleaner-manager.js'
import { formatCheckpoint, parseCheckpoint } from '../lib/store/compaction/cleaner-checkpoint.js'
import { groupSegments } from '../lib/store/compaction/cleaner.js'
import { recoverInterruptedSwap } from '../lib/store/compaction/compaction-log.js'
import { OffsetMap, keyDigest } from '../lib/store/compaction/offset-map.js'
import { Throttler } from '../lib/store/compaction/throttler.js'
import { TOPIC_CONFIG_DEFAULTS, type TopicConfig } from '../lib/store/topics/topic-table.js'
import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { ManualClock, makeRecord, readAll } from './helpers/compaction.js'
import { tempDir } from './helpers/tmp.js'

const T = 'compacted'
let dir: string
let clock: ManualClock
let config: TopicConfig
const services: CompactionService[] = []

beforeEach(() => {
  dir = tempDir('mqstore-compaction-')
  clock = new ManualClock()
  config = { ...TOPIC_CONFIG_DEFAULTS, cleanupPolicy: 'compact', segmentBytes: 4096, minCleanableDirtyRatio: 0 }
})
afterEach(async () => {
  for (const s of services.splice(0)) await s.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

function openService(options: CompactionOptions = {}): CompactionService {
  const s = new CompactionService(join(dir, 'compaction'), clock, () => config, { enabled: false, fileDeleteDelayMs: 0, ...options })
  s.open()
  services.push(s)
  return s
}

async function reopenService(s: CompactionService, options: CompactionOptions = {}): Promise<CompactionService> {
  await s.close()
  services.splice(services.indexOf(s), 1)
  return openService(options)
}

/** Puts `entries` (key, value or null for a tombstone) at the next offsets of queue 0. */
function put(s: CompactionService, entries: [string, string | null][], queueId = 0): void {
  for (const [key, value] of entries) {
    const offset = s.maxOffset(T, queueId)
    const { request, bytes } = makeRecord(T, queueId, offset, key, value, clock.now())
    s.dispatch(request, bytes)
    clock.advance(1)
  }
}

function latestByKey(entries: [string, string | null][], offsetBase = 0): Map<string, { offset: number; value: string | null }> {
  const m = new Map<string, { offset: number; value: string | null }>()
  entries.forEach(([k, v], i) => m.set(k, { offset: offsetBase + i, value: v }))
  return m
}

function manyUpdates(keys: number, rounds: number): [string, string | null][] {
  const out: [string, string | null][] = []
  for (let r = 0; r < rounds; r++) for (let k = 0; k < keys; k++) out.push([`key-${k}`, `value-${k}-round-${r}-${'x'.repeat(40)}`])
  return out
}

describe('compaction log', () => {
  it('keeps the latest value of each key at its original offset, with its body, in order', async () => {
    const s = openService()
    const entries = manyUpdates(10, 12)
    put(s, entries)
    const before = s.logOf(T, 0)!.segments.length
    expect(before).toBeGreaterThan(3)
    const report = await s.compact()
    expect(report.queues).toHaveLength(1)
    expect(report.recordsDropped).toBeGreaterThan(0)
    const seen = readAll(s, T, 0)
    const offsets = seen.map((r) => r.offset)
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b))
    // Every key's latest value is there, at the offset it was written at.
    const latest = latestByKey(entries)
    for (const [key, { offset, value }] of latest) {
      const hit = seen.find((r) => r.offset === offset)
      expect(hit, key).toBeDefined()
      expect(hit!.value).toBe(value)
    }
    // Below the active file nothing superseded within that range is left.
    const activeBase = s.logOf(T, 0)!.active()!.baseOffset
    const latestCleaned = latestByKey(entries.slice(0, activeBase))
    for (const r of seen.filter((x) => x.offset < activeBase)) expect(latestCleaned.get(r.key)!.offset).toBe(r.offset)
    expect(s.maxOffset(T, 0)).toBe(entries.length)
  })

  // Found by the power-cut simulator: a newer value whose commit-log record was not on disk yet
  // made a pass drop the durable older one; a power cut then lost the newer one, and the key.
  it('leaves records the commit log has not made durable out of a pass, so they supersede nothing', async () => {
    const s = openService()
    // makeRecord places queue offset n at commit-log offset 1,000,000 + 1,000 n: 0..29 are on disk.
    const durable = 1_000_000 + 30 * 1000
    s.durableCommitLogOffset = () => durable
    const entries = manyUpdates(10, 12)
    put(s, entries)
    await s.compact()
    const seen = readAll(s, T, 0)
    for (const [key, { offset, value }] of latestByKey(entries.slice(0, 30))) {
      expect(
        seen.find((r) => r.offset === offset),
        `${key}'s last durable value`,
      ).toMatchObject({ value })
    }
    // Once the commit log is flushed past them, the newer values supersede the older ones.
    s.durableCommitLogOffset = () => Number.POSITIVE_INFINITY
    await s.compact()
    expect(readAll(s, T, 0).filter((r) => r.offset < 30)).toEqual([])
  })

  it('reads a removed offset as the next survivor and keeps min/max from the compacted files', async () => {
    const s = openService()
    put(s, manyUpdates(3, 40))
    await s.compact()
    const seen = readAll(s, T, 0)
    expect(seen[0].offset).toBeGreaterThan(0)
    expect(s.minOffset(T, 0)).toBe(seen[0].offset)
    const afterZero = readAll(s, T, 0, 1)[0]
    expect(afterZero.offset).toBe(seen[0].offset)
    const gapStart = seen[0].offset + 1
    const next = seen.find((r) => r.offset >= gapStart)!
    expect(readAll(s, T, 0, gapStart)[0].offset).toBe(next.offset)
    expect(s.maxOffset(T, 0)).toBe(120)
  })

  it('survives a reopen: same survivors, replays of old offsets ignored', async () => {
    let s = openService()
    const entries = manyUpdates(5, 20)
    put(s, entries)
    await s.compact()
    const before = readAll(s, T, 0)
    s = await reopenService(s)
    expect(readAll(s, T, 0)).toEqual(before)
    const { request, bytes } = makeRecord(T, 0, 3, 'key-0', 'replayed', clock.now())
    s.dispatch(request, bytes)
    expect(readAll(s, T, 0)).toEqual(before)
    expect(s.maxOffset(T, 0)).toBe(entries.length)
  })

  it('keeps a tombstone until its persisted delete horizon, then drops it and its key', async () => {
    config.deleteRetentionMs = 10_000
    let s = openService()
    put(s, manyUpdates(4, 10))
    put(s, [['key-1', null]])
    put(
      s,
      manyUpdates(4, 10).filter(([k]) => k !== 'key-1'),
    )
    await s.compact()
    let seen = readAll(s, T, 0)
    const tomb = seen.filter((r) => r.key === 'key-1')
    expect(tomb).toHaveLength(1)
    expect(tomb[0].tombstone).toBe(true)
    expect(Number(tomb[0].horizon)).toBe(clock.now() + 10_000)
    // A later pass before the horizon keeps it; the horizon is not moved.
    clock.advance(5_000)
    put(
      s,
      manyUpdates(4, 10).filter(([k]) => k !== 'key-1'),
    )
    await s.compact()
    seen = readAll(s, T, 0)
    expect(seen.filter((r) => r.key === 'key-1').map((r) => r.horizon)).toEqual([tomb[0].horizon])
    // The horizon is kept across a reopen, and once it passed a pass drops the tombstone, even
    // with nothing new to clean (an expired horizon makes the queue eligible by itself).
    s = await reopenService(s)
    clock.advance(5_001)
    const report = await s.compact()
    expect(report.queues).toHaveLength(1)
    seen = readAll(s, T, 0)
    expect(seen.filter((r) => r.key === 'key-1')).toEqual([])
    expect(report.queues[0].tombstonesDropped).toBe(1)
  })

  it('leaves records younger than minCompactionLagMs uncleaned', async () => {
    config.minCompactionLagMs = 60_000
    const s = openService()
    put(s, manyUpdates(3, 30))
    clock.advance(120_000)
    const oldEnd = s.maxOffset(T, 0)
    put(s, manyUpdates(3, 30))
    await s.compact()
    const seen = readAll(s, T, 0)
    // Every young record (written within the lag) is still there.
    const young = seen.filter((r) => r.offset >= oldEnd)
    const log = s.logOf(T, 0)!
    const firstYoungFile = log.segments.find((f) => f.largestTimestamp > clock.now() - 60_000)!
    expect(young.length).toBeGreaterThanOrEqual(s.maxOffset(T, 0) - Math.max(oldEnd, firstYoungFile.baseOffset))
    for (let o = Math.max(oldEnd, firstYoungFile.baseOffset); o < s.maxOffset(T, 0); o++) {
      expect(
        seen.some((r) => r.offset === o),
        `offset ${o}`,
      ).toBe(true)
    }
    // And older duplicates were cleaned.
    expect(seen.filter((r) => r.offset < oldEnd).length).toBeLessThan(oldEnd)
  })

  it('cleans in several passes when the offset map is smaller than the dirty keys, and converges', async () => {
    // 16 slots → 14 usable keys; 40 distinct keys.
    const s = openService({ offsetMapBytes: 16 * 24 })
    const entries = manyUpdates(40, 4)
    put(s, entries)
    put(s, [['tail', 'x']]) // rolls nothing by itself; the active file stays uncleaned
    const reports = []
    for (let i = 0; i < 20; i++) {
      const r = await s.compact()
      if (r.queues.length === 0) break
      reports.push(r.queues[0])
    }
    expect(reports.length).toBeGreaterThan(2)
    expect(reports[0].mapFull).toBe(true)
    expect(reports.at(-1)!.mapFull).toBe(false)
    // A last pass over everything leaves one record per key below the active file.
    const seen = readAll(s, T, 0)
    const activeBase = s.logOf(T, 0)!.active()!.baseOffset
    const latest = latestByKey(entries)
    const latestCleaned = latestByKey(entries.slice(0, activeBase))
    const cleaned = seen.filter((r) => r.offset < activeBase)
    for (const r of cleaned) expect(latestCleaned.get(r.key)!.offset).toBe(r.offset)
    for (const [key, { offset, value }] of latest) expect(seen.find((r) => r.offset === offset)?.value, key).toBe(value)
  })

  it('drops keyless records in the cleaned range and counts them', async () => {
    const s = openService()
    put(s, manyUpdates(2, 30))
    const { request, bytes } = makeRecord(T, 0, s.maxOffset(T, 0), undefined, 'no key', clock.now())
    s.dispatch(request, bytes)
    // A keyless record is never added to the log, but its offset is used.
    expect(s.maxOffset(T, 0)).toBe(61)
    put(s, manyUpdates(2, 30))
    const report = await s.compact()
    expect(report.queues[0].invalidRecords).toBe(0)
    expect(readAll(s, T, 0).every((r) => r.key !== undefined)).toBe(true)
  })

  it('applies time and size retention to compact,delete queues, prefix only, never the active file alone', async () => {
    config.cleanupPolicy = 'compact,delete'
    config.retentionMs = 1000
    const s = openService()
    put(s, manyUpdates(10, 6))
    const log = s.logOf(T, 0)!
    const files = log.segments.length
    expect(files).toBeGreaterThan(2)
    clock.advance(2000)
    put(s, [['fresh', 'v']])
    s.applyRetention()
    // Every file older than retentionMs went; the active file (with the fresh record) stayed.
    expect(log.segments).toHaveLength(1)
    expect(readAll(s, T, 0).at(-1)!.key).toBe('fresh')
    expect(s.minOffset(T, 0)).toBe(log.active()!.firstOffset())
    expect(s.minOffset(T, 0)).toBeGreaterThan(0)
    // Once the active file too is past retention it is rolled first, then deleted.
    clock.advance(2000)
    s.applyRetention()
    expect(readAll(s, T, 0)).toEqual([])
    expect(s.minOffset(T, 0)).toBe(61)
    expect(s.maxOffset(T, 0)).toBe(61)
    // Size: keep at most ~one file of bytes.
    config.retentionMs = -1
    config.retentionBytes = 4096
    put(s, manyUpdates(10, 6))
    s.applyRetention()
    expect(log.sizeBytes()).toBeLessThanOrEqual(4096 + log.active()!.bytes)
    expect(log.segments.length).toBeGreaterThanOrEqual(1)
    expect(fs.readdirSync(log.dir).filter((n) => n.endsWith('.deleted'))).toEqual([])
  })

  it('rolls a quiet active file once segmentMs has passed, so it can be cleaned', async () => {
    config.segmentMs = 10_000
    const s = openService()
    put(s, [
      ['a', '1'],
      ['a', '2'],
      ['a', '3'],
    ])
    expect((await s.compact()).queues).toHaveLength(0)
    clock.advance(10_000)
    s.rollDue()
    const r = await s.compact()
    expect(r.queues).toHaveLength(1)
    expect(readAll(s, T, 0).map((x) => x.value)).toEqual(['3'])
  })
})

describe('swap recovery at open', () => {
  async function prepared(): Promise<{ s: CompactionService; qdir: string; names: string[] }> {
    const s = openService()
    put(s, manyUpdates(6, 12))
    const qdir = s.logOf(T, 0)!.dir
    return { s, qdir, names: fs.readdirSync(qdir).sort() }
  }

  it('deletes a .cleaned file and keeps the old files (crash before the swap)', async () => {
    const { s, qdir, names } = await prepared()
    const before = readAll(s, T, 0)
    await s.close()
    fs.copyFileSync(join(qdir, names[1]), join(qdir, `${names[0]}.cleaned`))
    const r = recoverInterruptedSwap(qdir)
    expect(r.removed).toEqual([`${names[0]}.cleaned`])
    expect(fs.readdirSync(qdir).sort()).toEqual(names)
    const s2 = openService()
    expect(readAll(s2, T, 0)).toEqual(before)
  })

  /** The queue's files before and after a pass, and which of the after-files the pass wrote. */
  async function beforeAndAfter(): Promise<{
    qdir: string
    before: Map<string, Buffer>
    after: Map<string, Buffer>
    cleaned: string[]
    seenBefore: unknown
    seenAfter: unknown
  }> {
    const { s, qdir } = await prepared()
    s.flush()
    const snapshot = (): Map<string, Buffer> => new Map(fs.readdirSync(qdir).map((n) => [n, fs.readFileSync(join(qdir, n))]))
    const seenBefore = readAll(s, T, 0)
    const before = snapshot()
    const report = await s.compact()
    const end = report.queues[0].endOffset
    s.flush()
    const seenAfter = readAll(s, T, 0)
    const after = snapshot()
    await s.close()
    services.splice(services.indexOf(s), 1)
    const cleaned = [...after.keys()].filter((n) => Number(n) < end).sort()
    expect(cleaned.length).toBeGreaterThan(1)
    return { qdir, before, after, cleaned, seenBefore, seenAfter }
  }

  function lay(qdir: string, files: [string, Buffer][]): void {
    for (const n of fs.readdirSync(qdir)) fs.rmSync(join(qdir, n))
    for (const [n, b] of files) fs.writeFileSync(join(qdir, n), b)
  }

  it('rolls a complete swap forward: the old files it covers go, each .swap takes its final name', async () => {
    const { qdir, before, after, cleaned, seenAfter } = await beforeAndAfter()
    // Crash after every .swap rename, before any old file was renamed .deleted.
    lay(qdir, [...before, ...cleaned.map((n): [string, Buffer] => [`${n}.swap`, after.get(n)!])])
    const s = openService()
    expect(readAll(s, T, 0)).toEqual(seenAfter)
    expect(fs.readdirSync(qdir).sort()).toEqual([...after.keys()].sort())
  })

  it('rolls back an unfinished set of swaps: .swap files at or above the lowest .cleaned go with it', async () => {
    const { qdir, before, after, cleaned, seenBefore } = await beforeAndAfter()
    // Swaps are renamed newest first: the newest is a .swap, the older ones are still .cleaned.
    const newest = cleaned.at(-1)!
    const files: [string, Buffer][] = [...before]
    for (const n of cleaned) files.push([n === newest ? `${n}.swap` : `${n}.cleaned`, after.get(n)!])
    lay(qdir, files)
    const s = openService()
    expect(readAll(s, T, 0)).toEqual(seenBefore)
    expect(fs.readdirSync(qdir).sort()).toEqual([...before.keys()].sort())
  })

  it('finishes a swap whose old files were partly renamed .deleted', async () => {
    const { qdir, before, after, cleaned, seenAfter } = await beforeAndAfter()
    const olds = [...before].filter(([n]) => Number(n) < Number(cleaned.at(-1)) + 1)
    const files: [string, Buffer][] = [...before].filter(([n]) => n !== olds[0][0])
    files.push([`${olds[0][0]}.deleted`, olds[0][1]])
    for (const n of cleaned) files.push([`${n}.swap`, after.get(n)!])
    lay(qdir, files)
    const s = openService()
    expect(readAll(s, T, 0)).toEqual(seenAfter)
  })
})

describe('offset map', () => {
  it('keeps the highest offset per key in fixed memory and reports itself full at the load factor', () => {
    const map = new OffsetMap(100 * 24)
    expect(map.slots).toBe(100)
    expect(map.usableFill).toBe(90)
    for (let i = 0; i < 90; i++) map.put(keyDigest(`k${i % 45}`), i)
    expect(map.size).toBe(45)
    expect(map.get(keyDigest('k3'))).toBe(48)
    expect(map.get(keyDigest('absent'))).toBe(-1)
    for (let i = 45; i < 90; i++) map.put(keyDigest(`k${i}`), 1000 + i)
    expect(map.isFull()).toBe(true)
    expect(() => map.put(keyDigest('one more'), 1)).toThrow(/full/)
    map.put(keyDigest('k0'), 5000) // an existing key still updates
    expect(map.get(keyDigest('k0'))).toBe(5000)
    map.clear()
    expect(map.size).toBe(0)
    expect(map.get(keyDigest('k0'))).toBe(-1)
  })
})

describe('cleaner checkpoint file', () => {
  it('round-trips the version / count / entries format and refuses malformed files', () => {
    const m = new Map([
      ['orders 0', 1834211],
      ['orders 1', 1790022],
    ])
    const text = formatCheckpoint(m)
    expect(text).toBe('0\n2\norders 0 1834211\norders 1 1790022\n')
    expect(parseCheckpoint(text)).toEqual(m)
    expect(parseCheckpoint('')).toEqual(new Map())
    expect(parseCheckpoint('0\n')).toEqual(new Map())
    expect(() => parseCheckpoint('1\n0\n')).toThrow(/version/)
    expect(() => parseCheckpoint('0\n2\norders 0 5\n')).toThrow(/2 entries/)
    expect(() => parseCheckpoint('0\n1\norders x 5\n')).toThrow(/bad checkpoint line/)
  })
})

describe('cleaner states', () => {
  it('walks InProgress / Aborted / Paused(n) as specified', async () => {
    const m = new CleanerManager(1000)
    const k = 't 0'
    expect(m.tryStart(k)).toBe(true)
    expect(m.tryStart(k)).toBe(false)
    let paused = false
    const waiting = m.abortAndPause(k).then(() => {
      paused = true
    })
    expect(m.state(k)).toEqual({ kind: 'Aborted' })
    expect(() => m.checkDone(k)).toThrow(/aborted/)
    await Promise.resolve()
    expect(paused).toBe(false)
    m.done(k)
    await waiting
    expect(paused).toBe(true)
    expect(m.state(k)).toEqual({ kind: 'Paused', count: 1 })
    await m.abortAndPause(k)
    expect(m.state(k)).toEqual({ kind: 'Paused', count: 2 })
    expect(m.tryStart(k)).toBe(false)
    m.resume(k)
    expect(m.state(k)).toEqual({ kind: 'Paused', count: 1 })
    m.resume(k)
    expect(m.state(k)).toBeUndefined()
    expect(() => m.resume(k)).toThrow(/not paused/)
    await m.abort(k)
    expect(m.state(k)).toBeUndefined()
  })

  it('backs off an uncleanable queue exponentially up to an hour, and retries on request', () => {
    const m = new CleanerManager(15_000)
    m.markUncleanable('t 0', new Error('boom'), 0, 10)
    expect(m.isUncleanable('t 0', 14_999)).toBe(true)
    expect(m.isUncleanable('t 0', 15_000)).toBe(false)
    m.markUncleanable('t 0', new Error('boom'), 0, 10)
    expect(m.uncleanable.get('t 0')!.retryAt).toBe(30_000)
    for (let i = 0; i < 20; i++) m.markUncleanable('t 0', new Error('boom'), 0, 10)
    expect(m.uncleanable.get('t 0')!.retryAt).toBe(3_600_000)
    m.retryUncleanable()
    expect(m.isUncleanable('t 0', 0)).toBe(false)
  })
})

describe('throttler', () => {
  it('waits when bytes go faster than the desired rate', async () => {
    const c = new ManualClock(0)
    const t = new Throttler(1000, c)
    c.advance(301)
    await t.maybeThrottle(1000) // 1000 bytes in 301 ms at 1000 B/s → wait ~699 ms
    expect(t.throttledMs).toBeCloseTo(699, 0)
    const free = new Throttler(Infinity, c)
    await free.maybeThrottle(1e9)
    expect(free.throttledMs).toBe(0)
  })
})

describe('segment grouping', () => {
  it('merges consecutive files up to segmentBytes, oldest first', () => {
    const seg = (base: number, bytes: number) => ({ baseOffset: base, bytes }) as never
    const groups = groupSegments([seg(0, 100), seg(10, 200), seg(20, 800), seg(30, 50), seg(40, 10), seg(50, 0)], 45, 1000)
    expect(groups.map((g) => g.map((s: { baseOffset: number }) => s.baseOffset))).toEqual([
      [0, 10],
      [20, 30, 40],
    ])
  })
})

describe('compaction against a model', () => {
  type Op =
    | { kind: 'put'; key: number; value: number }
    | { kind: 'delete'; key: number }
    | { kind: 'advance'; ms: number }
    | { kind: 'compact' }
    | { kind: 'roll' }
    | { kind: 'reopen' }
  const op: fc.Arbitrary<Op> = fc.oneof(
    { weight: 8, arbitrary: fc.record({ kind: fc.constant('put' as const), key: fc.nat(12), value: fc.nat(1000) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: fc.nat(12) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 20_000 }) }) },
    { weight: 2, arbitrary: fc.constant({ kind: 'compact' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'roll' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'reopen' as const }) },
  )

  it('folding the queue from its start always gives the model (a Map of key → last value)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 120 }), fc.integer({ min: 16, max: 64 }), async (ops, mapSlots) => {
        for (const s of services.splice(0)) await s.close()
        fs.rmSync(join(dir, 'compaction'), { recursive: true, force: true })
        config = {
          ...TOPIC_CONFIG_DEFAULTS,
          cleanupPolicy: 'compact',
          segmentBytes: 4096,
          minCleanableDirtyRatio: 0,
          deleteRetentionMs: 10_000,
          segmentMs: 30_000,
        }
        const options = { offsetMapBytes: mapSlots * 24 }
        let s = openService(options)
        const model = new Map<string, string>()
        const written = new Map<number, string | null>()
        const check = (): void => {
          const seen = readAll(s, T, 0)
          const folded = new Map<string, string>()
          let last = -1
          for (const r of seen) {
            expect(r.offset).toBeGreaterThan(last)
            last = r.offset
            // A survivor is exactly what was written at its offset.
            expect(r.tombstone ? null : r.value).toBe(written.get(r.offset))
            if (r.tombstone) folded.delete(r.key)
            else folded.set(r.key, r.value)
          }
          expect(folded).toEqual(model)
        }
        for (const o of ops) {
          if (o.kind === 'put' || o.kind === 'delete') {
            const key = `k${o.key}`
            const value = o.kind === 'put' ? `v${o.value}-${'p'.repeat(o.value % 200)}` : null
            const offset = s.maxOffset(T, 0)
            const { request, bytes } = makeRecord(T, 0, offset, key, value, clock.now())
            s.dispatch(request, bytes)
            written.set(offset, value)
            if (value === null) model.delete(key)
            else model.set(key, value)
          } else if (o.kind === 'advance') {
            clock.advance(o.ms)
          } else if (o.kind === 'compact') {
            await s.compact()
            check()
          } else if (o.kind === 'roll') {
            s.rollDue()
          } else {
            s = await reopenService(s, options)
            check()
          }
        }
        check()
      }),
      { numRuns: 40 },
    )
  })
})

describe('cleaner safety', () => {
  it('an error in one queue marks it uncleanable with a backoff, the others are cleaned, and a retry clears it', async () => {
    const s = openService()
    put(s, manyUpdates(5, 20), 0)
    for (const [key, value] of manyUpdates(5, 20)) {
      const offset = s.maxOffset(T, 1)
      const { request, bytes } = makeRecord(T, 1, offset, key, value, clock.now())
      s.dispatch(request, bytes)
    }
    // A directory where queue 0's first cleaned file must go: the pass cannot write it.
    const log0 = s.logOf(T, 0)!
    const blocker = join(log0.dir, `${formatOffsetName(0)}.cleaned`)
    fs.mkdirSync(blocker)
    const report = await s.compact()
    expect(report.failed.map((f) => f.queueId)).toEqual([0])
    expect(report.queues.map((q) => q.queueId)).toEqual([1])
    const stats = s.stats()
    expect(stats.uncleanableQueueCount).toBe(1)
    expect(stats.uncleanable[0]).toMatchObject({ topic: T, queueId: 0, failures: 1 })
    expect(stats.uncleanableBytes).toBeGreaterThan(0)
    // Automatic selection skips it while its backoff runs.
    expect(await s.tick()).toBe(false)
    fs.rmSync(blocker, { recursive: true })
    s.retryUncleanable(T)
    expect(s.stats().uncleanableQueueCount).toBe(0)
    expect(await s.tick()).toBe(true)
    expect(s.stats().lastPass).toMatchObject({ queueId: 0 })
  })

  it('aborting a running pass leaves no .cleaned file, no checkpoint move, and the queue paused until resumed', async () => {
    const s = openService({ ioMaxBytesPerSecond: 50_000, sliceMs: 0.01 })
    put(s, manyUpdates(8, 40))
    const log = s.logOf(T, 0)!
    const before = readAll(s, T, 0)
    const pass = s.compact()
    // Wait until the pass has started writing its first cleaned file.
    while (!fs.readdirSync(log.dir).some((n) => n.endsWith('.cleaned'))) await new Promise((r) => setImmediate(r))
    const key = `${T} 0`
    await s.manager.abortAndPause(key)
    expect(s.manager.state(key)).toEqual({ kind: 'Paused', count: 1 })
    const report = await pass
    expect(report.queues).toEqual([])
    expect(report.failed).toEqual([])
    expect(fs.readdirSync(log.dir).filter((n) => n.includes('.'))).toEqual([])
    expect(readAll(s, T, 0)).toEqual(before)
    // Paused: neither a manual nor an automatic pass touches it.
    expect((await s.compact()).queues).toEqual([])
    s.manager.resume(key)
    expect((await s.compact()).queues).toHaveLength(1)
  })
})

describe('mapped-file budget', () => {
  it('keeps at most maxMappedFiles sealed files mapped, maps them again on reads, and cleans through it', async () => {
    const s = openService({ maxMappedFiles: 2 })
    const entries = manyUpdates(10, 16)
    put(s, entries)
    const log = s.logOf(T, 0)!
    expect(log.segments.length).toBeGreaterThan(5)
    expect(s.stats().mappedFiles).toBe(0)
    const first = readAll(s, T, 0)
    expect(first).toHaveLength(entries.length)
    expect(s.stats().mappedFiles).toBeLessThanOrEqual(2)
    // A lease outlives the eviction of its file's mapping.
    const lease = log.segments[0].acquire()!
    readAll(s, T, 0)
    expect(lease.data.readInt32BE(0)).toBe(log.segments[0].sizeAt(0))
    lease.release()
    await s.compact()
    expect(s.stats().mappedFiles).toBeLessThanOrEqual(2)
    const latest = latestByKey(entries)
    const seen = readAll(s, T, 0)
    for (const [key, { offset, value }] of latest) expect(seen.find((r) => r.offset === offset)?.value, key).toBe(value)
  })
})
