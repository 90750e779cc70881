// A read-only opener: `MessageStore.open(dir, { readOnly: true })` in any number of processes or
// worker threads beside the one writer (or with none). It takes no lock and writes nothing in the
// store directory: no abort file, checkpoint, offsets or topic table, no recovery and no repair,
// and creates no folder. Every file is read with positioned reads (read-only-segments.ts), so what
// the writer rolls, deletes, rebuilds or compacts never crashes it; the writer's newest bytes are
// served once whole (read-only-queue.ts), and consume() waits for arrivals (follower.ts).
import * as fs from 'node:fs'
import { dirname, relative, resolve, isAbsolute } from 'node:path'

import { MQStoreError } from '../../errors.js'
import { resolveConfig, type MessageStoreConfig, type MessageStoreOptions } from '../config.js'
import { ConsumerOffsets } from '../consumer-offsets.js'
import {
  checkCommitOptions,
  checkConsumeOptions,
  checkName,
  checkOffset,
  checkPositive,
  checkQueryArguments,
  checkQueue,
  filterTags,
} from '../message-validation.js'
import { CQ_BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE, readUnitOffset, readUnitSize } from '../queue/cq-unit.js'
import { CompactedRead } from '../compaction/compacted-read.js'
import { ReadBatch } from '../read/read-batch.js'
import { isAsciiText } from '../read/record-bytes.js'
import { emptyQueuePlace, placeFor } from '../read/record-identity.js'
import { Subscriptions } from '../read/subscriptions.js'
import { mergeQueueSubscriptions } from '../read/topic-subscription.js'
import { readStoreSizesRecord } from '../store-sizes.js'
import { createStoreLog, type StoreLog } from '../store-logger.js'
import { StorePaths } from '../store-paths.js'
import type {
  CommitOptions,
  ConsumeOptions,
  GetMessageResult,
  Logger,
  MessageExt,
  MessageFilter,
  QueryMessageResult,
  Subscription,
  TopicInfo,
  TopicSubscription,
} from '../types.js'
import { Follower, FOLLOW_INTERVAL_MS } from './follower.js'
import { compactionLogDir, TopicsFile, ReadOnlyCompactionLog } from './read-only-compaction.js'
import { ReadOnlyIndex } from './read-only-index.js'
import { ReadOnlyCommitLog, type KeyedLookup } from './read-only-log.js'
import { ReadOnlyQueue } from './read-only-queue.js'
import { listNames } from './read-only-segments.js'
import { writerHoldsLock } from './writer-lock.js'

/** Options of a read-only opener: `readOnly: true`, and the store options reads use. */
export type ReadOnlyOpenOptions = MessageStoreOptions & {
  readOnly: true
  /**
   * A file this reader owns where its offset commits are kept (the same JSON shape as the
   * writer's config/consumerOffset.json); it must lie outside the store directory. Without it,
   * commits stay in memory. Either way the reader starts from the writer's committed offsets.
   */
  offsetStorePath?: string
  /**
   * Milliseconds between two slow looks at the queues a consumer waits on (default 200): the
   * fallback for when the writer's touches of the `arrivals` file cannot be watched.
   */
  followIntervalMs?: number
  logger?: Logger
}

/** What a read-only opener reports from stats(). */
export interface ReaderStats {
  /** Always true: this is a read-only opener. */
  readonly readOnly: true
  /** Whether a process holds the store's lock now (read from /proc/locks); null where that cannot be told. */
  readonly writerRunning: boolean | null
  /**
   * True when the last writer stopped without a clean close and none runs now: the files may end
   * with bytes a recovery would cut, and reads are served as far as the records check out.
   */
  readonly needsRecovery: boolean
  /** Whether the store directory exists (a reader may start before the writer ever ran). */
  readonly storeExists: boolean
  readonly commitLogMinOffset: number
  readonly commitLogMaxOffset: number
  /** Consume queues this reader has looked at. */
  readonly consumeQueueCount: number
  readonly getMessageTimes: number
  readonly getMessageFoundCount: number
  /** Records not served because their body failed its CRC. */
  readonly bodyCrcFailures: number
  /** Consumers waiting for arrivals now, and looks the follower took since open. */
  readonly waitingQueues: number
  readonly followTicks: number
  /** Changes of the writer's `arrivals` file seen since open, and whether the file is watched now. */
  readonly followSignals: number
  readonly arrivalsWatched: boolean
  /** Where commits are kept, or null (in memory). */
  readonly offsetStorePath: string | null
}

