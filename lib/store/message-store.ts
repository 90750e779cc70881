// The facade: open, put, get, query, consume, topics, retention, compaction, stats, close. It
// checks what callers pass and runs the put and read paths over the engine (store-engine.ts),
// which owns the services and their lifecycle.
import { resolve } from 'node:path'
import { MQStoreError } from '../errors.js'
import type { CleanupPass, CleanupPlan } from './cleanup/cleanup-service.js'
import { type CommitLog, PutMessageResult } from './commitlog/commit-log.js'
import {
  BODY_CRC_AFTER_WRITE,
  type DispatchRequest,
  isPrepareFailure,
  type PrepareFailure,
  type PreparedRecord,
  validateTopic,
} from './commitlog/record.js'
import { CoalescedPuts } from './coalesced-puts.js'
import { RecordSlots } from './commitlog/record-slots.js'
import type { MessageStoreConfig } from './config.js'
import { AppendedRequests } from './dispatch-targets.js'
import type { BrokerRole } from './ha/ha-options.js'
import { type SetBrokerRoleOptions, setBrokerRole } from './ha/ha-role-change.js'
import type { CompactReport, SetTopicConfigOptions, TopicConfig, TopicConfigInput } from './compaction/compacted-topics.js'
import {
  buildRecord,
  checkCommitOptions,
  checkMessageShape,
  checkConsumeOptions,
  checkName,
  checkOffset,
  checkPositive,
  checkQuery,
  checkQueryArguments,
  checkQueue,
  filterTags,
} from './message-validation.js'
import { Producer } from './sharing/producer-client.js'
import { RETRY_SLOT, subscribeWithRetries } from './retry/retry-subscription.js'
import { DEFAULT_MAX_RECONSUME_TIMES, RETRY_QUEUE_ID, retryTopicOf } from './retry/retry-topics.js'
import { listTopicInfos, topicQueueIds } from './topics/topic-list.js'
import type {
  CommitOptions,
  ConnectOptions,
  ConsumeOptions,
  GetMessageResult,
  Message,
  MessageExt,
  MessageFilter,
  MessageStoreStats,
  OpenOptions,
  QueryMessageResult,
  Subscription,
  TopicInfo,
  TopicSubscription,
} from './types.js'
import { StoreEngine } from './store-engine.js'
import { type PutTally, waitForPut } from './put-wait.js'
import { withoutEviction } from './mapped/mapping-budget.js'
import { MessageStoreReader, type ReadOnlyOpenOptions } from './sharing/read-only-store.js'

export * from './types.js'
export { MessageStoreReader }
export type { ReadOnlyOpenOptions, ReaderStats } from './sharing/read-only-store.js'

/** Keeps a staged record's request (null: the schedule topic's, left to the dispatcher's pass). */
function stageRequest(commitLog: CommitLog, request: DispatchRequest | null, blankOffset: number): void {
  if (request !== null) commitLog.stageRequest(request, blankOffset)
}

/** Records a put appends, completes and dispatches at a time (a batch's records stay in the cache). */
const PUT_SLICE = 64

type SliceRecords = (PreparedRecord | PrepareFailure | undefined)[]

/** An empty array for a slice's built records. */
function sliceRecords(): SliceRecords {
  return new Array<PreparedRecord | PrepareFailure | undefined>(PUT_SLICE).fill(undefined)
}

export class MessageStore implements AsyncDisposable {
  readonly storePath: string
  readonly config: MessageStoreConfig

  /** The put's own dispatch requests (one object, refilled per record). */
  private readonly appendedRequests = new AppendedRequests()
  // Both made with the store, not at its first put: arrays the put path itself makes, or fills for
  // the first time, do not have the shapes its compiled code was made for in an earlier store of
  // the process, and each such first time sends that code back to the compiler mid-burst.
  /** The records a put refills slice after slice; null while a put holds them (a nested put makes its own). */
  private recordSlots: RecordSlots | null = new RecordSlots(PUT_SLICE)
  /** A slice's built records, kept between puts; null while a put holds them (a nested put makes its own). */
  private sliceRecords: SliceRecords | null = sliceRecords()
  /** Single SYNC_FLUSH puts of the current turn, appended together (each answering one put). */
  private readonly coalesced = new CoalescedPuts(
    (messages) => this.put(messages, false, messages.length) as Promise<PutMessageResult[]>,
    (message) => this.put([message], true) as Promise<PutMessageResult>,
  )

