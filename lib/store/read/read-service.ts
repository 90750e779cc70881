// The read path: pull reads of one queue with RocketMQ's statuses and transfer limits, reads by
// commit-log offset, queries by key, and the per-queue offset and time lookups.
import * as os from 'node:os'

import type { CommitLog } from '../commitlog/commit-log.js'
import { javaStringHashCode } from '../bytes.js'
import { native } from '../../native.js'
import type { MessageStoreConfig } from '../config.js'
import type { IndexService } from '../index/index-service.js'
import { ConsumeQueue, CQ_BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE } from '../queue/consume-queue.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import type { GetMessageResult, MessageExt, QueryMessageResult } from '../types.js'
import type { CommitLogReader } from '../commitlog/commit-log.js'
import { ReadBatch, type BatchOutcome } from './read-batch.js'
import { hasKey, hasTagIn, isAsciiText, textEquals } from './record-bytes.js'
import { emptyQueuePlace, placeFor, type QueuePlace } from './record-identity.js'

/** A GetMessageResult while it is being filled in (callers get it read-only). */
type GetMessageResultDraft = { -readonly [K in keyof GetMessageResult]: GetMessageResult[K] } & { messages: MessageExt[] }

/** Units read from a consume queue per pull at the least (RocketMQ reads 16,000 bytes of units). */
const MIN_UNIT_BYTES_PER_PULL = 16_000
const TWO_POW_32 = 4294967296
/** Records of a pull whose cache lines are asked for up front (see prefetchRecords). */
const PREFETCH_RECORDS = 64

/**
 * The hashes a unit's tag code is compared with (RocketMQ's tag filter, as tagsMatch): one per
 * trimmed, non-empty tag, computed once per read; null when every unit matches.
 */
function tagCodesOf(tags: readonly string[] | undefined): number[] | null {
  if (tags === undefined || tags.length === 0) return null
  const codes: number[] = []
  for (const raw of tags) {
    const tag = raw.trim()
    if (tag === '*') return null
    if (tag !== '') codes.push(javaStringHashCode(tag))
  }
  return codes
}

function matchesTagCode(codes: readonly number[], tagsCode: number): boolean {
  const code = tagsCode | 0
  for (let i = 0; i < codes.length; i++) if (codes[i] === code) return true
  return false
}

/** Whether candidates[c] already came earlier in the list (an index may list an offset twice). */
function isRepeated(candidates: readonly number[], c: number): boolean {
  const offset = candidates[c]
  for (let i = 0; i < c; i++) if (candidates[i] === offset) return true
  return false
}

export interface ReadServiceDeps {
  commitLog: CommitLog
  queues: ConsumeQueueTable
  /** The index is replaced when open rebuilds it, so it is looked up on each query (see DispatchTargetDeps.index). */
  index: { readonly current: IndexService }
  config: MessageStoreConfig
  /** Told about each record whose body failed its CRC on read (it was not served). */
  onBadBody?: (commitLogOffset: number) => void
}

export class ReadService {
  private readonly commitLog: CommitLog
  private readonly queues: ConsumeQueueTable
  private readonly index: { readonly current: IndexService }
  private readonly config: MessageStoreConfig
  /** Bytes behind the log's end past which a read counts as "from disk" (transfer limits). */
  private readonly memoryLimit: number
  private readonly batch: ReadBatch
  private readonly onBadBody: (commitLogOffset: number) => void
  /** Records not served because their body failed its CRC, since open. */
  bodyCrcFailures = 0
  /** A reader kept between reads (closed: it holds no file while idle). */
  private idleReader: CommitLogReader | null = null
  private readonly place: QueuePlace = emptyQueuePlace()
  private readonly prefetch = new Float64Array(2 * PREFETCH_RECORDS)
  /** The commit-log offsets a query's index walk found. */
  private readonly candidates: number[] = []

  constructor(deps: ReadServiceDeps) {
    this.commitLog = deps.commitLog
    this.queues = deps.queues
    this.index = deps.index
    this.config = deps.config
    this.memoryLimit = (os.totalmem() * this.config.accessMessageInMemoryMaxRatio) / 100
    this.batch = new ReadBatch({ zeroCopy: !this.config.copyMessageBody, verify: this.config.checkCRCOnRead })
    this.onBadBody = deps.onBadBody ?? (() => {})
  }

