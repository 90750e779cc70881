// The limits every row of the benchmark is read against, measured in a child process of their
// own in the same run as the engines:
// - the JS encode limit: the bench's message (256 B body, topic BenchTopic<n>, KEYS property
//   k<i>) encoded as a RocketMQ 4.9 commit-log record into a pre-faulted Buffer with DataView and
//   byte writes, as fast as plain JavaScript does it: what a put can reach if it does nothing else;
// - the put loop's limit: the put phase's own loop (messages built, handed over a batch at a time,
//   each batch awaited and its results checked) with an engine that does nothing but encode each
//   record as the JS encode limit does and answer it with a result object: what the put phase
//   measures for a store whose put is the encode alone; and the same loop with an engine that
//   does, in one pass per message, the work a put cannot leave out (the record, its body CRC, its
//   queue unit, its key's index entry and hash slot, its result): what the put phase measures for
//   a store whose put is that work with nothing around it; and that engine once more as the put
//   phase meets it (first-pass.ts): a fresh process's first pass of the put phase's count, after
//   the same warm-up, into memory no pass wrote before, pre-faulted, and again into memory new to
//   the process that a thread of its own faults in ahead of the writer, as a store's new pages are;
// - the memcpy limit: records of the same size copied into a pre-faulted Buffer: what a read that
//   copies what it serves can reach; and the same copies from where one queue's records lie in a
//   shared log (one in TOPICS x QUEUES, over a log as large as the put phase's), which is what a
//   scan of one queue reads: each record on a page of its own, so a cache and TLB miss each;
// - the cost of a page fault: the first write to each page of fresh memory. Every engine's JS
//   thread takes them while the heap it allocates from grows (the bench counts them per phase);
//   in a virtual machine one costs many times what it costs on bare metal;
// - the durable write of one group: SYNC_PRODUCERS records appended to a preallocated file with
//   one pwrite, then fdatasync, on the file system the stores live on. A durable put that syncs
//   once per group of waiting producers can at most make one group durable per that time;
// - the cost of one ArrayBuffer of a value's size, allocated in a loop that leaves garbage behind,
//   with V8's concurrent array-buffer sweeping (the default: their memory is freed on a helper
//   thread, whose frees meet the JS thread's mallocs on the allocator's lock) and without it
//   (--no-concurrent-array-buffer-sweeping: freed on the JS thread in the garbage collector's
//   pause). A read that hands out buffers of their own pays it per buffer: lmdb's getRange one per
//   value, mqstore's getMessage one per read of 32;
// - the lookup-touch limit: a lookup's dependent memory touches (hash slot, index entry, record
//   head, record properties) in regions of the put phase's store's sizes, and the body's private
//   copy, and nothing else: what a lookup of a random key can reach.
//
//   node dist/bench/limits.js            # prints the figures as JSON
import * as fs from 'node:fs'
import * as os from 'node:os'
import { join } from 'node:path'
import * as v8 from 'node:v8'
import { fileURLToPath } from 'node:url'

import { native } from '../lib/native.js'
import { firstPassWorkRates } from './first-pass-runs.js'
import {
  END_PHY_OFFSET_OFFSET,
  END_TIMESTAMP_OFFSET,
  ENTRY_KEY_HASH_OFFSET,
  ENTRY_PHY_OFFSET_OFFSET,
  ENTRY_PREV_INDEX_OFFSET,
  ENTRY_TIME_DIFF_OFFSET,
  HASH_SLOT_COUNT_OFFSET,
  hashSlotPosition,
  INDEX_COUNT_OFFSET,
  indexEntryPosition,
  indexFileSize,
  INVALID_INDEX,
  topicKeyHash,
} from '../lib/store/index/index-layout.js'
import {
  BODY_SIZE,
  type BenchMessage,
  makeBodies,
  median,
  putInBatches,
  QUEUES,
  queueOffsetOf,
  SYNC_PRODUCERS,
  TOPICS,
} from './workload.js'