  private constructor(private readonly e: StoreEngine) {
    this.storePath = e.storePath
    this.config = e.config
  }

  /**
   * Opens (creating if needed) the store in `dir`: takes the directory lock, loads every file,
   * recovers from the last shutdown (normal or abnormal), dispatches what the consume queues miss,
   * and starts the background services. With `shareWrites`, it then listens for producers in
   * other processes (MessageStore.connect) on a socket in the directory. With `{ readOnly: true }`:
   * a reader beside the writer (MessageStoreReader), which takes no lock and writes nothing.
   */
  static open(dir: string, options: ReadOnlyOpenOptions): Promise<MessageStoreReader>
  static open(dir: string, options?: OpenOptions): Promise<MessageStore>
  static async open(dir: string, options: OpenOptions | ReadOnlyOpenOptions = {}): Promise<MessageStore | MessageStoreReader> {
    if (typeof dir !== 'string' || dir === '') throw new TypeError('dir must be a non-empty string')
    // Any number of processes and threads may read beside the one writer (sharing/read-only-store.ts).
    if (options?.readOnly === true) return MessageStoreReader.open(dir, options)
    if (options?.readOnly !== undefined && options.readOnly !== false)
      throw new MQStoreError('INVALID_OPTION', 'readOnly must be a boolean')
    const shareWrites: unknown = options?.shareWrites
    if (shareWrites !== undefined && typeof shareWrites !== 'boolean') {
      throw new MQStoreError('INVALID_OPTION', `option 'shareWrites' must be a boolean, got ${typeof shareWrites}`)
    }
    const engine = new StoreEngine(resolve(dir), options)
    try {
      withoutEviction(engine.queues.budget, () => engine.load())
      await engine.syncAfterCrash()
      withoutEviction(engine.queues.budget, () => engine.start())
    } catch (error) {
      engine.abandon()
      throw error
    }
    const store = new MessageStore(engine)
    // Due delayed messages go back to their real topics through the store's own put; a slave's
    // come from its master.
    if (engine.ha.role !== 'SLAVE') engine.schedule.start((messages) => store.putMessages(messages))
    try {
      await engine.ha.start()
      if (shareWrites === true) await engine.shareWrites((messages) => store.putMessages(messages))
    } catch (error) {
      await store.close()
      throw error
    }
    return store
  }

  /**
   * A producer for the store in `dir`, held by another process (or thread) that opened it with
   * `{ shareWrites: true }`: its puts are forwarded to that writer and resolve with the writer's
   * results. Resolves once the writer answered; an MQStoreError IO_ERROR when none did in time.
   */
  static async connect(dir: string, options?: ConnectOptions): Promise<Producer> {
    if (typeof dir !== 'string' || dir === '') throw new TypeError('dir must be a non-empty string')
    return Producer.connect(resolve(dir), options)
  }

  // ---- put ----------------------------------------------------------------------------------

  /** Appends one message. With SYNC_FLUSH, resolves once it is on disk (or FLUSH_DISK_TIMEOUT). */
  putMessage(message: Message): Promise<PutMessageResult> {
    // Staged records (SYNC_FLUSH) are read by no one before their group commit: the puts of one
    // turn go as one batch (coalesced-puts.ts).
    if (this.e.commitLog.staged) return this.coalesced.add(message)
    return this.put([message], true) as Promise<PutMessageResult>
  }

  /**
   * Appends many messages in one go (one append pass, one dispatch, one flush wait). Each gets its
   * own result; an illegal message fails alone.
   */
  putMessages(given: readonly Message[]): Promise<PutMessageResult[]> {
    if (!Array.isArray(given)) return Promise.reject(new TypeError('messages must be an array'))
    return this.put(given, false) as Promise<PutMessageResult[]>
  }