/** Units read per getMessage at the least (as the writer: RocketMQ reads 16,000 bytes of units). */
const MIN_UNITS_PER_PULL = 800

export class MessageStoreReader implements AsyncDisposable {
  readonly storePath: string
  readonly config: MessageStoreConfig
  readonly readOnly = true
  private readonly paths: StorePaths
  private readonly log: ReadOnlyCommitLog
  private readonly index: ReadOnlyIndex
  private readonly queues = new Map<string, ReadOnlyQueue>()
  private readonly topics: TopicsFile
  private readonly compactionLogs = new Map<string, ReadOnlyCompactionLog>()
  /** Compacted reads take and copy their records as the writer's do (compaction/compacted-read.ts). */
  private readonly compactedPlace = emptyQueuePlace()
  private readonly compactedRead = new CompactedRead(new ReadBatch({ zeroCopy: false, verify: true }), this.compactedPlace)
  private readonly offsets: ConsumerOffsets
  private readonly offsetStorePath: string | null
  private readonly subscriptions: Subscriptions
  private readonly follower: Follower
  private readonly logger: StoreLog
  private persistTimer: NodeJS.Timeout | null = null
  private closed = false
  private getMessageTimes = 0
  private getMessageFoundCount = 0

  private constructor(storePath: string, options: ReadOnlyOpenOptions) {
    const { readOnly, offsetStorePath, followIntervalMs, logger, ...storeOptions } = options
    this.storePath = storePath
    this.paths = new StorePaths(storePath)
    this.config = resolveConfig(storeOptions)
    const recorded = readStoreSizesRecord(this.paths.storeSizes)
    if (recorded !== null) Object.assign(this.config, recorded)
    this.logger = createStoreLog(logger)
    const interval = followIntervalMs ?? FOLLOW_INTERVAL_MS
    if (!Number.isSafeInteger(interval) || interval < 1)
      throw new MQStoreError('INVALID_OPTION', 'followIntervalMs must be a positive integer')
    this.offsetStorePath = offsetStorePath === undefined ? null : this.ownOffsetPath(offsetStorePath)
    this.log = new ReadOnlyCommitLog(this.paths.commitLog)
    this.index = new ReadOnlyIndex(this.paths.index, this.config)
    this.topics = new TopicsFile(this.paths.topics)
    // The reader's own commits first, the writer's offsets under them.
    this.offsets = new ConsumerOffsets(this.offsetStorePath ?? this.paths.consumerOffsets)
    if (this.offsetStorePath !== null) this.offsets.load()
    this.offsets.mergeFrom(this.paths.consumerOffsets)
    this.subscriptions = new Subscriptions({
      read: {
        readQueue: (topic, queueId, offset, max, tags, pull) => {
          const result = this.readQueue(topic, queueId, offset, max, tags, pull)
          // Past the end only while the writer rebuilds the queue after a crash: wait there
          // instead of moving back (the writer's own consumers are never ahead of its queues).
          return result.status === 'OFFSET_OVERFLOW_BADLY' ? { ...result, nextBeginOffset: offset } : result
        },
        bounds: (topic, queueId) => this.bounds(topic, queueId),
      },
      queues: { find: () => null },
      offsets: this.offsets,
      catchUp: () => {},
      isClosed: () => this.closed,
      commit: (group, topic, queueId, offset, commitOptions) => {
        checkOffset(offset)
        return this.commit(group, topic, queueId, offset, checkCommitOptions(commitOptions))
      },
      onWait: () => this.follower.watch(),
    })
    this.follower = new Follower(
      {
        waited: () => this.subscriptions.waitedQueues(),
        readEnd: (topic, queueId) => this.compactionLog(topic, queueId)?.maxOffset() ?? this.queue(topic, queueId).peekEnd(Date.now()),
        wake: (topic, queueId) => this.subscriptions.notifyArrival(topic, queueId),
        hasWaiters: () => this.subscriptions.hasWaiters,
      },
      interval,
      this.paths.arrivals,
    )
    if (this.offsetStorePath !== null) {
      this.persistTimer = setInterval(() => this.persistOffsets(), this.config.flushConsumerOffsetInterval)
      this.persistTimer.unref()
    }
  }

