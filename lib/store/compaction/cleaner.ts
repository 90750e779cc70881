// One cleaning pass over one queue's compaction log, Kafka's algorithm over RocketMQ's records:
//   1. dirtiness (pure): first dirty offset from the checkpoint, first uncleanable offset (active
//      file, min lag), cleanable ratio, max-lag delay, expired tombstone horizons;
//   2. map: key digest → latest offset over [firstDirty, firstUncleanable), stopping where the
//      fixed-memory map fills (then the pass ends there and the next pass goes on);
//   3. rewrite every file below the map's end, grouped up to segmentBytes, keeping a record when it
//      is the latest for its key (tombstones until their delete horizon), into <base>.cleaned;
//   4. swap the cleaned files in (.cleaned → .swap → old .deleted → final name).
// The pass runs on the event loop in short slices (DEFAULT_SLICE_MS, or CHUNK_BYTES of records,
// whichever comes first): it yields between them, sees aborts there, and counts its bytes through
// the shared throttler. Only the final renames of a swap run in one go.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { setImmediate as yieldToLoop } from 'node:timers/promises'

import {
  bodyLengthAt,
  checkRecord,
  decodeMessage,
  encodeProperties,
  isPrepareFailure,
  prepareRecord,
  writeRecord,
} from '../commitlog/record.js'
import { formatOffsetName } from '../mapped/segment-name.js'
import type { TopicConfig } from '../topics/topic-table.js'
import { CLEANED_SUFFIX, type CompactionLog } from './compaction-log.js'
import { keyDigest, type OffsetMap } from './offset-map.js'
import { CompactionSegment, DELETE_HORIZON_PROPERTY, horizonOf, type IndexedRecord } from './segment.js'
import type { Throttler } from './throttler.js'

const EMPTY = Buffer.alloc(0)

/** Most bytes a pass reads between two yields to the event loop (one "I/O chunk"). */
export const CHUNK_BYTES = 64 * 1024
/** Default longest run of a pass on the event loop before it yields, ms. */
export const DEFAULT_SLICE_MS = 0.25

/** Decides when a pass running on the event loop yields: after sliceMs or CHUNK_BYTES. */
export class Slicer {
  private start = performance.now()
  private bytes = 0
  readonly sliceMs: number
  /** Yields so far (each one a point where an abort is seen). */
  yields = 0

  constructor(sliceMs: number) {
    this.sliceMs = sliceMs
  }

  /** Counts `bytes`; true when the slice is used up. */
  due(bytes: number): boolean {
    this.bytes += bytes
    return this.bytes >= CHUNK_BYTES || performance.now() - this.start >= this.sliceMs
  }

  /** Lets the event loop run (puts, reads, timers), then starts a new slice. */
  async yield(): Promise<void> {
    this.yields++
    await yieldToLoop()
    this.start = performance.now()
    this.bytes = 0
  }
}

export interface Dirtiness {
  firstDirtyOffset: number
  firstUncleanableOffset: number
  cleanBytes: number
  cleanableBytes: number
  cleanableRatio: number
  /** How late the oldest dirty record is past maxCompactionLagMs (0 when it is not). */
  compactionDelayMs: number
  /** A tombstone horizon in the files below the uncleanable offset has passed. */
  horizonPassed: boolean
  /** The checkpoint was outside the log and was reset to its start. */
  checkpointReset: boolean
}

/** Dirtiness of a queue's log at `now` (§6.1–6.4 of the compaction spec, plus expired horizons). */
/**
 * `durableLimit`: the first queue offset whose commit-log record may not be on disk yet. Records
 * from there on stay out of the cleanable range: a newer value the power can still take away
 * must not make an older, durable one go.
 */