  /**
   * The put path, resolving with the first result (`single`) or all of them. Not an async function:
   * a put that waits for nothing (ASYNC_FLUSH) resolves without one, and one that waits (a flush, a
   * slave) pays a single async frame for the wait, since a put's own allocations are most of what
   * a stream of single puts gives the garbage collector. What throws still becomes a rejection.
   */
  private put(given: readonly Message[], single: boolean, requests = 1): Promise<PutMessageResult | PutMessageResult[]> {
    // Single puts gathered earlier in this turn go first.
    this.coalesced.flush()
    let results: PutMessageResult[]
    let tally: PutTally
    let began: number
    try {
      // Messages without a queueId get one from their topic: by key hash, else round robin.
      const messages = this.routeAll(given)
      // A message with a delay level is parked in the schedule topic (schedule/delay-levels.ts).
      // The caller's own array came back: routeAll found none that asks for a delay.
      const refusals = messages === given ? null : this.e.schedule.rewrite(messages)
      began = Date.now()
      const unavailable = this.e.checkWritable()
      if (unavailable !== null) {
        results = messages.map(() => PutMessageResult.failed('SERVICE_NOT_AVAILABLE', unavailable))
        return Promise.resolve(single ? results[0] : results)
      }
      results = new Array(messages.length)
      for (let i = 0; i < messages.length; i++) checkMessageShape(messages[i])
      tally = this.appendAll(messages, results, refusals, began)
      if (tally.appended > 0) {
        if (this.e.config.flushDiskType === 'ASYNC_FLUSH') {
          this.e.commitLog.writeBackBehind()
          this.e.queues.writeBackBehind(tally.appended)
        }
        // Records the put could not dispatch itself (the schedule topic's, say) are readable now
        // without a write buffer: dispatched here, so that a wait for a new queue's file is known.
        if (tally.leftToDispatch && this.e.pool === null && !this.e.commitLog.staged) this.e.dispatcher.doReput()
        // Most puts dispatch their own records: a pass (a microtask per put) only for what is left.
        if (this.e.dispatcher.behindBytes() > 0) this.e.dispatcher.schedule()
        const waits = tally.waitForFlush && (this.e.config.flushDiskType === 'SYNC_FLUSH' || this.e.ha.role === 'SYNC_MASTER')
        if (waits) return waitForPut(this.e, results, tally, began, single, requests)
        // Staged records that no group commit waits for are written into the file now (readable).
        if (this.e.commitLog.staged) {
          this.e.commitLog.commitStaged()
          this.e.dispatcher.dispatchStaged()
        }
        this.e.flusher.wakeup()
        this.e.ha.notifyAppended()
        this.e.statsService.recordPut(tally.appended, tally.bytes, Date.now() - began)
      }
      // Dispatch waits for a new queue's first file: the put resolves once its records are
      // dispatched, so that the next read sees them.
      if (this.e.dispatcher.waiting !== null) return this.settleDispatch(results, single)
    } catch (error) {
      return Promise.reject(error)
    }
    return Promise.resolve(single ? results[0] : results)
  }

  /**
   * Messages routed to their queues (TopicRouter.route), in a new array that the schedule may
   * rewrite; the caller's own array (not copied, never written) when routing changes none of
   * them and none asks for a delay.
   */
  private routeAll(given: readonly Message[]): Message[] {
    const { router, schedule } = this.e
    let messages: Message[] | null = null
    for (let i = 0; i < given.length; i++) {
      const routed = router.route(given[i])
      if (messages === null) {
        if (routed === given[i] && !schedule.rewrites(routed)) continue
        messages = given.slice(0, i)
      }
      messages.push(routed)
    }
    return messages ?? (given as Message[])
  }

  private async settleDispatch(results: PutMessageResult[], single: boolean): Promise<PutMessageResult | PutMessageResult[]> {
    await this.e.dispatcher.settle()
    return single ? results[0] : results
  }