  /** Opens `dir` read-only (see MessageStore.open with `{ readOnly: true }`). */
  static async open(dir: string, options: ReadOnlyOpenOptions): Promise<MessageStoreReader> {
    if (typeof dir !== 'string' || dir === '') throw new TypeError('dir must be a non-empty string')
    if (options === null || typeof options !== 'object' || options.readOnly !== true)
      throw new TypeError('a reader is opened with { readOnly: true }')
    return new MessageStoreReader(resolve(dir), options)
  }

  /** The reader's offset file: its own, so never inside the store the writer owns. */
  private ownOffsetPath(path: string): string {
    if (typeof path !== 'string' || path === '') throw new MQStoreError('INVALID_OPTION', 'offsetStorePath must be a non-empty string')
    const own = resolve(path)
    const inside = relative(this.storePath, own)
    if (inside === '' || (!inside.startsWith('..') && !isAbsolute(inside))) {
      throw new MQStoreError('INVALID_OPTION', `offsetStorePath must lie outside the store directory (${own})`)
    }
    fs.mkdirSync(dirname(own), { recursive: true })
    return own
  }

  private queue(topic: string, queueId: number): ReadOnlyQueue {
    const key = `${topic}-${queueId}`
    let queue = this.queues.get(key)
    if (queue === undefined) {
      queue = new ReadOnlyQueue(topic, queueId, this.paths.consumeQueues, this.log)
      this.queues.set(key, queue)
    }
    return queue
  }

  /** The compaction log of a queue of a compacted topic (null for other topics), up to date unless `refresh` is false. */
  private compactionLog(topic: string, queueId: number, refresh = true): ReadOnlyCompactionLog | null {
    if (!this.topics.isCompacted(topic)) return null
    const key = `${topic}-${queueId}`
    let log = this.compactionLogs.get(key)
    if (log === undefined) {
      log = new ReadOnlyCompactionLog(compactionLogDir(this.paths.compaction, topic, queueId), () =>
        this.queue(topic, queueId).getMaxOffsetInQueue(),
      )
      this.compactionLogs.set(key, log)
    }
    if (refresh) log.refresh()
    return log
  }

  /** A queue's first and next offsets: its compaction log's for a compacted topic, else its consume queue's. */
  private bounds(topic: string, queueId: number): { min: number; max: number } {
    const log = this.compactionLog(topic, queueId)
    if (log !== null) return { min: log.minOffset(), max: log.reportedEnd() }
    const queue = this.queue(topic, queueId)
    return { min: queue.getMinOffsetInQueue(), max: queue.getMaxOffsetInQueue() }
  }

  private assertOpen(): void {
    if (this.closed) throw new MQStoreError('STORE_CLOSED', 'the store is closed')
  }

  private refused(call: string): MQStoreError {
    return new MQStoreError(
      'READ_ONLY',
      `${call} writes the store, which this process opened read-only; the process that opened it for writing does that`,
    )
  }

  // ---- writing calls: refused ----------------------------------------------------------------

  async putMessage(_message?: unknown): Promise<never> {
    throw this.refused('putMessage')
  }

  async putMessages(_messages?: unknown): Promise<never> {
    throw this.refused('putMessages')
  }

