// verify against open over a corpus of damaged stores built like the fuzz test's: a pristine store,
// then random bit flips and truncations of commit-log files, plus damage aimed at record headers
// (the fields the body CRC does not cover) and torn tails. For each damaged store, verify runs
// first (it changes nothing), then open under corruptionPolicy 'strict', then under 'tolerant':
//
//   - where verify says the valid data ends is where open's recovery ends (what it keeps);
//   - verify classifies the stopping record torn or corrupt exactly as recovery does, so 'strict'
//     refuses exactly when verify says corrupt;
//   - verify finds a commit-log problem exactly when open repairs (truncates) the commit log, and
//     when it finds no problem at all, open repairs nothing at all;
//   - a store open refuses for the shape of its files is one verify finds problems in.
//
// A second corpus damages every file type as the fuzz test does (consume queues, index, checkpoint,
// consumer offsets, commit log; half of the stores after a clean close): whenever verify finds
// nothing, open repairs nothing and does not refuse.
//
// The converse of the last point holds for the commit log only: a flip in a record's queue id,
// queue offset or properties passes every check a record has (RocketMQ's format covers only the
// body with a CRC), so open keeps the record, and verify finds it through the consume-queue unit or
// index entry that no longer matches it.
//
// Every store has the abort file: after a crash, open scans the log with CRC checks, which is the
// case where open looks at what verify looks at. (After a clean close open deliberately trusts the
// files without a scan, so damage left since is for verify alone to find.)
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { verifyStore, type VerifyReport } from '../lib/cli/verify/index.js'
import { MQStoreError } from '../lib/errors.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'

const FILE_SIZE = 16 * 1024
const OPTIONS: OpenOptions = {
  mappedFileSizeCommitLog: FILE_SIZE,
  mappedFileSizeConsumeQueue: 20 * 40,
  maxHashSlotNum: 16,
  maxIndexNum: 64,
}
const DIMS = { maxHashSlotNum: 16, maxIndexNum: 64 }
const ITERATIONS = Number(process.env.CORPUS_ITERATIONS ?? 120)

let root: string
let pristine: string
/** Commit-log offsets and sizes of the pristine store's records. */
const records: { offset: number; size: number }[] = []

beforeAll(async () => {
  root = tempDir('mqstore-corpus-')
  pristine = join(root, 'pristine')
  const store = await MessageStore.open(pristine, OPTIONS)
  for (let i = 0; i < 200; i++) {
    const r = await store.putMessage({
      topic: i % 2 ? 'a' : 'b',
      queueId: (i >> 1) % 2,
      body: Buffer.alloc(20 + (i % 9) * 30, i),
      tags: 't',
      keys: `k${i}`,
    })
    records.push({ offset: r.wroteOffset, size: r.wroteBytes })
  }
  await store.close()
  // The pristine store was written within a second, so an abnormal recovery starts at the first file.
  fs.writeFileSync(join(pristine, 'abort'), '')
})

afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true })
})

let seed = 0
function random(): number {
  // mulberry32: reproducible from the seed printed on failure
  seed = (seed + 0x6d2b79f5) >>> 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]

function flipBit(path: string, at: number): void {
  const fd = fs.openSync(path, 'r+')
  try {
    const byte = Buffer.alloc(1)
    fs.readSync(fd, byte, 0, 1, at)
    byte[0] ^= 1 << Math.floor(random() * 8)
    fs.writeSync(fd, byte, 0, 1, at)
  } finally {
    fs.closeSync(fd)
  }
}

function zeroRange(path: string, from: number, to: number): void {
  const fd = fs.openSync(path, 'r+')
  try {
    fs.writeSync(fd, Buffer.alloc(to - from), 0, to - from, from)
  } finally {
    fs.closeSync(fd)
  }
}

function segmentPath(dir: string, offset: number): { path: string; pos: number } {
  const start = offset - (offset % FILE_SIZE)
  return { path: join(dir, 'commitlog', String(start).padStart(20, '0')), pos: offset - start }
}

/** Header fields of a record, by offset: TOTALSIZE, MAGICCODE, BODYCRC, QUEUEOFFSET, PHYSICALOFFSET. */
const HEADER_FIELDS = [
  [0, 4],
  [4, 4],
  [8, 4],
  [20, 8],
  [28, 8],
] as const

/** Where the last record of the file starting at `start` ends, relative to the file. */
function lastRecordEnd(start: number): number {
  let end = 0
  for (const r of records) if (r.offset >= start && r.offset < start + FILE_SIZE) end = r.offset + r.size - start
  return end
}