  /**
   * The put's appends, apart from the waits. Records are built (and so validated, each failing
   * alone) a slice at a time, so that only a slice of them is alive at once; their body CRCs are
   * computed on the written bytes, a slice in one native call (CommitLog.finishAppends). The shapes were checked before: a
   * TypeError for one message must not leave the earlier ones stored behind the caller's back.
   * `now` (the put's start) is every record's store time.
   */
  private appendAll(
    messages: readonly Message[],
    results: PutMessageResult[],
    refusals: readonly (PrepareFailure | undefined)[] | null,
    now: number,
  ): PutTally {
    const defaults = this.e.recordDefaults
    const compacted = this.e.compacted
    const commitLog = this.e.commitLog
    const tally: PutTally = { appended: 0, bytes: 0, lastEnd: -1, waitForFlush: false, leftToDispatch: false }
    // Without a write buffer an appended record is readable at once, so it can be dispatched
    // from what we know here instead of being parsed back out of the commit log; the first that
    // cannot be leaves the rest to the dispatcher's next pass. Slices of the batch are appended,
    // completed (body CRCs) and dispatched in turn, while their records are still in the cache.
    const staged = commitLog.staged
    let directDispatch = this.e.pool === null && !staged
    const slots = this.recordSlots
    this.recordSlots = null
    // Taken while in use, so that a put made meanwhile (from the logger) gets an array of its own.
    const records = this.sliceRecords ?? sliceRecords()
    this.sliceRecords = null
    try {
      for (let from = 0; from < messages.length; from += PUT_SLICE) {
        const to = Math.min(messages.length, from + PUT_SLICE)
        // The record of the slice that follows an end-of-file blank (a roll), and where the blank
        // starts: its dispatch steps over the blank. A second roll within one slice (files smaller
        // than a slice) leaves the records after the first blank to the dispatcher's pass.
        let blankBefore = -1
        let blankAt = -1
        for (let i = from; i < to; i++) {
          const slot = slots === null ? null : slots.take(i - from)
          records[i - from] =
            refusals?.[i] ?? compacted.admit(messages[i], buildRecord(messages[i], now, defaults, BODY_CRC_AFTER_WRITE, slot))
        }
        try {
          for (let i = from; i < to; i++) {
            const record = records[i - from] as PreparedRecord | PrepareFailure
            if (isPrepareFailure(record)) {
              results[i] = this.refused(messages[i], PutMessageResult.failed(record.status, record.reason))
              continue
            }
            const result = this.appendOne(record, now)
            results[i] = result
            const blank = commitLog.lastBlankOffset
            if (blank >= 0) {
              blankBefore = i
              blankAt = blank
            }
            if (!result.isOk()) {
              this.refused(messages[i], result)
              continue
            }
            tally.appended++
            tally.bytes += result.wroteBytes
            tally.lastEnd = result.wroteOffset + result.wroteBytes
            if (messages[i].properties?.WAIT !== 'false') tally.waitForFlush = true
          }
        } finally {
          commitLog.finishAppends()
        }
        for (let i = from; i < to; i++) {
          const result = results[i]
          if (result.wroteBytes <= 0) continue
          const record = records[i - from] as PreparedRecord
          const blank = i === blankBefore ? blankAt : -1
          if (directDispatch) directDispatch = this.dispatchAppended(record, result, blank)
          // Staged (SYNC_FLUSH): dispatched from what the put knew once a commit writes it.
          else if (staged) stageRequest(commitLog, this.appendedRequests.copyOf(record, result, commitLog.spareRequest()), blank)
          // Dispatch waits for a new queue's first file: the next new queues start making theirs.
          else if (this.e.dispatcher.waiting !== null) this.e.targets.prepareAhead(record, result.queueOffset)
        }
      }
    } finally {
      // The slots let go of the messages (bodies, strings) before they wait for the next put.
      slots?.release()
      this.recordSlots = slots
      records.fill(undefined, 0, Math.min(PUT_SLICE, messages.length))
      this.sliceRecords = records
    }
    tally.leftToDispatch = !directDispatch
    return tally
  }