  createTopic(_topic?: string, _options?: unknown): never {
    throw this.refused('createTopic')
  }

  async setTopicConfig(_topic?: string, _config?: unknown): Promise<never> {
    throw this.refused('setTopicConfig')
  }

  async compact(_topic?: string): Promise<never> {
    throw this.refused('compact')
  }

  retryCompaction(_topic?: string): never {
    throw this.refused('retryCompaction')
  }

  executeDeleteFilesManually(): never {
    throw this.refused('executeDeleteFilesManually')
  }

  // ---- reads ---------------------------------------------------------------------------------

  /** As MessageStore.getMessage, over what the writer has dispatched so far. */
  getMessage(group: string, topic: string, queueId: number, offset: number, maxMsgNums: number, filter?: MessageFilter): GetMessageResult {
    this.assertOpen()
    checkName(group, 'group')
    checkQueue(topic, queueId)
    checkOffset(offset)
    checkPositive(maxMsgNums, 'maxMsgNums')
    return this.readQueue(topic, queueId, offset, maxMsgNums, filterTags(filter))
  }

  /** As the writer's ReadService.readQueue (`pull`: getMessage's per-pull message count applies). */
  private readQueue(
    topic: string,
    queueId: number,
    offset: number,
    maxMsgNums: number,
    tags: string[] | undefined,
    pull = true,
  ): GetMessageResult {
    this.getMessageTimes++
    // The end and listings as of this read, or of one less than LISTING_MAX_AGE_MS ago when
    // the units it asks for are known (reads in a row pay no stat and no look at the end each).
    const now = Date.now()
    // Without a tag filter no more than maxMsgNums units are taken, and reading more would cost a
    // larger pread here and, through the records' read-ahead, the records of the reads after this one.
    const want = tags === undefined ? maxMsgNums : Math.max(MIN_UNITS_PER_PULL, maxMsgNums)
    const log = this.compactionLog(topic, queueId, false)
    if (log !== null) {
      log.refreshFor(offset + want, now)
      return this.readCompacted(log, topic, queueId, offset, maxMsgNums, tags)
    }
    const queue = this.queue(topic, queueId)
    queue.refreshFor(offset + want, now)
    this.log.refreshIfOld(now)
    const max = queue.knownEnd
    const min = queue.minOffset(this.log.knownMinOffset())
    const result = { minOffset: min, maxOffset: max, bufferTotalSize: 0, suggestPullingFromSlave: false, bodyCrcFailures: 0 }
    if (max === 0) return { ...result, status: 'NO_MESSAGE_IN_QUEUE', messages: [], nextBeginOffset: 0 }
    if (offset < min) return { ...result, status: 'OFFSET_TOO_SMALL', messages: [], nextBeginOffset: min }
    if (offset === max) return { ...result, status: 'OFFSET_OVERFLOW_ONE', messages: [], nextBeginOffset: offset }
    if (offset > max) return { ...result, status: 'OFFSET_OVERFLOW_BADLY', messages: [], nextBeginOffset: max }
    const units = queue.readUnits(offset, want)
    if (units.length === 0) return { ...result, status: 'OFFSET_FOUND_NULL', messages: [], nextBeginOffset: queue.rollNextFile(offset) }
    const commitLog = this.log
    const crcBefore = commitLog.bodyCrcFailures
    commitLog.beginRead(topic, queueId, units)
    let matched = 0
    let consumed = 0
    let taken = 0
    let removing = false
    for (let at = 0; at + CQ_STORE_UNIT_SIZE <= units.length; at += CQ_STORE_UNIT_SIZE) {
      const phy = readUnitOffset(units, at)
      const size = readUnitSize(units, at)
      if (this.isBatchFull(matched, maxMsgNums, taken, size, pull)) break
      consumed++
      if (phy === 0 && size === CQ_BLANK_UNIT_SIZE) continue
      const took = commitLog.takeRecord(at, phy, size, offset + at / CQ_STORE_UNIT_SIZE, tags)
      if (took === 'missing') {
        if (matched === 0 && phy < Math.max(0, commitLog.minOffset())) removing = true
        continue
      }
      if (took === 'other') continue
      taken += size
      if (took === 'taken') matched++
    }
    const messages: MessageExt[] = commitLog.finishRead().messages
    this.getMessageFoundCount += messages.length
    const status = messages.length > 0 ? 'FOUND' : removing ? 'MESSAGE_WAS_REMOVING' : 'NO_MATCHED_MESSAGE'
    const bodyCrcFailures = this.log.bodyCrcFailures - crcBefore
    return { ...result, status, messages, nextBeginOffset: offset + consumed, bufferTotalSize: taken, bodyCrcFailures }
  }