/** Applies 1–4 damages to the commit log of `dir`; returns what was done, for failure messages. */
function damage(dir: string): string[] {
  const files = fs.readdirSync(join(dir, 'commitlog')).map((name) => join(dir, 'commitlog', name))
  const done: string[] = []
  const count = 1 + Math.floor(random() * random() * 4)
  for (let d = 0; d < count; d++) {
    const kind = random()
    if (kind < 0.15) {
      // Noise in space no record uses: after the end of the data, or behind a blank's header.
      const last = records[records.length - 1]
      const file = pick(files)
      const start = Number(file.slice(-20))
      const dataEnd = start + FILE_SIZE > last.offset + last.size ? last.offset + last.size - start : lastRecordEnd(start) + 8
      const at = dataEnd + Math.floor(random() * (FILE_SIZE - dataEnd))
      if (at < fs.statSync(file).size) flipBit(file, at)
      done.push(`flip unused ${file} @${at}`)
    } else if (kind < 0.22) {
      const file = pick(files)
      const size = Math.floor(random() * FILE_SIZE)
      fs.truncateSync(file, size)
      done.push(`truncate ${file} to ${size}`)
    } else if (kind < 0.45) {
      const file = pick(files)
      const at = Math.floor(random() * fs.statSync(file).size)
      if (at < fs.statSync(file).size) flipBit(file, at)
      done.push(`flip ${file} @${at}`)
    } else if (kind < 0.75) {
      const record = pick(records)
      const [field, width] = pick(HEADER_FIELDS)
      const { path, pos } = segmentPath(dir, record.offset)
      const at = pos + field + Math.floor(random() * width)
      if (at < fs.statSync(path).size) flipBit(path, at)
      done.push(`flip header field @${field} of the record at ${record.offset}`)
    } else {
      // A torn append: the last records lose their tails (the writer puts the magic code last, but
      // the page cache may reach the disk in any order).
      const last = records[records.length - 1]
      const record = records[records.length - 1 - Math.floor(random() * 3)]
      const { path, pos } = segmentPath(dir, record.offset)
      const from = pos + 8 + Math.floor(random() * (record.size - 8))
      const to = pos + (last.offset - record.offset) + last.size
      if (from < fs.statSync(path).size) zeroRange(path, from, Math.min(fs.statSync(path).size, to))
      done.push(`tear the log from ${record.offset + from - pos}`)
    }
  }
  return done
}

type Outcome = { refused: string } | { opened: ReturnType<MessageStore['stats']>; scannedFromFirstFile: boolean }

async function open(dir: string, corruptionPolicy: 'strict' | 'tolerant'): Promise<Outcome> {
  let scanTotal = -1
  let store: MessageStore
  try {
    store = await MessageStore.open(dir, {
      ...OPTIONS,
      corruptionPolicy,
      onProgress: (p) => {
        scanTotal = Math.max(scanTotal, p.totalBytes)
      },
    })
  } catch (error) {
    if (!(error instanceof MQStoreError)) throw error
    return { refused: error.code }
  }
  try {
    const files = fs.readdirSync(join(dir, 'commitlog')).length
    return { opened: store.stats(), scannedFromFirstFile: scanTotal >= files * FILE_SIZE }
  } finally {
    await store.close()
  }
}

function truncatedTheLog(stats: ReturnType<MessageStore['stats']>): boolean {
  return stats.repairs.some((r) => r.action.startsWith('truncated the commit log'))
}