  /** Appends one built record; a failure is a result, never a throw. */
  private appendOne(record: PreparedRecord, now: number): PutMessageResult {
    let result: PutMessageResult
    try {
      result = this.e.commitLog.append(record, now)
    } catch (error) {
      this.e.logger('error', `append failed: ${(error as Error).message}`)
      return PutMessageResult.failed('UNKNOWN_ERROR', `append failed: ${(error as Error).message}`)
    }
    // No room for the next file: read the disk now (a full disk then refuses the next puts with
    // SERVICE_NOT_AVAILABLE without trying to create files) and wake cleanup.
    if (result.status === 'CREATE_MAPEDFILE_FAILED') {
      this.e.cleanup.checkDisk()
      this.e.cleanLoop?.wakeup()
    }
    return result
  }

  /** Counts a refused put and tells the logger why, at debug level. */
  private refused(message: Message, result: PutMessageResult): PutMessageResult {
    this.e.statsService.putMessageFailedTimes++
    this.e.logger('debug', `put to topic ${JSON.stringify(message.topic)} refused with ${result.status}: ${result.reason}`)
    return result
  }

  /**
   * Dispatches a record just appended from what the put knows, without parsing it back;
   * `blankOffset` is where the end-of-file blank its append wrote before it starts (-1: none).
   */
  private dispatchAppended(record: PreparedRecord, result: PutMessageResult, blankOffset: number): boolean {
    const request = this.appendedRequests.of(record, result)
    return request !== null && this.e.dispatcher.dispatchAppended(request, result.wroteOffset, blankOffset)
  }

  // ---- get ----------------------------------------------------------------------------------

  /**
   * Reads up to `maxMsgNums` messages of one queue from `offset`, with RocketMQ's statuses and
   * transfer limits. Messages that fail the tag filter are skipped (and counted in nextBeginOffset).
   */
  getMessage(group: string, topic: string, queueId: number, offset: number, maxMsgNums: number, filter?: MessageFilter): GetMessageResult {
    this.assertOpen()
    checkName(group, 'group')
    checkQueue(topic, queueId)
    checkOffset(offset)
    checkPositive(maxMsgNums, 'maxMsgNums')
    const began = Date.now()
    this.e.catchUp()
    const result =
      this.e.compacted.readQueue(topic, queueId, offset, maxMsgNums, filterTags(filter)) ??
      this.e.reads.readQueue(topic, queueId, offset, maxMsgNums, filterTags(filter))
    this.e.statsService.recordGet(result.messages.length, Date.now() - began)
    return result
  }

  /** The message whose record starts at `commitLogOffset`, or null when no record starts there. */
  lookMessageByOffset(commitLogOffset: number): MessageExt | null {
    checkOffset(commitLogOffset, 'commitLogOffset')
    return this.reading(() => this.e.reads.lookMessageByOffset(commitLogOffset))
  }

  /**
   * Messages of `topic` with `key` (in KEYS or as UNIQ_KEY) stored between `begin` (default 0) and
   * `end` (default now), in ms: the newest min(maxNum, maxMsgsNumBatch) matches, returned oldest
   * first (commit-log order). For the newest alone, see getLatestByKey.
   */
  queryMessage(topic: string, key: string, maxNum: number, begin?: number, end?: number): QueryMessageResult {
    // reading()'s steps written out: no closure or range object per lookup.
    const from = begin ?? 0
    const to = end ?? Date.now()
    checkQueryArguments(topic, key, maxNum, from, to)
    this.assertOpen()
    this.e.catchUp()
    return this.e.reads.queryMessage(topic, key, maxNum, from, to)
  }

  /** The newest message of `topic` with `key` (in KEYS or as UNIQ_KEY), or null. */
  getLatestByKey(topic: string, key: string): MessageExt | null {
    checkQuery(topic, key, 1, undefined, undefined, 0)
    return this.reading(() => this.e.reads.getLatestByKey(topic, key))
  }