/** Bytes of a record before its body: RocketMQ 4.9's fixed fields with IPv4 hosts. */
export const RECORD_HEAD_BYTES = 88
const MAGIC_V1 = -626843481 // 0xDAA320A7
const TOPIC_BYTES = Array.from({ length: TOPICS }, (_, t) => Buffer.from(`BenchTopic${t}`, 'latin1'))
/** 'KEYS' \u0001 'k': the key's digits follow (no separator after the last property, as mqstore writes it). */
const KEYS_PREFIX = Buffer.from('KEYS\u0001k', 'latin1')
const HOST = [127, 0, 0, 1]
const PORT = 10911

/** Records (and so bodies) kept in a ring the encoders cycle through. */
const RING = 1024
/** Bytes of the pre-faulted target. */
const TARGET_BYTES = 64 * 1024 * 1024
/** Records per timed pass, passes per figure (after one untimed pass); the median pass counts. */
const PASS_RECORDS = 400_000
const PASSES = 5
/** Fresh regions written one byte a page for the page-fault figure, and their size. */
const FAULT_PASSES = 3
const FAULT_REGION_BYTES = 64 * 1024 * 1024
const PAGE_BYTES = 4096
/** Group syncs timed for the durable-write figure (after one untimed), and the file they append to. */
const SYNC_ROUNDS = 40
const SYNC_FILE_BYTES = 64 * 1024 * 1024

export interface LimitsResult {
  /** Bytes of the bench's record (message 1,000,000's key length). */
  recordBytes: number
  /** Records encoded per second by plain JavaScript (median pass). */
  jsEncode: number
  /** Messages per second of the put phase's loop with an engine that only encodes (median pass; see putLoopEncodeRuns). */
  putLoopEncode?: number
  /** Messages per second of the put phase's loop with an engine that does the put's own work (median pass; see putLoopWorkRates). */
  putLoopWork?: number
  /** The same engine's first pass in a process of its own, as the put phase meets it (median of FIRST_PASS_RUNS; see first-pass.ts). */
  putLoopWorkFirstPass?: number
  /** That first pass with its regions new to the process, faulted in ahead of it by a thread of its own (first-pass.ts 'ahead'). */
  putLoopWorkFirstPassAhead?: number
  /** Records of recordBytes copied per second (median pass of the fastest of copyWithin, Buffer.copy, set). */
  memcpy: number
  /** Records/s copied from one queue's places in a shared log (median pass; see scatteredCopyRate). */
  scatteredCopy?: number
  /** Microseconds of the first write to a page of fresh memory (median of FAULT_PASSES regions). */
  pageFaultUs?: number
  /** Milliseconds to make one group of SYNC_PRODUCERS records durable (pwrite + fdatasync; median of SYNC_ROUNDS). */
  groupSyncMs?: number
  /** Lookups/s of a lookup's dependent memory touches and its private copy alone (median pass; see lookupTouchRates). */
  lookupTouches?: number
  /** The same touches without the private copy (see lookupTouchRates). */
  lookupTouchesOnly?: number
  /** p99 microseconds of one private copy of a body (its own ArrayBuffer), each timed alone (see privateCopyP99Micros). */
  privateCopyP99Us?: number
  /** Nanoseconds per ArrayBuffer of a body's size with V8's concurrent array-buffer sweeping, and without it (see arrayBufferNanos). */
  arrayBufferNs?: number
  arrayBufferUnsweptNs?: number
  /** Each pass, records/s. */
  jsEncodeRuns: number[]
  /** Each pass of the put loop with the encode-only engine, messages/s. */
  putLoopEncodeRuns?: number[]
  /** Each pass of the put loop with the work engine, messages/s. */
  putLoopWorkRuns?: number[]
  /** Each first-pass process of the work engine, messages/s. */
  putLoopWorkFirstPassRuns?: number[]
  /** Each first-pass process over new memory faulted in ahead. */
  putLoopWorkFirstPassAheadRuns?: number[]
  memcpyRuns: number[]
}

function decimalDigits(value: number): number {
  let digits = 1
  for (let v = value; v >= 10; v = (v / 10) | 0) digits++
  return digits
}