export function dirtiness(
  log: CompactionLog,
  checkpoint: number | undefined,
  config: TopicConfig,
  now: number,
  durableLimit = Number.POSITIVE_INFINITY,
): Dirtiness {
  const segments = log.segments
  const logStart = segments.length > 0 ? segments[0].baseOffset : log.nextOffset
  let firstDirty = checkpoint ?? logStart
  let checkpointReset = false
  if (firstDirty < logStart || firstDirty > log.nextOffset) {
    firstDirty = logStart
    checkpointReset = checkpoint !== undefined
  }
  const active = segments.at(-1)
  const activeBase = active === undefined ? log.nextOffset : active.baseOffset
  let limit = Math.min(log.nextOffset, activeBase, durableLimit)
  if (config.minCompactionLagMs > 0) {
    for (const s of segments.slice(0, -1)) {
      const lastOrBase = s.count > 0 ? s.lastOffset() : s.baseOffset
      if (lastOrBase < firstDirty) continue
      if (s.largestTimestamp > now - config.minCompactionLagMs) {
        limit = Math.min(limit, s.baseOffset)
        break
      }
    }
  }
  const uncleanable = Math.max(firstDirty, limit)
  // Round down to a file boundary: the non-active file holding it, else the active file's base.
  let firstUncleanable = activeBase
  for (const s of segments.slice(0, -1)) {
    const next = segments[segments.indexOf(s) + 1]
    if (s.baseOffset <= uncleanable && uncleanable < next.baseOffset) {
      firstUncleanable = s.baseOffset
      break
    }
  }
  let cleanBytes = 0
  let cleanableBytes = 0
  let earliestDirty = Infinity
  let horizonPassed = false
  const from = Math.min(firstDirty, firstUncleanable)
  for (let i = 0; i < segments.length - 1; i++) {
    const s = segments[i]
    const end = segments[i + 1].baseOffset
    if (s.baseOffset < firstDirty) cleanBytes += s.bytes
    if (end > from && s.baseOffset < firstUncleanable) cleanableBytes += s.bytes
    if (end > firstDirty && s.firstTimestamp > 0) earliestDirty = Math.min(earliestDirty, s.firstTimestamp)
    if (s.baseOffset < firstUncleanable && s.minHorizon <= now) horizonPassed = true
  }
  const totalBytes = cleanBytes + cleanableBytes
  const cleanUntil = now - Math.max(config.maxCompactionLagMs, 0)
  return {
    firstDirtyOffset: firstDirty,
    firstUncleanableOffset: firstUncleanable,
    cleanBytes,
    cleanableBytes,
    cleanableRatio: totalBytes > 0 ? cleanableBytes / totalBytes : 0,
    compactionDelayMs: earliestDirty < cleanUntil ? cleanUntil - earliestDirty : 0,
    horizonPassed,
    checkpointReset,
  }
}

/** Whether a queue is worth a pass: overdue by max lag, dirtier than the threshold, or a horizon passed. */
export function isEligible(d: Dirtiness, config: TopicConfig): boolean {
  return (
    (d.compactionDelayMs > 0 && d.cleanableBytes > 0) ||
    (d.cleanBytes + d.cleanableBytes > 0 && d.cleanableRatio > config.minCleanableDirtyRatio) ||
    d.horizonPassed
  )
}

export interface PassResult {
  topic: string
  queueId: number
  firstDirtyOffset: number
  /** The checkpoint the pass wrote: the first offset the next pass maps. */
  endOffset: number
  bytesRead: number
  bytesWritten: number
  recordsRead: number
  recordsKept: number
  recordsDropped: number
  tombstonesDropped: number
  /** Records without a key in the rewritten range (written before the topic was compacted); dropped. */
  invalidRecords: number
  /** Distinct keys in the map, and its fill (size / slots). */
  keys: number
  mapUtilization: number
  /** The map filled before the cleanable range ended: another pass will go on from endOffset. */
  mapFull: boolean
  filesRewritten: number
  filesWritten: number
  durationMs: number
}

export interface PassContext {
  log: CompactionLog
  config: TopicConfig
  map: OffsetMap
  throttler: Throttler
  slicer: Slicer
  /** Throws (CleaningAborted) when the queue's pass must stop; called between chunks. */
  checkDone: () => void
  now: () => number
  fileDeleteDelayMs: number
}

