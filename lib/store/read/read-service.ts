// The read path: pull reads of one queue with RocketMQ's statuses and transfer limits, reads by
// commit-log offset, queries by key, and the per-queue offset and time lookups.
import * as os from 'node:os'

import type { CommitLog, CommitLogReader } from '../commitlog/commit-log.js'
import { decodeMessage, tagsMatch } from '../commitlog/record.js'
import type { MessageStoreConfig } from '../config.js'
import type { IndexService } from '../index/index-service.js'
import { ConsumeQueue, CQ_STORE_UNIT_SIZE } from '../queue/consume-queue.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import type { GetMessageResult, MessageExt, QueryMessageResult } from '../types.js'

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
}

export class ReadService {
  private readonly commitLog: CommitLog
  private readonly queues: ConsumeQueueTable
  private readonly index: () => IndexService
  private readonly config: MessageStoreConfig
  /** Bytes behind the log's end past which a read counts as "from disk" (transfer limits). */
  private readonly memoryLimit: number

  constructor(deps: ReadServiceDeps) {
    this.commitLog = deps.commitLog
    this.queues = deps.queues
    this.index = deps.index
    this.config = deps.config
    this.memoryLimit = (os.totalmem() * this.config.accessMessageInMemoryMaxRatio) / 100
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

  private collect(queue: ConsumeQueue, offset: number, maxMsgNums: number, tags: string[] | undefined, result: GetMessageResultDraft): void {
    const units = queue.getIndexBuffer(offset)
    if (units === null) {
      result.status = 'OFFSET_FOUND_NULL'
      result.nextBeginOffset = queue.rollNextFile(offset)
      return
    }
    const maxPhy = this.commitLog.getMaxOffset()
    const copyBody = this.config.copyMessageBody
    result.status = 'NO_MATCHED_MESSAGE'
    let skipUntil = -1
    let consumed = 0
    let lastPhy = 0
    const reader = this.commitLog.openReader()
    try {
      const view = units.buffer
      const limit = Math.min(units.size, Math.max(MIN_UNIT_BYTES_PER_PULL, maxMsgNums * CQ_STORE_UNIT_SIZE))
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
        if (this.isTheBatchFull(size, maxMsgNums, result, inDisk)) break
        consumed++
        if (!tagsMatch(tags, tagsCode)) continue
        const at = reader.locate(phy, size)
        if (at < 0) {
          if (result.messages.length === 0) result.status = 'MESSAGE_WAS_REMOVING'
          skipUntil = this.commitLog.rollNextFile(phy)
          continue
        }
        const message = decodeMessage(reader.data, at, copyBody, reader.views)
        if (message === null) continue
        // The unit matched by hash; the tag itself must match too (hash collisions).
        if (tags !== undefined && (message.tags === undefined || !tags.includes(message.tags))) continue
        result.messages.push(message)
        result.bufferTotalSize += size
        result.status = 'FOUND'
        skipUntil = -1
      }
    } finally {
      reader.close()
      units.release()
    }
    result.nextBeginOffset = offset + consumed
    result.suggestPullingFromSlave = maxPhy - lastPhy > this.memoryLimit
  }

  private isTheBatchFull(size: number, maxMsgNums: number, result: GetMessageResultDraft, inDisk: boolean): boolean {
    const count = result.messages.length
    if (count === 0) return false
    if (count >= maxMsgNums) return true
    const total = result.bufferTotalSize
    if (inDisk) {
      return total + size > this.config.maxTransferBytesOnMessageInDisk || count > this.config.maxTransferCountOnMessageInDisk - 1
    }
    return total + size > this.config.maxTransferBytesOnMessageInMemory || count > this.config.maxTransferCountOnMessageInMemory - 1
  }

  /** The message whose record starts at `commitLogOffset`, or null. */
  lookMessageByOffset(commitLogOffset: number): MessageExt | null {
    const reader = this.commitLog.openReader()
    try {
      return this.readMessageAt(reader, commitLogOffset)
    } finally {
      reader.close()
    }
  }

  /** The record starting at `offset`, decoded; decodeMessage checks that its length fits. */
  private readMessageAt(reader: CommitLogReader, offset: number): MessageExt | null {
    const at = reader.locate(offset, 0)
    return at < 0 ? null : decodeMessage(reader.data, at, this.config.copyMessageBody, reader.views)
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
    const messages: MessageExt[] = []
    const reader = this.commitLog.openReader()
    try {
      for (const offset of candidates) {
        if (messages.length >= maxNum) break
        const message = this.readMessageAt(reader, offset)
        if (message === null || message.topic !== topic) continue
        if (!message.keys.includes(key) && message.properties.UNIQ_KEY !== key) continue
        messages.push(message)
      }
    } finally {
      reader.close()
    }
    messages.sort((a, b) => a.commitLogOffset - b.commitLogOffset)
    return {
      messages,
      indexLastUpdateTimestamp: found.indexLastUpdateTimestamp,
      indexLastUpdatePhyoffset: found.indexLastUpdatePhyoffset,
    }
  }

  /**
   * The newest message of `topic` whose keys (or UNIQ_KEY) hold `key`: the index's entries for
   * the key's hash are read newest first until one is really that key (other keys may share the
   * hash), however many collide.
   */
  getLatestByKey(topic: string, key: string): MessageExt | null {
    let latest: MessageExt | null = null
    const reader = this.commitLog.openReader()
    try {
      this.index().findNewest(topic, key, (offset) => {
        const message = this.readMessageAt(reader, offset)
        if (message === null || message.topic !== topic) return false
        if (!message.keys.includes(key) && message.properties.UNIQ_KEY !== key) return false
        latest = message
        return true
      })
    } finally {
      reader.close()
    }
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