/** The record's length for message `i`. */
export function recordLength(i: number): number {
  const props = KEYS_PREFIX.length + decimalDigits(i)
  return RECORD_HEAD_BYTES + BODY_SIZE + 1 + TOPIC_BYTES[i % TOPICS].length + 2 + props
}

function setInt64(view: DataView, at: number, value: number): void {
  view.setUint32(at, Math.floor(value / 0x1_0000_0000))
  view.setUint32(at + 4, value >>> 0)
}

/**
 * Encodes message `i` at `at` of `target` (viewed by `view`) and returns its length. The body CRC
 * is written from `bodyCrc` (computing it is the store's native work, not the encode's), so this
 * is the JavaScript part of a put: fields, body copy, topic and property bytes.
 */
export function encodeRecord(
  target: Uint8Array,
  view: DataView,
  at: number,
  i: number,
  body: Uint8Array,
  bodyCrc: number,
  physicalOffset: number,
  now: number,
): number {
  const topic = TOPIC_BYTES[i % TOPICS]
  const digits = decimalDigits(i)
  const propsLength = KEYS_PREFIX.length + digits
  const total = RECORD_HEAD_BYTES + body.length + 1 + topic.length + 2 + propsLength
  view.setInt32(at, total)
  view.setInt32(at + 4, MAGIC_V1)
  view.setInt32(at + 8, bodyCrc)
  view.setInt32(at + 12, Math.floor(i / TOPICS) % QUEUES)
  view.setInt32(at + 16, 0)
  setInt64(view, at + 20, Math.floor(i / (TOPICS * QUEUES)))
  setInt64(view, at + 28, physicalOffset)
  view.setInt32(at + 36, 0)
  setInt64(view, at + 40, now)
  for (let k = 0; k < 4; k++) target[at + 48 + k] = HOST[k]
  view.setInt32(at + 52, PORT)
  setInt64(view, at + 56, now)
  for (let k = 0; k < 4; k++) target[at + 64 + k] = HOST[k]
  view.setInt32(at + 68, PORT)
  view.setInt32(at + 72, 0)
  setInt64(view, at + 76, 0)
  view.setInt32(at + 84, body.length)
  target.set(body, at + RECORD_HEAD_BYTES)
  let p = at + RECORD_HEAD_BYTES + body.length
  target[p++] = topic.length
  for (let k = 0; k < topic.length; k++) target[p++] = topic[k]
  view.setInt16(p, propsLength)
  p += 2
  for (let k = 0; k < KEYS_PREFIX.length; k++) target[p++] = KEYS_PREFIX[k]
  for (let d = digits - 1, v = i; d >= 0; d--, v = (v / 10) | 0) target[p + d] = 48 + (v % 10)
  return total
}

/** A Buffer whose every page has been written, so that no pass takes first-touch faults. */
export function prefaulted(bytes: number): Buffer {
  return Buffer.allocUnsafe(bytes).fill(1)
}

/** Records per second of each of PASSES timed passes of `records` records, after one untimed. */
function timePasses(pass: () => void, records = PASS_RECORDS): number[] {
  pass()
  const rates: number[] = []
  for (let k = 0; k < PASSES; k++) {
    const t0 = process.hrtime.bigint()
    pass()
    rates.push(records / (Number(process.hrtime.bigint() - t0) / 1e9))
  }
  return rates
}

/** Messages per pass of the put loop with the encode-only engine: the put phase's default count. */
export const PUT_LOOP_MESSAGES = 400_000

/** The put loop's engine: each message encoded into `target` (round and round), a result object each. */
function encodeOnlyEngine(target: Buffer, view: DataView): (batch: BenchMessage[]) => Promise<{ status: string }[]> {
  const limit = target.length - 4096
  let at = 0
  let physical = 0
  // Messages arrive in order, numbered from 0 by the loop: the number names the topic and key.
  let next = 0
  return async (batch) => {
    const now = Date.now()
    const results: { status: string; wroteOffset: number; wroteBytes: number }[] = new Array(batch.length)
    for (let j = 0; j < batch.length; j++) {
      if (at > limit) at = 0
      const length = encodeRecord(target, view, at, next++, batch[j].body, 0x1234567, physical, now)
      results[j] = { status: 'PUT_OK', wroteOffset: physical, wroteBytes: length }
      at += length
      physical += length
    }
    return results
  }
}