/** Builds the offset map over the dirty range; returns the map's end (first offset it does not cover). */
async function buildMap(
  ctx: PassContext,
  firstDirty: number,
  firstUncleanable: number,
  counters: { bytesRead: number },
): Promise<{ end: number; full: boolean }> {
  const { log, map } = ctx
  map.clear()
  map.latestOffset = firstDirty - 1
  let chunk = 0
  for (let i = 0; i < log.segments.length - 1; i++) {
    const s = log.segments[i]
    const nextBase = log.segments[i + 1].baseOffset
    if (nextBase <= firstDirty || s.baseOffset >= firstUncleanable) continue
    const lease = s.acquire()
    if (lease === null && s.count > 0) throw new Error(`${s.path} cannot be read`)
    const data = lease?.data ?? EMPTY
    try {
      for (let k = lease === null ? s.count : s.lowerBound(firstDirty); k < s.count; k++) {
        const offset = s.offsetAt(k)
        if (offset >= firstUncleanable) break
        const pos = s.positionAt(k)
        const size = s.sizeAt(k)
        const r = checkRecord(data, pos, pos + size, false)
        if (r.status === 'OK' && r.keys !== undefined) {
          const digest = keyDigest(r.keys)
          if (map.isFull() && map.get(digest) < 0) return { end: map.latestOffset + 1, full: true }
          map.put(digest, offset)
        }
        map.latestOffset = offset
        counters.bytesRead += size
        chunk += size
        if (ctx.slicer.due(size)) {
          await ctx.throttler.maybeThrottle(chunk)
          chunk = 0
          await ctx.slicer.yield()
          ctx.checkDone()
        }
      }
    } finally {
      lease?.release()
    }
    // Offsets between the last record and the next file were removed earlier: covered too.
    map.latestOffset = Math.max(map.latestOffset, Math.min(nextBase, firstUncleanable) - 1)
  }
  await ctx.throttler.maybeThrottle(chunk)
  map.latestOffset = Math.max(map.latestOffset, firstUncleanable - 1)
  return { end: map.latestOffset + 1, full: false }
}

/** Groups the files below `endOffset`, oldest first, so each group's bytes fit in segmentBytes. */
export function groupSegments(segments: readonly CompactionSegment[], endOffset: number, segmentBytes: number): CompactionSegment[][] {
  const candidates = segments.slice(0, -1).filter((s) => s.baseOffset < endOffset)
  const groups: CompactionSegment[][] = []
  let i = 0
  while (i < candidates.length) {
    const group = [candidates[i]]
    let bytes = candidates[i].bytes
    i++
    while (i < candidates.length && bytes + candidates[i].bytes <= segmentBytes) {
      bytes += candidates[i].bytes
      group.push(candidates[i])
      i++
    }
    groups.push(group)
  }
  return groups
}

/** A copy of the tombstone at data[pos] with the delete-horizon property added. */
function withHorizon(data: Buffer, pos: number, horizon: number): Buffer {
  const m = decodeMessage(data, pos, true)
  if (m === null) throw new Error(`tombstone at ${pos} does not decode`)
  const properties = { ...m.properties, [DELETE_HORIZON_PROPERTY]: String(horizon) }
  const prepared = prepareRecord(
    {
      topic: m.topic,
      queueId: m.queueId,
      body: m.body,
      flag: m.flag,
      sysFlag: m.sysFlag,
      bornTimestamp: m.bornTimestamp,
      bornHost: m.bornHost,
      storeHost: m.storeHost,
      reconsumeTimes: m.reconsumeTimes,
      preparedTransactionOffset: m.preparedTransactionOffset,
      propertiesString: encodeProperties(properties),
    },
    0,
  )
  if (isPrepareFailure(prepared)) throw new Error(`tombstone at ${pos}: ${prepared.reason}`)
  const out = Buffer.alloc(prepared.length)
  writeRecord(out, 0, prepared, m.queueOffset, m.commitLogOffset, m.storeTimestamp)
  return out
}