  /** Runs a read after dispatch caught up, so that it sees every put before it. */
  private reading<T>(read: () => T, topic?: string, queueId?: number): T {
    this.assertOpen()
    if (topic !== undefined || queueId !== undefined) checkQueue(topic as string, queueId as number)
    this.e.catchUp()
    return read()
  }

  getMinOffsetInQueue(topic: string, queueId: number): number {
    return this.reading(
      () =>
        this.e.compacted.isCompacted(topic)
          ? this.e.compacted.minOffset(topic, queueId)
          : (this.e.queues.find(topic, queueId)?.getMinOffsetInQueue() ?? 0),
      topic,
      queueId,
    )
  }

  getMaxOffsetInQueue(topic: string, queueId: number): number {
    return this.reading(
      () =>
        this.e.compacted.isCompacted(topic)
          ? this.e.compacted.maxOffset(topic, queueId)
          : (this.e.queues.find(topic, queueId)?.getMaxOffsetInQueue() ?? 0),
      topic,
      queueId,
    )
  }

  getMessageTotalInQueue(topic: string, queueId: number): number {
    return this.reading(() => this.e.queues.find(topic, queueId)?.getMessageTotalInQueue() ?? 0, topic, queueId)
  }

  /** The queue offset whose message's store time is nearest to `timestamp` (0 for an unknown queue). */
  getOffsetInQueueByTime(topic: string, queueId: number, timestamp: number): number {
    checkOffset(timestamp, 'timestamp')
    return this.reading(
      () =>
        this.e.compacted.isCompacted(topic)
          ? this.e.compacted.offsetByTime(topic, queueId, timestamp)
          : (this.e.queues.find(topic, queueId)?.getOffsetInQueueByTime(timestamp) ?? 0),
      topic,
      queueId,
    )
  }

  /** The commit-log offset of the message at `consumeQueueOffset`, 0 when unreadable. */
  getCommitLogOffsetInQueue(topic: string, queueId: number, consumeQueueOffset: number): number {
    checkOffset(consumeQueueOffset, 'consumeQueueOffset')
    return this.reading(() => this.e.reads.readUnit(topic, queueId, consumeQueueOffset)?.offset ?? 0, topic, queueId)
  }

  /** Store time of the message at `consumeQueueOffset`, -1 when unreadable. */
  getMessageStoreTimeStamp(topic: string, queueId: number, consumeQueueOffset: number): number {
    checkOffset(consumeQueueOffset, 'consumeQueueOffset')
    return this.reading(
      () =>
        this.e.compacted.isCompacted(topic)
          ? this.e.compacted.storeTimeAt(topic, queueId, consumeQueueOffset)
          : this.e.reads.getMessageStoreTimeStamp(topic, queueId, consumeQueueOffset),
      topic,
      queueId,
    )
  }

  /** Store time of the earliest message of one queue, or of the whole commit log; -1 when there is none. */
  getEarliestMessageTime(topic?: string, queueId?: number): number {
    return this.reading(() =>
      topic !== undefined && queueId !== undefined && this.e.compacted.isCompacted(topic)
        ? this.e.compacted.storeTimeAt(topic, queueId, 0)
        : this.e.reads.getEarliestMessageTime(topic, queueId),
    )
  }

  getMinPhyOffset(): number {
    return this.e.commitLog.getMinOffset()
  }

  getMaxPhyOffset(): number {
    return this.e.commitLog.getMaxOffset()
  }

  // ---- consumer offsets and subscriptions ---------------------------------------------------

  /**
   * Commits `offset` (the next message to read) as the group's position in the queue. In memory
   * at once, on disk within flushConsumerOffsetInterval; with `{ durable: true }` the returned
   * promise resolves once it is on disk (commits made together share one write).
   */
  commitOffset(group: string, topic: string, queueId: number, offset: number): void
  commitOffset(group: string, topic: string, queueId: number, offset: number, options: CommitOptions): Promise<void>
  commitOffset(group: string, topic: string, queueId: number, offset: number, options?: CommitOptions): void | Promise<void> {
    this.assertOpen()
    checkName(group, 'group')
    checkQueue(topic, queueId)
    checkOffset(offset)
    const durable = checkCommitOptions(options)
    if (options === undefined) {
      this.e.consumerOffsets.commitOffset(group, topic, queueId, offset)
      return
    }
    return this.e.commit(group, topic, queueId, offset, durable)
  }

