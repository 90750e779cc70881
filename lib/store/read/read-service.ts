// The read path: pull reads of one queue with RocketMQ's statuses and transfer limits, reads by
// commit-log offset, queries by key, and the per-queue offset and time lookups.
import * as os from 'node:os'

import type { CommitLog } from '../commitlog/commit-log.js'
import { tagsMatch } from '../commitlog/record.js'
import type { MessageStoreConfig } from '../config.js'
import type { IndexService } from '../index/index-service.js'
import { ConsumeQueue, CQ_BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE } from '../queue/consume-queue.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import type { GetMessageResult, MessageExt, QueryMessageResult } from '../types.js'
import { ReadBatch, type BatchOutcome } from './read-batch.js'
import { isRecordAt, type QueuePlace } from './record-identity.js'

/** A GetMessageResult while it is being filled in (callers get it read-only). */
type GetMessageResultDraft = { -readonly [K in keyof GetMessageResult]: GetMessageResult[K] } & { messages: MessageExt[] }

/** Units read from a consume queue per pull at the least (RocketMQ reads 16,000 bytes of units). */
const MIN_UNIT_BYTES_PER_PULL = 16_000

export interface ReadServiceDeps {
  commitLog: CommitLog
  queues: ConsumeQueueTable
  /** The index is replaced when open rebuilds it, so it is looked up on each query. */
  index: () => IndexService
  config: MessageStoreConfig
  /** Told about each record whose body failed its CRC on read (it was not served). */
  onBadBody?: (commitLogOffset: number) => void
}