  /** Counts and reports the records a batch refused; returns how many. */
  private noteBadBodies(outcome: BatchOutcome): number {
    if (outcome.badBodies.length === 0) return 0
    // A copy: the batch reuses its list, and the handler (a logger) may read from the store.
    const bad = outcome.badBodies.slice()
    this.bodyCrcFailures += bad.length
    for (const offset of bad) this.onBadBody(offset)
    return bad.length
  }

  /**
   * Up to `maxMsgNums` messages of one queue from `offset`; arguments are already checked. A
   * `pull` (getMessage) also stops at RocketMQ's per-pull message count; consume()'s reads take
   * their batch size, within the same byte limits (and the count limit for records on disk).
   */
  readQueue(topic: string, queueId: number, offset: number, maxMsgNums: number, tags: string[] | undefined, pull = true): GetMessageResult {
    const result: GetMessageResultDraft = {
      status: 'NO_MESSAGE_IN_QUEUE',
      messages: [],
      nextBeginOffset: offset,
      minOffset: 0,
      maxOffset: 0,
      bufferTotalSize: 0,
      suggestPullingFromSlave: false,
      bodyCrcFailures: 0,
    }
    const queue = this.queues.find(topic, queueId)
    if (queue === null) {
      result.nextBeginOffset = 0
      return result
    }
    const min = queue.getMinOffsetInQueue()
    const max = queue.getMaxOffsetInQueue()
    result.minOffset = min
    result.maxOffset = max
    if (max === 0) {
      result.status = 'NO_MESSAGE_IN_QUEUE'
      result.nextBeginOffset = 0
    } else if (offset < min) {
      result.status = 'OFFSET_TOO_SMALL'
      result.nextBeginOffset = min
    } else if (offset === max) {
      result.status = 'OFFSET_OVERFLOW_ONE'
      result.nextBeginOffset = offset
    } else if (offset > max) {
      result.status = 'OFFSET_OVERFLOW_BADLY'
      result.nextBeginOffset = max
    } else {
      this.collect(queue, offset, maxMsgNums, tags, pull, result)
    }
    return result
  }

  private collect(
    queue: ConsumeQueue,
    offset: number,
    maxMsgNums: number,
    tags: string[] | undefined,
    pull: boolean,
    result: GetMessageResultDraft,
  ): void {
    const units = queue.getIndexBuffer(offset)
    if (units === null) {
      result.status = 'OFFSET_FOUND_NULL'
      result.nextBeginOffset = queue.rollNextFile(offset)
      return
    }
    const maxPhy = this.commitLog.getMaxOffset()
    result.status = 'NO_MATCHED_MESSAGE'
    let skipUntil = -1
    let consumed = 0
    let lastPhy = 0
    // Bytes taken so far, for the transfer limits; the batch's own count stands for the messages.
    let taken = 0
    const batch = this.batch
    const reader = this.reader()
    const place = placeFor(this.place, queue.topic, queue.queueId)
    let removing = false
    let outcome: BatchOutcome
    try {
      const view = units.buffer
      const limit = Math.min(units.size, Math.max(MIN_UNIT_BYTES_PER_PULL, maxMsgNums * CQ_STORE_UNIT_SIZE))
      const dv = new DataView(view.buffer, view.byteOffset, view.byteLength)
      const tagCodes = tagCodesOf(tags)
      this.prefetchRecords(reader, dv, Math.min(limit, maxMsgNums * CQ_STORE_UNIT_SIZE))
      batch.begin()
      for (let i = 0; i + CQ_STORE_UNIT_SIZE <= limit; i += CQ_STORE_UNIT_SIZE) {
        // A unit: commit-log offset (int64), size (int32), tag hash (int64), big-endian.
        const phy = dv.getInt32(i) * TWO_POW_32 + dv.getUint32(i + 4)
        const size = dv.getInt32(i + 8)
        lastPhy = phy
        if (skipUntil >= 0 && phy < skipUntil) {
          consumed++
          continue
        }
        const inDisk = maxPhy - phy > this.memoryLimit
        if (this.isTheBatchFull(size, maxMsgNums, batch.count, taken, inDisk, pull)) break
        consumed++
        // A blank stands for a record a rebuild found lost (damage in the log): nothing to serve.
        if (phy === 0 && size === CQ_BLANK_UNIT_SIZE) continue
        if (tagCodes !== null && !matchesTagCode(tagCodes, ConsumeQueue.readTagsCode(view, i))) continue
        const at = reader.locate(phy, size)
        if (at < 0) {
          if (batch.count === 0) removing = true
          skipUntil = this.commitLog.rollNextFile(phy)
          continue
        }
        // A unit damaged in a file recovery does not scan may point at another record: not served.
        place.queueOffset = offset + i / CQ_STORE_UNIT_SIZE
        if (!batch.locate(reader, at, phy, place)) continue
        // The unit matched by hash; the tag itself must match too (hash collisions).
        const fields = batch.fields
        if (tags !== undefined && !hasTagIn(batch.source, fields.propertiesAt, fields.propertiesAt + fields.propertiesLength, tags)) {
          batch.takeRefused()
        } else {
          batch.take(reader)
        }
        taken += size
        skipUntil = -1
      }
      outcome = batch.finish()
    } finally {
      this.releaseReader(reader)
      units.release()
    }
    result.messages = outcome.messages
    result.bufferTotalSize = outcome.bytes
    result.bodyCrcFailures = this.noteBadBodies(outcome)
    if (outcome.messages.length > 0) result.status = 'FOUND'
    else if (removing) result.status = 'MESSAGE_WAS_REMOVING'
    result.nextBeginOffset = offset + consumed
    result.suggestPullingFromSlave = maxPhy - lastPhy > this.memoryLimit
  }