  /** The group's committed offset for the queue, -1 when it never committed one. */
  queryOffset(group: string, topic: string, queueId: number): number {
    this.assertOpen()
    checkName(group, 'group')
    checkQueue(topic, queueId)
    return this.e.consumerOffsets.queryOffset(group, topic, queueId)
  }

  /**
   * Tails one queue: yields every message from `from` on, then waits for new ones (woken by
   * dispatch, no polling) until `signal` aborts or the store closes; the iteration then ends.
   */
  consume(options: ConsumeOptions & { queueId: number }): Subscription
  consume(options: ConsumeOptions & { queueId?: undefined }): TopicSubscription
  consume(options: ConsumeOptions): Subscription | TopicSubscription {
    this.assertOpen()
    const { batchSize, tags } = checkConsumeOptions(options)
    if (options.queueId !== undefined) return this.e.subscriptions.subscribe({ ...options, queueId: options.queueId }, batchSize, tags)
    const maxReconsumeTimes = options.maxReconsumeTimes ?? DEFAULT_MAX_RECONSUME_TIMES
    if (!Number.isSafeInteger(maxReconsumeTimes) || maxReconsumeTimes < 0)
      throw new RangeError('maxReconsumeTimes must be a non-negative integer')
    this.e.catchUp()
    const stop = new AbortController()
    const signal = options.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal])
    const subscriptions = new Map<number, Subscription>()
    for (const queueId of topicQueueIds(options.topic, this.e.compacted.table, this.e.queues)) {
      subscriptions.set(queueId, this.e.subscriptions.subscribe({ ...options, queueId, signal, autoCommit: false }, batchSize, tags))
    }
    // The group's retry queue is read beside the topic (every tag: the first read filtered them).
    const retryTopic = retryTopicOf(options.group)
    const retry =
      retryTopic === options.topic || validateTopic(retryTopic) !== null
        ? null
        : this.e.subscriptions.subscribe(
            { ...options, topic: retryTopic, queueId: RETRY_QUEUE_ID, signal, autoCommit: false },
            batchSize,
            undefined,
          )
    const autoCommit = options.autoCommit === true
    const commitAt = (queueId: number, position: number) =>
      queueId === RETRY_SLOT
        ? this.commitOffset(options.group, retryTopic, RETRY_QUEUE_ID, position)
        : this.commitOffset(options.group, options.topic, queueId, position)
    return subscribeWithRetries(
      subscriptions,
      retry,
      { stop, onHandOut: autoCommit ? commitAt : undefined },
      {
        group: options.group,
        maxReconsumeTimes,
        lookMessage: (offset) => this.lookMessageByOffset(offset),
        put: (message) => this.putMessage(message),
        onNack: (deadLettered) => this.e.retries.record(options.group, deadLettered),
        awaitFlush: (offset) => this.e.flusher.awaitFlush(offset),
      },
    )
  }

  /**
   * Creates a topic with `queues` read and write queues (RocketMQ's createTopic; kept in
   * config/topics.json), or changes the queue count of one that exists. Puts without a queueId then
   * spread over its queues, and consume() without a queueId reads them all.
   */
  createTopic(topic: string, options: { queues: number }): TopicInfo {
    this.assertOpen()
    if (options === null || typeof options !== 'object') throw new TypeError('createTopic options must be { queues }')
    const queueIds = this.e.queues.queueIds(topic)
    const entry = this.e.compacted.table.setQueues(topic, options.queues, queueIds.length === 0 ? 0 : queueIds[queueIds.length - 1] + 1)
    return { topic, readQueueNums: entry.readQueueNums, writeQueueNums: entry.writeQueueNums, created: true }
  }

  /** Every topic: those created or configured, and those that only have queues, by name. */
  listTopics(): TopicInfo[] {
    this.assertOpen()
    this.e.catchUp()
    return listTopicInfos(this.e.compacted.table, this.e.queues)
  }

  // ---- retention ----------------------------------------------------------------------------

  /**
   * The next 20 cleanup passes (one every cleanResourceInterval, as in RocketMQ) delete commit-log
   * files past fileReservedTime at any hour.
   */
  executeDeleteFilesManually(): void {
    this.assertOpen()
    this.e.cleanup.executeDeleteFilesManually()
  }

  /** @internal What a cleanup pass would delete now and why (`mqstore clean --dry-run`). */
  planCleanup(): Promise<CleanupPlan> {
    this.assertOpen()
    return this.e.cleanup.plan()
  }

  /** @internal Runs one cleanup pass now (`mqstore clean`); shares a pass already running. */
  runCleanupPass(): Promise<CleanupPass> {
    this.assertOpen()
    return this.e.cleanup.runPass()
  }

  // Topic settings and compaction (docs/compaction.md): settings merge into a topic's and are saved in config/topics.json;
  // compact() runs a pass now over the compacted queues (of `topic`) with anything to clean; retryCompaction() clears backoffs.
  setTopicConfig = (topic: string, config: TopicConfigInput, options?: SetTopicConfigOptions): Promise<TopicConfig> =>
    this.reading(() => this.e.compacted.setTopicConfig(topic, config, options))
  getTopicConfig = (topic: string): TopicConfig => this.reading(() => this.e.compacted.getTopicConfig(topic))
  compact = (topic?: string, options: { onProgress?: (done: number, total: number) => void } = {}): Promise<CompactReport> =>
    this.reading(() => this.e.compacted.compact(topic, options.onProgress), topic, topic === undefined ? undefined : 0)
  retryCompaction = (topic?: string): void => this.reading(() => this.e.compacted.service.retryUncleanable(topic))

  // ---- stats and close ----------------------------------------------------------------------

  /** The store's figures, documented field by field in docs/api.md; after close, those at close. */
  /**
   * Changes the replication role of the open store (docs/api.md, "Failover by hand"): promotes a
   * SLAVE to ASYNC_MASTER or SYNC_MASTER, or makes it the SLAVE of the master at haMasterAddress.
   */
  setBrokerRole(role: BrokerRole, options?: SetBrokerRoleOptions): Promise<void> {
    const e = this.e
    const { ha, commitLog, dispatcher, queues, targets, schedule, compacted } = e
    const log = e.logger.child('ha')
    const startSchedule = (): void => schedule.start((messages) => this.putMessages(messages))
    const host = { ha, commitLog, dispatcher, queues, targets, compacted, log, assertOpen: () => this.assertOpen(), startSchedule }
    const more = { stopSchedule: () => schedule.stop(), index: () => e.index.current, discardIndex: (why: string) => e.discardIndex(why) }
    return setBrokerRole({ ...host, ...more }, role, options)
  }

  stats(): MessageStoreStats {
    return this.e.stats()
  }

  get isClosed(): boolean {
    return this.e.closed
  }

  private assertOpen(): void {
    if (this.e.closed) throw new MQStoreError('STORE_CLOSED', 'the store is closed')
  }

  /**
   * Cancels a message put with a delivery time (deliverAt / delayMs) that is still pending, by
   * the msgId its put returned or its UNIQ_KEY. Resolves true when a cancel was recorded before
   * its slot came due, false when no such pending timer is known (delivered, cancelled or unknown).
   */
  async cancelTimer(msgId: string): Promise<boolean> {
    if (typeof msgId !== 'string' || msgId === '') throw new TypeError('msgId must be a non-empty string')
    this.assertOpen()
    return this.e.schedule.timer.cancel(msgId)
  }

  /**
   * Clean shutdown: stops the services, dispatches and flushes everything, writes the checkpoint,
   * persists consumer offsets, removes the abort file and releases the directory lock.
   * Idempotent; concurrent calls share one shutdown.
   */
  close(): Promise<void> {
    if (this.e.closing === null) this.e.closing = this.e.shutdown()
    return this.e.closing
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }
}