  /** As the writer reads a compacted queue: the survivors from `offset` on, removed offsets skipped. */
  private readCompacted(
    log: ReadOnlyCompactionLog,
    topic: string,
    queueId: number,
    offset: number,
    maxMsgNums: number,
    tags: string[] | undefined,
  ): GetMessageResult {
    const min = log.minOffset()
    const max = log.reportedEnd()
    const result = { minOffset: min, maxOffset: max, bufferTotalSize: 0, suggestPullingFromSlave: false, bodyCrcFailures: 0 }
    if (max === 0) return { ...result, status: 'NO_MESSAGE_IN_QUEUE', messages: [], nextBeginOffset: 0 }
    if (offset === max) return { ...result, status: 'OFFSET_OVERFLOW_ONE', messages: [], nextBeginOffset: offset }
    if (offset > max) return { ...result, status: 'OFFSET_OVERFLOW_BADLY', messages: [], nextBeginOffset: max }
    placeFor(this.compactedPlace, topic, queueId)
    const limits = { maxMsgNums, maxBytes: this.config.maxTransferBytesOnMessageInMemory, tags }
    const { outcome, next } = log.readMessages(this.compactedRead, offset, limits)
    const messages: MessageExt[] = outcome.messages
    this.log.bodyCrcFailures += outcome.badBodies.length
    this.getMessageFoundCount += messages.length
    const status = messages.length > 0 ? 'FOUND' : 'NO_MATCHED_MESSAGE'
    const bodyCrcFailures = outcome.badBodies.length
    return { ...result, status, messages, nextBeginOffset: next, bufferTotalSize: outcome.bytes, bodyCrcFailures }
  }

  /** The writer's transfer limits for reads from memory (a reader cannot tell what is cached). */
  private isBatchFull(count: number, maxMsgNums: number, taken: number, size: number, pull: boolean): boolean {
    if (count === 0) return false
    if (count >= maxMsgNums) return true
    if (taken + size > this.config.maxTransferBytesOnMessageInMemory) return true
    return pull && count > this.config.maxTransferCountOnMessageInMemory - 1
  }

  /** The message whose record starts at `commitLogOffset`, or null when no record starts there. */
  lookMessageByOffset(commitLogOffset: number): MessageExt | null {
    this.assertOpen()
    checkOffset(commitLogOffset, 'commitLogOffset')
    const log = this.log
    log.refreshIfOld(Date.now())
    log.beginLookups()
    log.takeAt(commitLogOffset, null)
    return log.finishRead().messages[0] ?? null
  }