  /**
   * Has the CPU load the records the first units point at (those in the file of the first), all
   * at once: the records of one queue lie kilobytes apart in the log, and locating and copying
   * them one after another would otherwise wait for each one's cache misses in turn.
   */
  private prefetchRecords(reader: CommitLogReader, units: DataView, limit: number): void {
    if (limit < CQ_STORE_UNIT_SIZE) return
    const first = units.getInt32(0) * TWO_POW_32 + units.getUint32(4)
    const at = reader.locate(first, 0)
    if (at < 0) return
    const base = first - at
    const ranges = this.prefetch
    let n = 0
    for (let i = 0; i + CQ_STORE_UNIT_SIZE <= limit && n < PREFETCH_RECORDS; i += CQ_STORE_UNIT_SIZE, n++) {
      ranges[2 * n] = units.getInt32(i) * TWO_POW_32 + units.getUint32(i + 4) - base
      ranges[2 * n + 1] = units.getInt32(i + 8)
    }
    native.prefetchRanges(reader.data, ranges, n)
  }

  /** The reader of this service (one read runs at a time: reads are synchronous). */
  private reader(): CommitLogReader {
    const reader = this.idleReader ?? this.commitLog.openReader()
    this.idleReader = null
    return reader
  }

  /** Lets go of the file a read held and keeps the reader for the next read. */
  private releaseReader(reader: CommitLogReader): void {
    reader.close()
    this.idleReader = reader
  }

  private isTheBatchFull(size: number, maxMsgNums: number, count: number, total: number, inDisk: boolean, pull: boolean): boolean {
    if (count === 0) return false
    if (count >= maxMsgNums) return true
    if (inDisk) {
      return total + size > this.config.maxTransferBytesOnMessageInDisk || count > this.config.maxTransferCountOnMessageInDisk - 1
    }
    if (total + size > this.config.maxTransferBytesOnMessageInMemory) return true
    return pull && count > this.config.maxTransferCountOnMessageInMemory - 1
  }

  /** The message whose record starts at `commitLogOffset`, or null (also when its body fails). */
  lookMessageByOffset(commitLogOffset: number): MessageExt | null {
    const outcome = this.readAt(commitLogOffset, null, '', false)
    this.noteBadBodies(outcome)
    return outcome.messages.length === 0 ? null : outcome.messages[0]
  }

  /**
   * The record at `commitLogOffset` as a batch of one; with `topic`, only when it is that topic's
   * and holds `key` (checked on the stored bytes, before anything is copied).
   */
  private readAt(commitLogOffset: number, topic: string | null, key: string, keyIsAscii: boolean): BatchOutcome {
    const batch = this.batch
    const reader = this.reader()
    try {
      batch.begin()
      const at = reader.locate(commitLogOffset, 0)
      if (at >= 0 && batch.locate(reader, at, commitLogOffset, null) && (topic === null || this.isKeyOf(topic, key, keyIsAscii))) {
        batch.take(reader)
      }
      return batch.finish()
    } finally {
      this.releaseReader(reader)
    }
  }