/** Messages/s of each of PASSES timed passes of the put loop with the encode-only engine, after one untimed. */
export async function putLoopEncodeRates(target: Buffer, messages = PUT_LOOP_MESSAGES): Promise<number[]> {
  const view = new DataView(target.buffer, target.byteOffset, target.byteLength)
  await putInBatches(messages, encodeOnlyEngine(target, view))
  const rates: number[] = []
  for (let k = 0; k < PASSES; k++) {
    const t0 = process.hrtime.bigint()
    await putInBatches(messages, encodeOnlyEngine(target, view))
    rates.push(messages / (Number(process.hrtime.bigint() - t0) / 1e9))
  }
  return rates
}

/** Records whose body CRCs the work engine computes in one native call, as the put's slices. */
export const WORK_SLICE = 64
/** The work engine's index: the sizes of the bench store's index file (the embedded defaults). */
const WORK_INDEX_SLOTS = 1_000_000
const WORK_INDEX_ENTRIES = 4_000_000
/** Bytes of a consume-queue unit: commit-log offset, size, tags code. */
const UNIT_BYTES = 20

/** The pre-faulted regions the work engine writes into, besides the log it shares with the encode. */
export interface WorkRegions {
  /** One region of units per queue (TOPICS x QUEUES), written round and round. */
  units: DataView[]
  /** An index file's bytes: header, `slots` hash slots, `entries` entries. */
  index: DataView
  slots: number
  entries: number
}

/**
 * Regions for the work engine: `unitsPerQueue` units per queue and an index of the given size, each
 * from `memory` (default: pre-faulted Buffers).
 */
export function workRegions(
  unitsPerQueue: number,
  slots = WORK_INDEX_SLOTS,
  entries = WORK_INDEX_ENTRIES,
  memory: (bytes: number) => Uint8Array = prefaulted,
): WorkRegions {
  const view = (bytes: number) => {
    const b = memory(bytes)
    return new DataView(b.buffer, b.byteOffset, b.byteLength)
  }
  const units = Array.from({ length: TOPICS * QUEUES }, () => view(unitsPerQueue * UNIT_BYTES))
  return { units, index: view(indexFileSize(slots, entries)), slots, entries }
}

/**
 * The put loop's engine that does a put's own work, in one pass per message and nothing around it:
 * the record encoded as the JS encode limit does; the bodies' CRCs of each slice of WORK_SLICE
 * records computed in one native call and written into their records; a unit in the message's
 * queue; the key's entry in the index, its hash slot read (for the chain) and written, and the
 * index header's count and ends written, as mqstore writes them per key; and a result object.
 */