export class ReadService {
  private readonly commitLog: CommitLog
  private readonly queues: ConsumeQueueTable
  private readonly index: () => IndexService
  private readonly config: MessageStoreConfig
  /** Bytes behind the log's end past which a read counts as "from disk" (transfer limits). */
  private readonly memoryLimit: number
  private readonly batch: ReadBatch
  private readonly onBadBody: (commitLogOffset: number) => void
  /** Records not served because their body failed its CRC, since open. */
  bodyCrcFailures = 0

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
    const bad = outcome.badBodies
    for (const offset of bad) this.onBadBody(offset)
    this.bodyCrcFailures += bad.length
    return bad.length
  }

  /** Up to `maxMsgNums` messages of one queue from `offset`; arguments are already checked. */
  readQueue(topic: string, queueId: number, offset: number, maxMsgNums: number, tags: string[] | undefined): GetMessageResult {
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
      this.collect(queue, offset, maxMsgNums, tags, result)
    }
    return result
  }

  private collect(
    queue: ConsumeQueue,
    offset: number,
    maxMsgNums: number,
    tags: string[] | undefined,
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
    const reader = this.commitLog.openReader()
    const place: QueuePlace = { topic: queue.topic, topicBytes: Buffer.from(queue.topic), queueId: queue.queueId, queueOffset: offset }
    let removing = false
    try {
      const view = units.buffer
      const limit = Math.min(units.size, Math.max(MIN_UNIT_BYTES_PER_PULL, maxMsgNums * CQ_STORE_UNIT_SIZE))
      batch.begin(this.estimateBytes(view, limit, maxMsgNums))
      for (let i = 0; i + CQ_STORE_UNIT_SIZE <= limit; i += CQ_STORE_UNIT_SIZE) {
        const phy = ConsumeQueue.readOffset(view, i)
        const size = ConsumeQueue.readSize(view, i)
        const tagsCode = ConsumeQueue.readTagsCode(view, i)
        lastPhy = phy
        if (skipUntil >= 0 && phy < skipUntil) {
          consumed++
          continue
        }
        const inDisk = maxPhy - phy > this.memoryLimit
        if (this.isTheBatchFull(size, maxMsgNums, batch.count, taken, inDisk)) break
        consumed++
        // A blank stands for a record a rebuild found lost (damage in the log): nothing to serve.
        if (phy === 0 && size === CQ_BLANK_UNIT_SIZE) continue
        if (!tagsMatch(tags, tagsCode)) continue
        const at = reader.locate(phy, size)
        if (at < 0) {
          if (batch.count === 0) removing = true
          skipUntil = this.commitLog.rollNextFile(phy)
          continue
        }
        // A unit damaged in a file recovery does not scan may point at another record: not served.
        place.queueOffset = offset + i / CQ_STORE_UNIT_SIZE
        if (!isRecordAt(reader, at, phy, place) || !batch.add(reader, at)) continue
        taken += size
        skipUntil = -1
      }
    } finally {
      reader.close()
      units.release()
    }
    // The unit matched by hash; the tag itself must match too (hash collisions).
    const keep = tags === undefined ? undefined : (m: MessageExt) => m.tags !== undefined && tags.includes(m.tags)
    const outcome = batch.finish(keep)
    result.messages = outcome.messages
    result.bufferTotalSize = outcome.bytes
    result.bodyCrcFailures = this.noteBadBodies(outcome)
    if (outcome.messages.length > 0) result.status = 'FOUND'
    else if (removing) result.status = 'MESSAGE_WAS_REMOVING'
    result.nextBeginOffset = offset + consumed
    result.suggestPullingFromSlave = maxPhy - lastPhy > this.memoryLimit
  }

  /**
   * Bytes the records of the next pull are likely to take: the sizes of its first units, within
   * the in-memory transfer limit (the batch grows past this if it must).
   */
  private estimateBytes(view: Buffer, limit: number, maxMsgNums: number): number {
    const cap = this.config.maxTransferBytesOnMessageInMemory
    let total = 0
    let n = 0
    for (let i = 0; i + CQ_STORE_UNIT_SIZE <= limit && n < maxMsgNums && total < cap; i += CQ_STORE_UNIT_SIZE, n++) {
      total += ConsumeQueue.readSize(view, i)
    }
    // A blank's size (2 GiB) or a damaged one must not size the batch's buffer.
    return Math.min(total, cap)
  }

  private isTheBatchFull(size: number, maxMsgNums: number, count: number, total: number, inDisk: boolean): boolean {
    if (count === 0) return false
    if (count >= maxMsgNums) return true
    if (inDisk) {
      return total + size > this.config.maxTransferBytesOnMessageInDisk || count > this.config.maxTransferCountOnMessageInDisk - 1
    }
    return total + size > this.config.maxTransferBytesOnMessageInMemory || count > this.config.maxTransferCountOnMessageInMemory - 1
  }

  /** The message whose record starts at `commitLogOffset`, or null (also when its body fails). */
  lookMessageByOffset(commitLogOffset: number): MessageExt | null {
    const batch = this.batch
    const reader = this.commitLog.openReader()
    batch.begin(0)
    try {
      const at = reader.locate(commitLogOffset, 0)
      if (at >= 0 && isRecordAt(reader, at, commitLogOffset, null)) batch.add(reader, at)
    } finally {
      reader.close()
    }
    const outcome = batch.finish()
    this.noteBadBodies(outcome)
    return outcome.messages.length === 0 ? null : outcome.messages[0]
  }

  /**
   * Messages of `topic` with `key` (in KEYS or as UNIQ_KEY) stored between `begin` and `end` (ms),
   * newest index files first, at most min(maxNum, maxMsgsNumBatch). Hash collisions are filtered
   * out by comparing the keys of each message found.
   */
  queryMessage(topic: string, key: string, maxNum: number, begin: number, end: number): QueryMessageResult {
    // Ask the index for a full batch: other keys with the same hash are filtered out below, and
    // must not use up maxNum. The newest matches are kept, returned in commit-log order.
    const found = this.index().queryOffset(topic, key, this.config.maxMsgsNumBatch, begin, end)
    const candidates = [...new Set(found.phyOffsets)]
    const batch = this.batch
    const reader = this.commitLog.openReader()
    batch.begin(0)
    try {
      for (const offset of candidates) {
        const at = reader.locate(offset, 0)
        if (at >= 0 && isRecordAt(reader, at, offset, null)) batch.add(reader, at)
      }
    } finally {
      reader.close()
    }
    // Only matches use up maxNum; the rest are zeroed in the batch's buffer.
    let kept = 0
    const outcome = batch.finish((m) => {
      if (kept >= maxNum || m.topic !== topic) return false
      if (!m.keys.includes(key) && m.properties.UNIQ_KEY !== key) return false
      kept++
      return true
    })
    const messages = outcome.messages
    const bodyCrcFailures = this.noteBadBodies(outcome)
    messages.sort((a, b) => a.commitLogOffset - b.commitLogOffset)
    return {
      messages,
      indexLastUpdateTimestamp: found.indexLastUpdateTimestamp,
      indexLastUpdatePhyoffset: found.indexLastUpdatePhyoffset,
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
    this.index().findNewest(topic, key, (offset) => {
      // Each candidate is read (and its body checked) as lookMessageByOffset reads it.
      const message = this.lookMessageByOffset(offset)
      if (message === null || message.topic !== topic) return false
      if (!message.keys.includes(key) && message.properties.UNIQ_KEY !== key) return false
      latest = message
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