  /** Whether the record the batch located is `topic`'s and holds `key` (KEYS or UNIQ_KEY). */
  private isKeyOf(topic: string, key: string, keyIsAscii: boolean): boolean {
    const fields = this.batch.fields
    const source = this.batch.source
    if (!textEquals(source, fields.topicAt, fields.topicAt + fields.topicLength, topic)) return false
    return hasKey(source, fields.propertiesAt, fields.propertiesAt + fields.propertiesLength, key, keyIsAscii)
  }

  /**
   * Messages of `topic` with `key` (in KEYS or as UNIQ_KEY) stored between `begin` and `end` (ms),
   * newest index files first, at most min(maxNum, maxMsgsNumBatch). Hash collisions are filtered
   * out by comparing the topic and keys of each record found, on its stored bytes.
   */
  queryMessage(topic: string, key: string, maxNum: number, begin: number, end: number): QueryMessageResult {
    // Ask the index for a full batch: other keys with the same hash are filtered out below, and
    // must not use up maxNum. The newest matches are kept, returned in commit-log order.
    const index = this.index.current
    const candidates = this.candidates
    const found = index.collectOffsets(topic, key, this.config.maxMsgsNumBatch, begin, end, candidates)
    const keyIsAscii = isAsciiText(key)
    const batch = this.batch
    const reader = this.reader()
    let outcome: BatchOutcome
    try {
      batch.begin()
      for (let c = 0; c < found; c++) {
        const offset = candidates[c]
        if (isRepeated(candidates, c)) continue
        const at = reader.locate(offset, 0)
        if (at >= 0 && batch.locate(reader, at, offset, null) && this.isKeyOf(topic, key, keyIsAscii)) batch.take(reader)
      }
      // Only matches use up maxNum (a record whose body fails is not one).
      outcome = batch.finish(maxNum)
    } finally {
      this.releaseReader(reader)
    }
    const messages = outcome.messages
    const bodyCrcFailures = this.noteBadBodies(outcome)
    if (messages.length > 1) messages.sort((a, b) => a.commitLogOffset - b.commitLogOffset)
    return {
      messages,
      indexLastUpdateTimestamp: index.lastUpdateTimestamp(),
      indexLastUpdatePhyoffset: index.lastUpdatePhyOffset(),
      bodyCrcFailures,
    }
  }

  /**
   * The newest message of `topic` whose keys (or UNIQ_KEY) hold `key`: the index's entries for
   * the key's hash are read newest first until one is really that key (other keys may share the
   * hash), however many collide.
   */
  getLatestByKey(topic: string, key: string): MessageExt | null {
    let latest: MessageExt | null = null
    const keyIsAscii = isAsciiText(key)
    this.index.current.findNewest(topic, key, (offset) => {
      // Each candidate is checked on its stored bytes, then read (and its body checked).
      const outcome = this.readAt(offset, topic, key, keyIsAscii)
      this.noteBadBodies(outcome)
      if (outcome.messages.length === 0) return false
      latest = outcome.messages[0]
      return true
    })
    return latest
  }

  /** The commit-log position of the unit at `consumeQueueOffset`, or null when unreadable. */
  readUnit(topic: string, queueId: number, consumeQueueOffset: number): { offset: number; size: number } | null {
    const queue = this.queues.find(topic, queueId)
    if (queue === null) return null
    const units = queue.getIndexBuffer(consumeQueueOffset)
    if (units === null) return null
    try {
      return { offset: ConsumeQueue.readOffset(units.buffer, 0), size: ConsumeQueue.readSize(units.buffer, 0) }
    } finally {
      units.release()
    }
  }

  /** Store time of the message at `consumeQueueOffset`, -1 when unreadable. */
  getMessageStoreTimeStamp(topic: string, queueId: number, consumeQueueOffset: number): number {
    const unit = this.readUnit(topic, queueId, consumeQueueOffset)
    return unit === null ? -1 : this.commitLog.pickupStoreTimestamp(unit.offset, unit.size)
  }

  /** Store time of the earliest message of one queue, or of the whole log; -1 when there is none. */
  getEarliestMessageTime(topic?: string, queueId?: number): number {
    if (topic !== undefined && queueId !== undefined) {
      const queue = this.queues.find(topic, queueId)
      if (queue === null) return -1
      return this.getMessageStoreTimeStamp(topic, queueId, queue.getMinOffsetInQueue())
    }
    const min = this.commitLog.getMinOffset()
    if (min < 0) return -1
    const message = this.lookMessageByOffset(min)
    return message === null ? -1 : message.storeTimestamp
  }
}