  /** As MessageStore.queryMessage: the newest matches, oldest first. */
  queryMessage(topic: string, key: string, maxNum: number, begin?: number, end?: number): QueryMessageResult {
    const from = begin ?? 0
    const to = end ?? Date.now()
    checkQueryArguments(topic, key, maxNum, from, to)
    this.assertOpen()
    const log = this.log
    const crcBefore = log.bodyCrcFailures
    log.refreshIfOld(Date.now())
    // As the writer: a full batch of candidates (other keys share hashes), each checked on its
    // record, the newest maxNum whose bodies pass served.
    const candidates: number[] = []
    this.index.forEachOffset(topic, key, this.config.maxMsgsNumBatch, (offset) => {
      if (!candidates.includes(offset)) candidates.push(offset)
      return false
    })
    const keyed: KeyedLookup = { topic, key, keyIsAscii: isAsciiText(key), from, to }
    log.beginLookups()
    for (const offset of candidates) log.takeAt(offset, keyed)
    const messages: MessageExt[] = log.finishRead(maxNum).messages
    messages.sort((a, b) => a.commitLogOffset - b.commitLogOffset)
    const last = messages[messages.length - 1]
    return {
      messages,
      indexLastUpdateTimestamp: last?.storeTimestamp ?? 0,
      indexLastUpdatePhyoffset: last?.commitLogOffset ?? 0,
      bodyCrcFailures: log.bodyCrcFailures - crcBefore,
    }
  }

  /** The newest message of `topic` with `key` (in KEYS or as UNIQ_KEY), or null. */
  getLatestByKey(topic: string, key: string): MessageExt | null {
    checkQueryArguments(topic, key, 1, 0, 0)
    this.assertOpen()
    const log = this.log
    log.refreshIfOld(Date.now())
    const keyed: KeyedLookup = { topic, key, keyIsAscii: isAsciiText(key), from: 0, to: Number.MAX_SAFE_INTEGER }
    let latest: MessageExt | null = null
    this.index.forEachOffset(topic, key, Number.MAX_SAFE_INTEGER, (offset) => {
      log.beginLookups()
      log.takeAt(offset, keyed)
      latest = log.finishRead().messages[0] ?? null
      return latest !== null
    })
    return latest
  }

  private checkedQueue(topic: string, queueId: number): ReadOnlyQueue {
    this.assertOpen()
    checkQueue(topic, queueId)
    return this.queue(topic, queueId)
  }

  getMinOffsetInQueue(topic: string, queueId: number): number {
    this.checkedQueue(topic, queueId)
    return this.bounds(topic, queueId).min
  }

  getMaxOffsetInQueue(topic: string, queueId: number): number {
    this.checkedQueue(topic, queueId)
    return this.bounds(topic, queueId).max
  }

  getMessageTotalInQueue(topic: string, queueId: number): number {
    const queue = this.checkedQueue(topic, queueId)
    return queue.getMaxOffsetInQueue() - queue.getMinOffsetInQueue()
  }

  /** The commit-log offset and size of the unit at `queueOffset`, or null when unreadable. */
  private unitAt(queue: ReadOnlyQueue, queueOffset: number): { offset: number; size: number } | null {
    const max = queue.getMaxOffsetInQueue()
    if (queueOffset < queue.getMinOffsetInQueue() || queueOffset >= max) return null
    const units = queue.readUnits(queueOffset, 1)
    if (units.length < CQ_STORE_UNIT_SIZE) return null
    return { offset: readUnitOffset(units, 0), size: readUnitSize(units, 0) }
  }

  private storeTimeAt(queue: ReadOnlyQueue, queueOffset: number): number {
    const unit = this.unitAt(queue, queueOffset)
    return unit === null ? -1 : this.log.storeTimestampAt(unit.offset, unit.size)
  }