export function workEngine(target: Buffer, view: DataView, regions: WorkRegions): (batch: BenchMessage[]) => Promise<{ status: string }[]> {
  const limit = target.length - 4096
  const { index, slots, entries } = regions
  const unitsPerQueue = regions.units[0].byteLength / UNIT_BYTES
  const ranges = new Int32Array(2 * WORK_SLICE)
  const crcs = new Int32Array(WORK_SLICE)
  const starts = new Int32Array(WORK_SLICE)
  let at = 0
  let physical = 0
  let count = 1
  let slotsUsed = 0
  let next = 0
  return async (batch) => {
    const now = Date.now()
    const results: { status: string; wroteOffset: number; wroteBytes: number; queueOffset: number; storeTimestamp: number }[] = new Array(
      batch.length,
    )
    for (let from = 0; from < batch.length; from += WORK_SLICE) {
      const to = Math.min(batch.length, from + WORK_SLICE)
      for (let j = from; j < to; j++) {
        const i = next++
        const message = batch[j]
        if (at > limit) at = 0
        const length = encodeRecord(target, view, at, i, message.body, 0, physical, now)
        const k = j - from
        starts[k] = at
        ranges[2 * k] = at + RECORD_HEAD_BYTES
        ranges[2 * k + 1] = message.body.length
        // The queue unit.
        const queueOffset = queueOffsetOf(i)
        const units = regions.units[(i % TOPICS) * QUEUES + message.queueId]
        const u = (queueOffset % unitsPerQueue) * UNIT_BYTES
        units.setUint32(u, Math.floor(physical / 0x1_0000_0000))
        units.setUint32(u + 4, physical >>> 0)
        units.setInt32(u + 8, length)
        units.setUint32(u + 12, 0)
        units.setUint32(u + 16, 0)
        // The key's entry, chained to the slot's last one, and the header's count and ends.
        if (count >= entries) count = 1
        const hash = topicKeyHash(message.topic, message.keys)
        const slot = hashSlotPosition(hash, slots)
        let prev = index.getInt32(slot)
        if (prev <= INVALID_INDEX || prev > count) prev = INVALID_INDEX
        const entry = indexEntryPosition(count, slots)
        index.setInt32(entry + ENTRY_KEY_HASH_OFFSET, hash)
        index.setUint32(entry + ENTRY_PHY_OFFSET_OFFSET, Math.floor(physical / 0x1_0000_0000))
        index.setUint32(entry + ENTRY_PHY_OFFSET_OFFSET + 4, physical >>> 0)
        index.setInt32(entry + ENTRY_TIME_DIFF_OFFSET, 0)
        index.setInt32(entry + ENTRY_PREV_INDEX_OFFSET, prev)
        index.setInt32(slot, count)
        if (prev === INVALID_INDEX) index.setInt32(HASH_SLOT_COUNT_OFFSET, ++slotsUsed)
        count++
        index.setInt32(INDEX_COUNT_OFFSET, count)
        index.setUint32(END_PHY_OFFSET_OFFSET, Math.floor(physical / 0x1_0000_0000))
        index.setUint32(END_PHY_OFFSET_OFFSET + 4, physical >>> 0)
        index.setUint32(END_TIMESTAMP_OFFSET, Math.floor(now / 0x1_0000_0000))
        index.setUint32(END_TIMESTAMP_OFFSET + 4, now >>> 0)
        results[j] = { status: 'PUT_OK', wroteOffset: physical, wroteBytes: length, queueOffset, storeTimestamp: now }
        at += length
        physical += length
      }
      native.crc32Ranges(target, ranges, to - from, crcs)
      for (let k = 0; k < to - from; k++) view.setInt32(starts[k] + 8, crcs[k] & 0x7fffffff)
    }
    return results
  }
}

/** Messages/s of each of PASSES timed passes of the put loop with the work engine, after one untimed. */
export async function putLoopWorkRates(target: Buffer, regions: WorkRegions, messages = PUT_LOOP_MESSAGES): Promise<number[]> {
  const view = new DataView(target.buffer, target.byteOffset, target.byteLength)
  await putInBatches(messages, workEngine(target, view, regions))
  const rates: number[] = []
  for (let k = 0; k < PASSES; k++) {
    const t0 = process.hrtime.bigint()
    await putInBatches(messages, workEngine(target, view, regions))
    rates.push(messages / (Number(process.hrtime.bigint() - t0) / 1e9))
  }
  return rates
}