describe('verify agrees with open', () => {
  it(`over ${ITERATIONS} damaged stores: where data ends, torn or corrupt, and whether anything is repaired`, async () => {
    const startSeed = process.env.CORPUS_SEED !== undefined ? Number(process.env.CORPUS_SEED) : Math.floor(Math.random() * 2 ** 31)
    seed = startSeed
    const seen = { clean: 0, torn: 0, corrupt: 0, refusedShape: 0, laterStart: 0 }
    for (let i = 0; i < ITERATIONS; i++) {
      const dir = join(root, `it-${i}`)
      fs.cpSync(pristine, dir, { recursive: true })
      const done = damage(dir)
      const context = `seed ${startSeed}, iteration ${i}: ${done.join('; ')}`
      const report: VerifyReport = await verifyStore(dir, DIMS)
      const damageKind = report.commitLog.damage?.kind ?? null

      const strict = await open(dir, 'strict')
      if ('refused' in strict && strict.refused !== 'CORRUPTION') {
        // The files' shape (a truncated segment): open refuses under every policy.
        expect(strict.refused, context).toBe('BAD_FILE_SIZE')
        expect(
          report.commitLog.problems.some((p) => /wrong size/.test(p.reason)),
          context,
        ).toBe(true)
        expect(report.ok, context).toBe(false)
        seen.refusedShape++
        fs.rmSync(dir, { recursive: true, force: true })
        continue
      }
      // A strict open that succeeded has done what a tolerant one does (and closed the store cleanly).
      const opened = 'refused' in strict ? await open(dir, 'tolerant') : strict
      if ('refused' in opened) throw new Error(`${context}: tolerant open refused with ${opened.refused}`)
      const stats = opened.opened
      if (!opened.scannedFromFirstFile) {
        // A damaged store timestamp made a later file's first record look older than the
        // checkpoint: recovery started there and did not look at the files before (RocketMQ's
        // rule for where an abnormal recovery starts; verify always walks every file).
        seen.laterStart++
        fs.rmSync(dir, { recursive: true, force: true })
        continue
      }
      expect('refused' in strict, `${context}: strict refuses exactly when verify says corrupt`).toBe(damageKind === 'corrupt')
      expect(stats.recovery?.processOffset, `${context}: where the data ends`).toBe(report.commitLog.validEnd)
      expect(stats.recovery?.damage?.kind ?? null, `${context}: torn or corrupt`).toBe(damageKind)
      expect(stats.recovery?.damage?.offset, `${context}: the record that stops the scan`).toBe(report.commitLog.damage?.offset)
      expect(truncatedTheLog(stats), `${context}: a commit-log problem exactly when open truncates`).toBe(
        report.commitLog.problems.length > 0,
      )
      // The whole report: when verify finds nothing anywhere, open repairs nothing anywhere.
      expect(report.ok ? stats.repairs : [], `${context}: repairs of a store verify found clean`).toEqual([])
      seen[damageKind ?? 'clean']++
      fs.rmSync(dir, { recursive: true, force: true })
    }
    // The corpus exercises every outcome.
    expect(seen.clean, JSON.stringify(seen)).toBeGreaterThan(0)
    expect(seen.torn, JSON.stringify(seen)).toBeGreaterThan(0)
    expect(seen.corrupt, JSON.stringify(seen)).toBeGreaterThan(0)
    expect(seen.refusedShape, JSON.stringify(seen)).toBeGreaterThan(0)
    expect(seen.laterStart, JSON.stringify(seen)).toBeLessThan(ITERATIONS / 4)
  }, 240_000)

  it(`over ${ITERATIONS} stores damaged like the fuzz test's (every file type, half after a crash): when verify finds nothing, open repairs nothing`, async () => {
    const startSeed = process.env.CORPUS_SEED !== undefined ? Number(process.env.CORPUS_SEED) : Math.floor(Math.random() * 2 ** 31)
    seed = startSeed
    let clean = 0
    for (let i = 0; i < ITERATIONS; i++) {
      const dir = join(root, `any-${i}`)
      fs.cpSync(pristine, dir, { recursive: true })
      if (random() < 0.5) fs.rmSync(join(dir, 'abort'))
      const files = (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as fs.Dirent[])
        .filter((e) => e.isFile() && e.name !== 'lock' && e.name !== 'abort')
        .map((e) => join(e.parentPath, e.name))
      const done: string[] = []
      // The first store is a control: a flip in the checkpoint's unused bytes, which neither verify
      // nor open may call damage (so the corpus always has a clean case to check both agree on).
      if (i === 0) {
        flipBit(join(dir, 'checkpoint'), 2048)
        done.push('flip /checkpoint @2048 (unused bytes)')
      }
      for (let d = i === 0 ? 0 : 1 + Math.floor(random() * 8); d > 0; d--) {
        const file = pick(files)
        if (!fs.existsSync(file)) continue
        const size = fs.statSync(file).size
        if (random() < 0.15) {
          const to = Math.floor(random() * size)
          fs.truncateSync(file, to)
          done.push(`truncate ${file.slice(dir.length)} to ${to}`)
        } else if (size > 0) {
          const at = Math.floor(random() * size)
          flipBit(file, at)
          done.push(`flip ${file.slice(dir.length)} @${at}`)
        }
      }
      const context = `seed ${startSeed}, iteration ${i}: ${done.join('; ')}`
      const report = await verifyStore(dir, DIMS)
      let repairs: string[]
      try {
        const store = await MessageStore.open(dir, OPTIONS)
        repairs = store.stats().repairs.map((r) => `${r.action}: ${r.reason}`)
        await store.close()
      } catch (error) {
        if (!(error instanceof MQStoreError)) throw error
        repairs = [`refused to open: ${error.code}`]
      }
      if (report.ok) {
        clean++
        expect(repairs, context).toEqual([])
      }
      fs.rmSync(dir, { recursive: true, force: true })
    }
    // Some damage lands where it changes nothing (unused space, a consumer offset): both agree.
    expect(clean).toBeGreaterThan(0)
  }, 240_000)
})