/** Writes one group's survivors to `<base>.cleaned`; returns the cleaned segment (flushed, mapped). */
async function cleanGroup(ctx: PassContext, group: CompactionSegment[], passStart: number, result: PassResult): Promise<CompactionSegment> {
  const { log, map, config } = ctx
  const base = group[0].baseOffset
  const path = join(log.dir, formatOffsetName(base) + CLEANED_SUFFIX)
  fs.rmSync(path, { force: true })
  const fd = fs.openSync(path, 'w')
  let written = false
  const index: IndexedRecord[] = []
  let position = 0
  try {
    let out = Buffer.allocUnsafe(CHUNK_BYTES)
    let outLength = 0
    let chunk = 0
    const flushOut = async (): Promise<void> => {
      if (outLength === 0) return
      fs.writeSync(fd, out, 0, outLength)
      result.bytesWritten += outLength
      await ctx.throttler.maybeThrottle(outLength)
      outLength = 0
    }
    for (const s of group) {
      const lease = s.acquire()
      const data = lease?.data ?? EMPTY
      try {
        for (let k = 0; lease !== null && k < s.count; k++) {
          const offset = s.offsetAt(k)
          const pos = s.positionAt(k)
          const size = s.sizeAt(k)
          result.recordsRead++
          result.bytesRead += size
          let record: Buffer | null = data.subarray(pos, pos + size)
          let horizonKept = 0
          if (offset <= map.latestOffset) {
            const r = checkRecord(data, pos, pos + size, false)
            if (r.status !== 'OK' || r.keys === undefined) {
              result.invalidRecords++
              record = null
            } else {
              const latest = map.get(keyDigest(r.keys))
              if (offset < latest) {
                record = null
              } else if (bodyLengthAt(data, pos) <= 0) {
                const horizon = horizonOf(data, pos)
                if (horizon === 0) {
                  horizonKept = passStart + config.deleteRetentionMs
                  record = withHorizon(data, pos, horizonKept)
                } else if (passStart >= horizon) {
                  record = null
                  result.tombstonesDropped++
                } else {
                  horizonKept = horizon
                }
              }
            }
          }
          if (record === null) {
            result.recordsDropped++
          } else {
            result.recordsKept++
            index.push({
              queueOffset: offset,
              position,
              size: record.length,
              storeTimestamp: s.timestampAt(k),
              tagsCode: s.tagsCodeAt(k),
              horizon: horizonKept,
            })
            position += record.length
            if (outLength + record.length > out.length) {
              await flushOut()
              if (record.length > out.length) out = Buffer.allocUnsafe(record.length)
            }
            record.copy(out, outLength)
            outLength += record.length
          }
          chunk += size
          if (ctx.slicer.due(size)) {
            const readBytes = chunk
            chunk = 0
            await ctx.throttler.maybeThrottle(readBytes)
            await flushOut()
            await ctx.slicer.yield()
            ctx.checkDone()
          }
        }
      } finally {
        lease?.release()
      }
    }
    await flushOut()
    ctx.checkDone()
    // On the libuv pool: an fsync of a whole file would stall puts on the event loop.
    await new Promise<void>((resolve, reject) => fs.fsync(fd, (error) => (error ? reject(error) : resolve())))
    written = true
  } finally {
    fs.closeSync(fd)
    if (!written) fs.rmSync(path, { force: true })
  }
  return CompactionSegment.open(path, base, ctx.now(), index)
}

/**
 * Runs one pass over the queue. The caller holds the queue InProgress and writes the checkpoint
 * (result.endOffset) once it resolves; an abort rejects with CleaningAborted and leaves no
 * .cleaned file behind.
 */
export async function cleanQueue(ctx: PassContext, d: Dirtiness): Promise<PassResult> {
  const { log, map, config } = ctx
  const started = performance.now()
  const passStart = ctx.now()
  const counters = { bytesRead: 0 }
  const { end, full } = await buildMap(ctx, d.firstDirtyOffset, d.firstUncleanableOffset, counters)
  const result: PassResult = {
    topic: log.topic,
    queueId: log.queueId,
    firstDirtyOffset: d.firstDirtyOffset,
    endOffset: end,
    bytesRead: counters.bytesRead,
    bytesWritten: 0,
    recordsRead: 0,
    recordsKept: 0,
    recordsDropped: 0,
    tombstonesDropped: 0,
    invalidRecords: 0,
    keys: map.size,
    mapUtilization: map.utilization(),
    mapFull: full,
    filesRewritten: 0,
    filesWritten: 0,
    durationMs: 0,
  }
  for (const group of groupSegments(log.segments, end, config.segmentBytes)) {
    ctx.checkDone()
    const cleaned = await cleanGroup(ctx, group, passStart, result)
    try {
      ctx.checkDone()
    } catch (error) {
      cleaned.close()
      fs.rmSync(cleaned.path, { force: true })
      throw error
    }
    await log.replaceSegments([cleaned], group, ctx.now(), ctx.fileDeleteDelayMs)
    result.filesRewritten += group.length
    result.filesWritten++
  }
  result.durationMs = performance.now() - started
  return result
}