export async function measureLimits(): Promise<LimitsResult> {
  const target = prefaulted(TARGET_BYTES)
  const view = new DataView(target.buffer, target.byteOffset, target.byteLength)
  const bodies = makeBodies(0, RING)
  const now = Date.now()
  // Message numbers around 1,000,000 (7-digit keys), as in the put phase of a large run.
  const first = 1_000_000
  const recordBytes = recordLength(first)
  const limit = TARGET_BYTES - 2 * recordBytes
  let physical = 0
  const jsEncodeRuns = timePasses(() => {
    let at = 0
    for (let n = 0; n < PASS_RECORDS; n++) {
      if (at > limit) at = 0
      at += encodeRecord(target, view, at, first + n, bodies[n % RING], 0x1234567, physical, now)
    }
    physical += at
  })

  // The copy source: a ring of encoded records at the start of the same ArrayBuffer, so that
  // copyWithin (a memmove without a view allocated per record) can be timed too.
  const ringBytes = RING * recordBytes
  for (let k = 0; k < RING; k++) encodeRecord(target, view, k * recordBytes, first + k, bodies[k], 0, k * recordBytes, now)
  const source = Buffer.from(target.subarray(0, ringBytes))
  const copyPass = (copy: (from: number, at: number) => void) => () => {
    let at = ringBytes
    for (let n = 0; n < PASS_RECORDS; n++) {
      if (at > limit) at = ringBytes
      copy((n % RING) * recordBytes, at)
      at += recordBytes
    }
  }
  const variants = [
    timePasses(copyPass((from, at) => target.copyWithin(at, from, from + recordBytes))),
    timePasses(copyPass((from, at) => source.copy(target, at, from, from + recordBytes))),
    timePasses(copyPass((from, at) => target.set(source.subarray(from, from + recordBytes), at))),
  ]
  const memcpyRuns = variants.reduce((best, runs) => (median(runs) > median(best) ? runs : best))
  const putLoopEncodeRuns = await putLoopEncodeRates(target)
  const putLoopWorkRuns = await putLoopWorkRates(target, workRegions(Math.ceil(PUT_LOOP_MESSAGES / (TOPICS * QUEUES))))
  const putLoopWorkFirstPassRuns = await firstPassWorkRates(PUT_LOOP_MESSAGES)
  const putLoopWorkFirstPassAheadRuns = await firstPassWorkRates(PUT_LOOP_MESSAGES, undefined, undefined, 'ahead')
  return {
    recordBytes,
    jsEncode: median(jsEncodeRuns),
    putLoopEncode: median(putLoopEncodeRuns),
    putLoopWork: median(putLoopWorkRuns),
    putLoopWorkFirstPass: median(putLoopWorkFirstPassRuns),
    putLoopWorkFirstPassAhead: median(putLoopWorkFirstPassAheadRuns),
    memcpy: median(memcpyRuns),
    scatteredCopy: scatteredCopyRate(recordBytes),
    pageFaultUs: pageFaultMicros(),
    groupSyncMs: groupSyncMillis(target.subarray(0, SYNC_PRODUCERS * recordBytes)),
    privateCopyP99Us: privateCopyP99Micros(source),
    ...lookupTouchRates(recordBytes),
    ...arrayBufferNanos(),
    jsEncodeRuns,
    putLoopEncodeRuns,
    putLoopWorkRuns,
    putLoopWorkFirstPassRuns,
    putLoopWorkFirstPassAheadRuns,
    memcpyRuns,
  }
}

/**
 * The first write to each page of a fresh region (allocUnsafeSlow of this size is its own mmap,
 * never touched before), in microseconds per page.
 */
function pageFaultMicros(): number {
  const runs: number[] = []
  for (let k = 0; k < FAULT_PASSES; k++) {
    const region = Buffer.allocUnsafeSlow(FAULT_REGION_BYTES)
    const t0 = process.hrtime.bigint()
    for (let at = 0; at < FAULT_REGION_BYTES; at += PAGE_BYTES) region[at] = 1
    runs.push(Number(process.hrtime.bigint() - t0) / 1000 / (FAULT_REGION_BYTES / PAGE_BYTES))
  }
  return median(runs)
}

/** Records in the scattered-copy figure's log: the bench's default put phase. */
const LOG_RECORDS = 400_000

/**
 * Records copied per second from where one queue's records lie in the bench's log: every
 * (TOPICS x QUEUES)th record of a pre-faulted log of LOG_RECORDS records, in order, into a
 * pre-faulted target, as a scan of one queue copies them (median of PASSES passes after one).
 * Records of one queue are a page apart, so each copy starts with a cache and a TLB miss: the
 * bound of a scan over a shared log, where a store that keeps a queue's records together (a
 * B-tree keyed by queue) reads them from consecutive memory.
 */
function scatteredCopyRate(recordBytes: number): number {
  const stride = TOPICS * QUEUES
  const log = prefaulted(LOG_RECORDS * recordBytes)
  const count = Math.floor(LOG_RECORDS / stride)
  const target = prefaulted(count * recordBytes)
  const pass = () => {
    for (let k = 0; k < count; k++) {
      const from = k * stride * recordBytes
      log.copy(target, k * recordBytes, from, from + recordBytes)
    }
  }
  return median(timePasses(pass, count))
}