  /**
   * The queue offset whose message's store time is nearest to `timestamp` (the earlier one on a
   * tie, the exact one when there is one); 0 for an empty queue.
   */
  getOffsetInQueueByTime(topic: string, queueId: number, timestamp: number): number {
    checkOffset(timestamp, 'timestamp')
    const queue = this.checkedQueue(topic, queueId)
    const log = this.compactionLog(topic, queueId)
    if (log !== null) return log.offsetByTime(timestamp)
    const min = queue.getMinOffsetInQueue()
    const max = queue.getMaxOffsetInQueue()
    if (max <= min) return 0
    // Store times grow along a queue: the first offset stored at or after `timestamp`.
    let lo = min
    let hi = max
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2)
      const time = this.storeTimeAt(queue, mid)
      if (time >= 0 && time < timestamp) lo = mid + 1
      else hi = mid
    }
    if (lo === max) return max - 1
    const right = this.storeTimeAt(queue, lo)
    if (right === timestamp || lo === min) return lo
    const left = this.storeTimeAt(queue, lo - 1)
    return timestamp - left > right - timestamp ? lo : lo - 1
  }

  getCommitLogOffsetInQueue(topic: string, queueId: number, consumeQueueOffset: number): number {
    checkOffset(consumeQueueOffset, 'consumeQueueOffset')
    return this.unitAt(this.checkedQueue(topic, queueId), consumeQueueOffset)?.offset ?? 0
  }

  getMessageStoreTimeStamp(topic: string, queueId: number, consumeQueueOffset: number): number {
    checkOffset(consumeQueueOffset, 'consumeQueueOffset')
    const queue = this.checkedQueue(topic, queueId)
    return this.compactionLog(topic, queueId)?.storeTimeAt(consumeQueueOffset) ?? this.storeTimeAt(queue, consumeQueueOffset)
  }

  /** Store time of the earliest message of one queue, or of the whole commit log; -1 when there is none. */
  getEarliestMessageTime(topic?: string, queueId?: number): number {
    this.assertOpen()
    if (topic !== undefined && queueId !== undefined) {
      const queue = this.checkedQueue(topic, queueId)
      // As the writer: a compacted queue answers with the time of its offset 0 while it is kept.
      return this.compactionLog(topic, queueId)?.storeTimeAt(0) ?? this.storeTimeAt(queue, queue.getMinOffsetInQueue())
    }
    const min = this.log.minOffset()
    return min < 0 ? -1 : this.log.storeTimestampAt(min)
  }

  getMinPhyOffset(): number {
    return this.log.minOffset()
  }

  getMaxPhyOffset(): number {
    return this.log.maxOffset()
  }

  /** Every topic: those in the writer's topic table, and those that only have queues, by name (as the writer). */
  listTopics(): TopicInfo[] {
    this.assertOpen()
    const infos = new Map<string, TopicInfo>()
    for (const topic of this.topics.topics()) {
      const entry = this.topics.entry(topic)
      if (entry !== undefined)
        infos.set(topic, { topic, readQueueNums: entry.readQueueNums, writeQueueNums: entry.writeQueueNums, created: true })
    }
    for (const topic of listNames(this.paths.consumeQueues)) {
      const ids = this.queueIdsOf(topic)
      if (infos.has(topic) || ids.length === 0) continue
      const count = ids[ids.length - 1] + 1
      infos.set(topic, { topic, readQueueNums: count, writeQueueNums: count, created: false })
    }
    return [...infos.values()].sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : 0))
  }

  private queueIdsOf(topic: string): number[] {
    return listNames(this.paths.consumeQueueTopic(topic))
      .filter((name) => /^\d+$/.test(name))
      .map(Number)
      .sort((a, b) => a - b)
  }

  /** The queues consume() without a queueId reads: the created count, else the queues there are (at least queue 0). */
  private consumedQueueIds(topic: string): number[] {
    const entry = this.topics.entry(topic)
    if (entry !== undefined) return Array.from({ length: entry.readQueueNums }, (_, i) => i)
    const ids = this.queueIdsOf(topic)
    return ids.length === 0 ? [0] : ids
  }

  // ---- offsets and subscriptions -------------------------------------------------------------

  /**
   * Commits an offset for this reader: in memory, and in offsetStorePath when the reader has one
   * (with `{ durable: true }`, resolved once it is on disk there). Never in the writer's files.
   */
  commitOffset(group: string, topic: string, queueId: number, offset: number): void
  commitOffset(group: string, topic: string, queueId: number, offset: number, options: CommitOptions): Promise<void>
  commitOffset(group: string, topic: string, queueId: number, offset: number, options?: CommitOptions): void | Promise<void> {
    this.assertOpen()
    checkName(group, 'group')
    checkQueue(topic, queueId)
    checkOffset(offset)
    const durable = checkCommitOptions(options)
    const done = this.commit(group, topic, queueId, offset, durable)
    return options === undefined ? undefined : done
  }

  private commit(group: string, topic: string, queueId: number, offset: number, durable: boolean): Promise<void> {
    this.offsets.commitOffset(group, topic, queueId, offset)
    if (!durable || this.offsetStorePath === null) return Promise.resolve()
    return this.offsets.persistDurable((error) => this.logger('error', `durable offset commit failed: ${error.message}`))
  }

  /** This reader's offset for the group: its own commit, else the writer's at open; -1 for none. */
  queryOffset(group: string, topic: string, queueId: number): number {
    this.assertOpen()
    checkName(group, 'group')
    checkQueue(topic, queueId)
    return this.offsets.queryOffset(group, topic, queueId)
  }

  /** As MessageStore.consume: yields what the writer dispatched, then waits for more. */
  consume(options: ConsumeOptions & { queueId: number }): Subscription
  consume(options: ConsumeOptions & { queueId?: undefined }): TopicSubscription
  consume(options: ConsumeOptions): Subscription | TopicSubscription {
    this.assertOpen()
    const { batchSize, tags } = checkConsumeOptions(options)
    if (options.queueId !== undefined) return this.subscriptions.subscribe({ ...options, queueId: options.queueId }, batchSize, tags)
    const stop = new AbortController()
    const signal = options.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal])
    const subscriptions = new Map<number, Subscription>()
    for (const queueId of this.consumedQueueIds(options.topic)) {
      subscriptions.set(queueId, this.subscriptions.subscribe({ ...options, queueId, signal, autoCommit: false }, batchSize, tags))
    }
    const autoCommit = options.autoCommit === true
    const merged = mergeQueueSubscriptions(subscriptions, {
      stop,
      onHandOut: autoCommit ? (queueId, position) => this.commitOffset(options.group, options.topic, queueId, position) : undefined,
    })
    // A nack is a put to the group's retry topic: the writer's.
    return Object.assign(merged, { nack: async (): Promise<never> => Promise.reject(this.refused('nack')) })
  }

  // ---- stats and close -----------------------------------------------------------------------

  stats(): ReaderStats {
    const writerRunning = writerHoldsLock(this.paths.lock)
    let waitingQueues = 0
    for (const _ of this.subscriptions.waitedQueues()) waitingQueues++
    return {
      readOnly: true,
      writerRunning,
      needsRecovery: fs.existsSync(this.paths.abort) && writerRunning !== true,
      storeExists: fs.existsSync(this.storePath),
      commitLogMinOffset: this.log.minOffset(),
      commitLogMaxOffset: this.log.maxOffset(),
      consumeQueueCount: this.queues.size,
      getMessageTimes: this.getMessageTimes,
      getMessageFoundCount: this.getMessageFoundCount,
      bodyCrcFailures: this.log.bodyCrcFailures,
      waitingQueues,
      followTicks: this.follower.ticks,
      followSignals: this.follower.signals,
      arrivalsWatched: this.follower.signalled,
      offsetStorePath: this.offsetStorePath,
    }
  }

  get isClosed(): boolean {
    return this.closed
  }

  private persistOffsets(): void {
    try {
      this.offsets.persist()
    } catch (error) {
      this.logger('error', `cannot save offsets to ${this.offsetStorePath}: ${(error as Error).message}`)
    }
  }

  /** Ends every consume() iteration, saves this reader's own offsets (if it has a file) and closes its descriptors. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.follower.stop()
    this.subscriptions.wakeAll()
    if (this.persistTimer !== null) clearInterval(this.persistTimer)
    if (this.offsetStorePath !== null) {
      await this.offsets.settle()
      this.persistOffsets()
    }
    for (const queue of this.queues.values()) queue.close()
    for (const log of this.compactionLogs.values()) log.close()
    this.log.close()
    this.index.close()
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }
}