/** Hash slots of the bench's index files (bench/mqstore.ts: the embedded defaults). */
const INDEX_SLOTS = 1_000_000
/** Index entry and slot sizes, and where an entry's commit-log offset lies (RocketMQ's index file). */
const INDEX_ENTRY_BYTES = 20
const SLOT_BYTES = 4
const ENTRY_PHY_OFFSET = 4
/** Lookups per pass of the lookup-touch figure. */
const TOUCH_LOOKUPS = 100_000

/**
 * Lookups per second if a lookup were nothing but its memory touches and its private copy: a
 * hash slot, the index entry it names, the record the entry points at (its head, then its
 * properties after the body), each read depending on the one before, then the body copied into a
 * buffer of its own. In pre-faulted regions sized as the put phase's store (INDEX_SLOTS slots,
 * an entry per record, LOG_RECORDS records), each touch lands on a page of its own: a cache and
 * a TLB miss each, as in a lookup of a random key. Each lookup's slot depends on what the one
 * before read, so lookups do not overlap (nor do the bench's, timed one by one). Median pass,
 * with the copy (`lookupTouches`) and without it (`lookupTouchesOnly`): the two apart show how
 * much of the figure is the copy's buffer rather than the touches. The loop touches little else,
 * so its misses find the upper levels of the page tables cached; a store's lookup, with its own
 * work between two of them, may pay more per touch.
 */
function lookupTouchRates(recordBytes: number): { lookupTouches: number; lookupTouchesOnly: number } {
  const slots = prefaulted(INDEX_SLOTS * SLOT_BYTES)
  const entries = prefaulted(LOG_RECORDS * INDEX_ENTRY_BYTES)
  const log = prefaulted(LOG_RECORDS * recordBytes)
  const slotView = new DataView(slots.buffer, slots.byteOffset, slots.byteLength)
  const entryView = new DataView(entries.buffer, entries.byteOffset, entries.byteLength)
  const logView = new DataView(log.buffer, log.byteOffset, log.byteLength)
  // Slot s names entry (s * a large odd number) mod LOG_RECORDS; entry e, record e.
  for (let s = 0; s < INDEX_SLOTS; s++) slotView.setInt32(s * SLOT_BYTES, (Math.imul(s, 0x9e3779b1) >>> 0) % LOG_RECORDS)
  for (let e = 0; e < LOG_RECORDS; e++) entryView.setInt32(e * INDEX_ENTRY_BYTES + ENTRY_PHY_OFFSET + 4, e * recordBytes)
  for (let e = 0; e < LOG_RECORDS; e++) {
    logView.setInt32(e * recordBytes, recordBytes)
    logView.setInt32(e * recordBytes + RECORD_HEAD_BYTES - 4, BODY_SIZE)
  }
  const kept: Buffer[] = new Array(64)
  let last = 0
  const passOf = (copy: boolean) => () => {
    for (let k = 0; k < TOUCH_LOOKUPS; k++) {
      const slot = (Math.imul(k ^ last, 0x85ebca6b) >>> 0) % INDEX_SLOTS
      const entry = slotView.getInt32(slot * SLOT_BYTES)
      const at = entryView.getInt32(entry * INDEX_ENTRY_BYTES + ENTRY_PHY_OFFSET + 4)
      const size = logView.getInt32(at)
      const bodyLength = logView.getInt32(at + RECORD_HEAD_BYTES - 4)
      const properties = at + RECORD_HEAD_BYTES + bodyLength
      last = log[Math.min(at + size - 1, properties + 16)] & 1
      if (copy) {
        const body = Buffer.allocUnsafeSlow(bodyLength)
        log.copy(body, 0, at + RECORD_HEAD_BYTES, properties)
        kept[k & 63] = body
      }
    }
  }
  return {
    lookupTouches: median(timePasses(passOf(true), TOUCH_LOOKUPS)),
    lookupTouchesOnly: median(timePasses(passOf(false), TOUCH_LOOKUPS)),
  }
}

/** Private copies timed for the copy-latency figure, after as many untimed. */
const COPY_SAMPLES = 100_000
const BODY_BYTES = 256

/**
 * The p99 of one body copied into a buffer of its own (Buffer.allocUnsafeSlow, then copy), each
 * copy timed alone with process.hrtime.bigint() as the lookups are. A safe read hands out bytes
 * that reach nothing but its own, so every lookup makes at least one such buffer: an ArrayBuffer
 * whose memory is malloc'd on the JS thread and freed by V8's array-buffer sweeper on another,
 * and the two meet on the allocator's lock. This is that cost's tail, with nothing else timed.
 */
function privateCopyP99Micros(source: Buffer): number {
  const latencies = new Float64Array(COPY_SAMPLES)
  const kept: Buffer[] = new Array(64)
  const span = source.length - BODY_BYTES
  for (let pass = 0; pass < 2; pass++) {
    for (let k = 0; k < COPY_SAMPLES; k++) {
      const from = (k * 4099) % span
      const t0 = process.hrtime.bigint()
      const copy = Buffer.allocUnsafeSlow(BODY_BYTES)
      source.copy(copy, 0, from, from + BODY_BYTES)
      latencies[k] = Number(process.hrtime.bigint() - t0)
      // A few kept alive, as a consumer keeps some messages.
      kept[k & 63] = copy
    }
  }
  latencies.sort()
  return latencies[Math.ceil(0.99 * COPY_SAMPLES) - 1] / 1000
}

/** ArrayBuffers allocated per pass of the allocation figures (after one untimed pass), and passes. */
const ALLOC_PASS_BUFFERS = 200_000
const ALLOC_PASSES = 3

/**
 * Nanoseconds per ArrayBuffer of a body's size (Buffer.allocUnsafeSlow), allocated in a loop that
 * keeps a few alive and leaves the rest to the garbage collector (as a reader that hands out
 * buffers of their own does), median pass: with V8's concurrent array-buffer sweeping (its
 * default), then without it (set for this child only, through v8.setFlagsFromString).
 */
function arrayBufferNanos(): { arrayBufferNs: number; arrayBufferUnsweptNs: number } {
  const kept: Buffer[] = new Array(64)
  const pass = (): number => {
    const t0 = process.hrtime.bigint()
    for (let k = 0; k < ALLOC_PASS_BUFFERS; k++) kept[k & 63] = Buffer.allocUnsafeSlow(BODY_BYTES)
    return Number(process.hrtime.bigint() - t0) / ALLOC_PASS_BUFFERS
  }
  const passes = (): number => {
    pass()
    return median(Array.from({ length: ALLOC_PASSES }, pass))
  }
  // The bench starts this child without node flags: the first figure is V8's default. The flag
  // is turned off again after, for anything measured later in this child.
  const arrayBufferNs = passes()
  v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping')
  const arrayBufferUnsweptNs = passes()
  v8.setFlagsFromString('--concurrent-array-buffer-sweeping')
  return { arrayBufferNs, arrayBufferUnsweptNs }
}

/**
 * One group of records (`group`) appended to a file preallocated as a commit log is (so the first
 * sync of each block also records it as written, as a store's does), then fdatasync: milliseconds
 * per round, median. In the temporary folder, where the bench makes its stores.
 */
function groupSyncMillis(group: Buffer): number {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'mqstore-bench-limits-'))
  try {
    const fd = fs.openSync(join(dir, 'log'), 'w+')
    try {
      native.allocate(fd, 0, SYNC_FILE_BYTES)
      const runs: number[] = []
      for (let k = 0; k <= SYNC_ROUNDS; k++) {
        const t0 = process.hrtime.bigint()
        fs.writeSync(fd, group, 0, group.length, k * group.length)
        fs.fdatasyncSync(fd)
        if (k > 0) runs.push(Number(process.hrtime.bigint() - t0) / 1e6)
      }
      return median(runs)
    } finally {
      fs.closeSync(fd)
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = await measureLimits()
  if (process.send !== undefined) process.send(result, () => process.exit(0))
  else process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
}
