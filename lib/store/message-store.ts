// The facade: open, put, get, query, consume, stats, close. It owns every service, wires them
// together and is the only place that knows the order in which they start, recover and stop.
import * as fs from 'node:fs'
import { resolve } from 'node:path'

import { MQStoreError } from '../errors.js'
import { CleanupService, type CleanupPass, type CleanupPlan } from './cleanup/cleanup-service.js'
import { CommitLog, PutMessageResult, type PutMessageStatus, type RecoveryOutcome } from './commitlog/commit-log.js'
import { isPrepareFailure, type HostAddress, type PreparedRecord } from './commitlog/record.js'
import { parseHost, resolveConfig, type MessageStoreConfig } from './config.js'
import { ConsumerOffsets } from './consumer-offsets.js'
import { appendedRequest, DispatchTargets } from './dispatch-targets.js'
import { Dispatcher } from './dispatcher.js'
import { defaultEnvironment, type StoreEnvironment } from './environment.js'
import { bodyCrcsOf } from './commitlog/body-crc.js'
import { CommitLogFlusher, markUnflushed } from './flusher.js'
import { CompactedTopics, type CompactReport, type SetTopicConfigOptions, type TopicConfig, type TopicConfigInput } from './compaction/compacted-topics.js'
import { IndexSlot } from './index/index-slot.js'
import { syncDirectory } from './mapped/directory.js'
import { TransientStorePool } from './mapped/transient-store-pool.js'
import {
  buildRecord,
  checkCommitOptions,
  checkName,
  checkOffset,
  checkPositive,
  checkQuery,
  checkQueue,
  filterTags,
  type RecordDefaults,
} from './message-validation.js'
import type { ConsumeQueue } from './queue/consume-queue.js'
import { ConsumeQueueTable } from './queue/queue-table.js'
import { ReadService } from './read/read-service.js'
import { Subscriptions } from './read/subscriptions.js'
import { recoverStore, replayDerivedFiles } from './recovery/store-recovery.js'
import { RunningFlags } from './running-flags.js'
import { ServiceLoop } from './service-loop.js'
import { StoreCheckpoint } from './store-checkpoint.js'
import { StoreLock } from './store-lock.js'
import { createStoreLog, type StoreLog } from './store-logger.js'
import { StorePaths } from './store-paths.js'
import { resolveStoreSizes } from './store-sizes.js'
import { StoreStatsService } from './store-stats.js'
import type {
  CommitOptions,
  ConsumeOptions,
  GetMessageResult,
  Message,
  MessageExt,
  MessageFilter,
  MessageStoreStats,
  OpenOptions,
  QueryMessageResult,
  Repair,
  Subscription,
} from './types.js'

export * from './types.js'

export class MessageStore implements AsyncDisposable {
  readonly storePath: string
  readonly config: MessageStoreConfig
  private readonly paths: StorePaths
  private readonly env: StoreEnvironment
  private readonly recordDefaults: RecordDefaults
  private readonly logger: StoreLog
  /** Child loggers of the services that log the most (pino: `{ component }` bindings). */
  private readonly recoveryLog: StoreLog
  private readonly cleanupLog: StoreLog
  private readonly lock: StoreLock
  private readonly pool: TransientStorePool | null
  private readonly commitLog: CommitLog
  private readonly checkpoint: StoreCheckpoint
  private readonly index: IndexSlot
  private readonly queues: ConsumeQueueTable
  private readonly consumerOffsets: ConsumerOffsets
  private readonly targets: DispatchTargets
  private readonly dispatcher: Dispatcher
  private readonly flusher: CommitLogFlusher
  private readonly reads: ReadService
  private readonly subscriptions: Subscriptions
  private readonly compacted: CompactedTopics
  private readonly statsService = new StoreStatsService()
  private readonly loops: ServiceLoop[] = []
  /** RocketMQ's RunningFlags: puts are refused while any write-blocking flag is set. */
  private readonly flags: RunningFlags
  private readonly cleanup: CleanupService
  private cleanLoop: ServiceLoop | null = null
  private lastExitOK = true
  private readonly onProgress: OpenOptions['onProgress'] | null
  private readonly repairs: Repair[] = []
  /** Set when open finds derived files to rebuild: dispatch then starts at the log's beginning. */
  private rebuild = false
  private recovery: RecoveryOutcome | null = null
  private closed = false
  private statsAtClose: MessageStoreStats | null = null
  private closing: Promise<void> | null = null

  private constructor(storePath: string, options: OpenOptions) {
    const { logger, onProgress, clock, diskUsage, topics, compaction, ...storeOptions } = options
    this.storePath = storePath
    this.paths = new StorePaths(storePath)
    this.config = resolveConfig(storeOptions)
    this.env = { clock: clock ?? defaultEnvironment.clock, diskUsage: diskUsage ?? defaultEnvironment.diskUsage }
    this.logger = createStoreLog(logger)
    this.recoveryLog = this.logger.child('recovery')
    this.cleanupLog = this.logger.child('cleanup')
    this.onProgress = onProgress ?? null
    const storeHost = parseHost(this.config.storeHost)
    this.recordDefaults = { storeHost, bornHost: parseHost(this.config.bornHost), maxMessageSize: this.config.maxMessageSize }
    fs.mkdirSync(storePath, { recursive: true })
    this.lock = StoreLock.take(this.paths.lock)
    try {
      // File sizes are the store's own (store-sizes.ts), not the options'.
      Object.assign(this.config, resolveStoreSizes(this.paths, this.config, storeOptions))
      const usePool = this.config.transientStorePoolEnable && this.config.flushDiskType === 'ASYNC_FLUSH'
      this.pool = usePool ? new TransientStorePool(this.config.transientStorePoolSize, this.config.mappedFileSizeCommitLog) : null
      this.commitLog = new CommitLog(storePath, this.config, storeHost as HostAddress, this.pool)
      this.checkpoint = new StoreCheckpoint(this.paths.checkpoint)
      const { maxHashSlotNum, maxIndexNum, messageIndexEnable } = this.config
      this.index = new IndexSlot(this.paths.index, { maxHashSlotNum, maxIndexNum, messageIndexEnable }, (endTimestamp) => {
        this.checkpoint.indexMsgTimestamp = endTimestamp
        this.checkpoint.flush()
      })
      this.consumerOffsets = new ConsumerOffsets(this.paths.consumerOffsets)
    } catch (error) {
      this.lock.release()
      throw error
    }
    this.queues = new ConsumeQueueTable(this.paths, this.config.mappedFileSizeConsumeQueue, this.commitLog, this.env.clock.now())
    this.reads = new ReadService({
      commitLog: this.commitLog,
      queues: this.queues,
      index: () => this.index.current,
      config: this.config,
      onBadBody: (offset) => this.logger('error', `read skipped the record at commit-log offset ${offset}: its body fails its CRC`),
    })
    this.compacted = new CompactedTopics({ topicsFile: this.paths.topics, compactionDir: this.paths.compaction, clock: this.env.clock, config: this.config, commitLog: this.commitLog, queues: this.queues, log: this.logger }, compaction, topics)
    this.subscriptions = new Subscriptions({
      read: this.compacted.subscriptionReads(this.reads),
      queues: this.queues,
      offsets: this.consumerOffsets,
      catchUp: () => this.catchUp(),
      isClosed: () => this.closed,
      commit: (group, topic, queueId, offset, options) => this.commitOffset(group, topic, queueId, offset, options),
    })
    const dispatchLog = this.logger.child('dispatch')
    this.targets = new DispatchTargets({
      config: this.config,
      queues: this.queues,
      index: () => this.index.current,
      checkpoint: this.checkpoint,
      subscriptions: this.subscriptions,
      log: (message) => dispatchLog('error', message),
    })
    this.dispatcher = new Dispatcher(this.commitLog, (request) => this.targets.dispatch(request) && this.compacted.dispatch(request), {
      onSkip: (offset, bytes, reason) => {
        this.statsService.dispatchSkippedRanges++
        this.statsService.dispatchSkippedBytes += bytes
        dispatchLog('error', `dispatch skipped ${bytes} damaged bytes at commit-log offset ${offset}: ${reason}`)
      },
      onFailure: (offset, error) => logError(dispatchLog)(`dispatch stopped at commit-log offset ${offset}; puts are refused until it gets past it`, error ?? 'a consume queue could not be written'),
    })
    this.flags = new RunningFlags(
      () => this.env.clock.now(),
      (name, set, reason) => this.logger(set ? 'warn' : 'info', `running flag ${name} ${set ? 'set' : 'cleared'}: ${reason}`),
    )
    this.flusher = new CommitLogFlusher(this.commitLog, this.config, this.checkpoint, this.flags, () => this.dispatcher.schedule(), logError(this.logger.child('flush')))
    this.cleanup = new CleanupService(
      {
        commitLog: this.commitLog,
        // A copy: a pass may pause between queues while puts create new ones.
        consumeQueues: () => [...this.queues.all()],
        indexService: () => this.index.current,
        dispatchedOffset: () => this.dispatcher.reputFromOffset,
        commitLogPath: this.paths.commitLog,
        consumeQueuePath: this.paths.consumeQueues,
      },
      this.config,
      this.env,
      this.flags,
      this.cleanupLog,
    )
  }

  /**
   * Opens (creating if needed) the store in `dir`: takes the directory lock, loads every file,
   * recovers from the last shutdown (normal or abnormal), dispatches what the consume queues miss,
   * and starts the background services.
   */
  static async open(dir: string, options: OpenOptions = {}): Promise<MessageStore> {
    if (typeof dir !== 'string' || dir === '') throw new TypeError('dir must be a non-empty string')
    const store = new MessageStore(resolve(dir), options)
    try {
      store.load()
      store.start()
    } catch (error) {
      store.abandon()
      throw error
    }
    return store
  }

  // ---- start-up -----------------------------------------------------------------------------

  private load(): void {
    this.lastExitOK = !fs.existsSync(this.paths.abort)
    this.commitLog.load()
    if (this.checkpoint.recreated && this.commitLog.mappedFileQueue.mappedFiles.length > 0) {
      this.repair('recreated the checkpoint', 'it was missing or not 4096 bytes')
    }
    this.queues.load((queue, reason) => this.discardConsumeQueue(queue, reason))
    const indexFailure = this.index.load(this.lastExitOK, this.checkpoint.indexMsgTimestamp)
    if (indexFailure !== null) {
      this.rebuild = true
      this.repair('deleted the index to rebuild it', indexFailure)
    }
    this.consumerOffsets.load()
    this.compacted.load()
    const progress = this.onProgress === null ? null : (scanned: number, total: number) =>
      this.onProgress?.({ phase: 'recover', scannedBytes: scanned, totalBytes: total })
    const { outcome, redispatchAll } = recoverStore({
      config: this.config,
      commitLog: this.commitLog,
      queues: this.queues,
      checkpoint: this.checkpoint,
      lastExitOK: this.lastExitOK,
      index: () => this.index.current,
      repair: (action, reason) => this.repair(action, reason),
      discardQueue: (queue, reason) => this.discardConsumeQueue(queue, reason),
      discardIndex: (reason) => this.discardIndex(reason),
      dispatchRecovered: (request) => void (this.targets.dispatch(request, false), this.compacted.dispatch(request)),
      progress,
    })
    this.recovery = outcome
    if (redispatchAll) this.rebuild = true
  }

  /** Records a repair: kept for stats() and told to the logger. */
  private repair(action: string, reason: string): void {
    this.repairs.push({ action, reason })
    this.recoveryLog('warn', `${action}: ${reason}`)
  }

  /** Deletes the index so that dispatch rebuilds it. */
  private discardIndex(reason: string): void {
    this.index.discard(true)
    this.rebuild = true
    this.repair('deleted the index to rebuild it', reason)
  }

  /** Deletes a consume queue that cannot be trusted; dispatch rebuilds it from the commit log. */
  private discardConsumeQueue(queue: ConsumeQueue, reason: string): void {
    this.queues.discard(queue)
    this.rebuild = true
    this.repair(`deleted consume queue ${queue.topic}/${queue.queueId} to rebuild it`, reason)
  }

  private start(): void {
    replayDerivedFiles({
      commitLog: this.commitLog,
      queues: this.queues,
      dispatcher: this.dispatcher,
      targets: this.targets,
      indexFiles: this.config.messageIndexEnable ? this.index.current.getFiles() : null,
      rebuild: this.rebuild,
      discardQueue: (queue, reason) => this.discardConsumeQueue(queue, reason),
    })

    // From here on the store changes: a crash must not find a shutdown record that vouches for it.
    this.checkpoint.clearShutdownRecord()
    fs.writeFileSync(this.paths.abort, '')
    syncDirectory(this.paths.abort)

    this.flusher.start()
    this.statsService.start()
    const onError = logError(this.logger)
    this.loops.push(
      new ServiceLoop('flush-consume-queue', this.config.flushIntervalConsumeQueue, () => this.flushConsumeQueues(), logError(this.logger.child('flush'))),
      new ServiceLoop('persist-consumer-offsets', this.config.flushConsumerOffsetInterval, () => this.consumerOffsets.persist(), onError),
      new ServiceLoop('flush-compaction-logs', this.config.flushIntervalConsumeQueue, () => this.compacted.flushAsync(), onError),
    )
    this.cleanLoop = new ServiceLoop('clean-resource', this.config.cleanResourceInterval, async () => {
      await this.cleanup.runPass()
    }, logError(this.cleanupLog))
    this.loops.push(this.cleanLoop)
    // Read the disk now: a store opened on a full disk refuses puts from the start.
    this.cleanup.checkDisk()
    for (const loop of this.loops) loop.start()
    this.compacted.start()
  }

  /** Releases what the constructor and a failed load took, without flushing anything. */
  private abandon(): void {
    this.closed = true
    this.dispatcher.stop()
    void this.compacted.close()
    try {
      this.queues.shutdown()
      this.index.current.shutdown()
      this.commitLog.shutdown()
      this.checkpoint.shutdown()
    } finally {
      this.lock.release()
    }
  }

  /** One consume-queue flush pass; a failed sync stops the store like a commit-log one. */
  private async flushConsumeQueues(): Promise<void> {
    if (this.flags.isSet('NOT_WRITEABLE')) return
    try {
      await this.queues.flushAsync(this.config, this.checkpoint, this.env.clock.now())
    } catch (error) {
      // As with the commit log (flusher.ts): a retried sync could succeed over lost pages.
      this.flags.set('NOT_WRITEABLE', `a consume-queue or checkpoint sync failed (${(error as Error)?.message ?? String(error)}); reopen the store to recover`)
      throw error
    }
  }

  // ---- put ----------------------------------------------------------------------------------

  /**
   * Why puts are refused now, or null: the store is closed, a running flag blocks writes (a full
   * disk, a failed sync), or dispatch is stuck on a record it cannot index.
   */
  private checkWritable(): string | null {
    if (this.closed) return 'the store is closed'
    const blocked = this.flags.writeBlockedReason()
    if (blocked !== null) return blocked
    if (this.dispatcher.failed) {
      this.dispatcher.doReput()
      if (this.dispatcher.failed) return this.dispatcher.failureReason
    }
    return null
  }

  /** Appends one message. With SYNC_FLUSH, resolves once it is on disk (or FLUSH_DISK_TIMEOUT). */
  async putMessage(message: Message): Promise<PutMessageResult> {
    const [result] = await this.putMessages([message])
    return result
  }

  /**
   * Appends many messages in one go (one append pass, one dispatch, one flush wait). Each gets its
   * own result; an illegal message fails alone.
   */
  async putMessages(messages: readonly Message[]): Promise<PutMessageResult[]> {
    if (!Array.isArray(messages)) throw new TypeError('messages must be an array')
    const began = Date.now()
    const unavailable = this.checkWritable()
    if (unavailable !== null) return messages.map(() => PutMessageResult.failed('SERVICE_NOT_AVAILABLE', unavailable))
    const results: PutMessageResult[] = new Array(messages.length)
    // Encode (and so validate) every message first: a TypeError for one message must not leave
    // the earlier ones stored behind the caller's back.
    const now = Date.now()
    // Every body's CRC in one native call; a message that is not an object fails in buildRecord.
    const crcs = bodyCrcsOf(messages.map((message) => (message !== null && typeof message === 'object' ? message.body : undefined)))
    const records = messages.map((message, i) => this.compacted.admit(message, buildRecord(message, now, this.recordDefaults, crcs[i])))
    let bytes = 0
    let appended = 0
    let lastEnd = -1
    let waitForFlush = false
    // Without a write buffer an appended record is readable at once, so it can be dispatched
    // from what we know here instead of being parsed back out of the commit log.
    let directDispatch = this.pool === null
    for (let i = 0; i < messages.length; i++) {
      const record = records[i]
      if (isPrepareFailure(record)) {
        results[i] = this.refused(messages[i], PutMessageResult.failed(record.status, record.reason))
        continue
      }
      let result: PutMessageResult
      try {
        result = this.commitLog.append(record, now)
      } catch (error) {
        this.logger('error', `append failed: ${(error as Error).message}`)
        result = PutMessageResult.failed('UNKNOWN_ERROR', `append failed: ${(error as Error).message}`)
      }
      results[i] = result
      if (!result.isOk()) {
        this.refused(messages[i], result)
        // No room for the next file: read the disk now (a full disk then refuses the next puts
        // with SERVICE_NOT_AVAILABLE without trying to create files) and wake cleanup.
        if (result.status === 'CREATE_MAPEDFILE_FAILED') {
          this.cleanup.checkDisk()
          this.cleanLoop?.wakeup()
        }
        continue
      }
      appended++
      bytes += result.wroteBytes
      lastEnd = result.wroteOffset + result.wroteBytes
      if (directDispatch) directDispatch = this.dispatchAppended(messages[i], record, result)
      if (messages[i].properties?.WAIT !== 'false') waitForFlush = true
    }
    if (appended > 0) {
      this.dispatcher.schedule()
      if (this.config.flushDiskType === 'SYNC_FLUSH' && waitForFlush) {
        const status = await this.flusher.awaitFlush(lastEnd)
        if (status !== 'PUT_OK') {
          const failedSync = this.flags.list().find((flag) => flag.name === 'NOT_WRITEABLE')?.reason ?? null
          markUnflushed(results, status, this.config.syncFlushTimeout, failedSync)
        }
      } else {
        this.flusher.wakeup()
      }
      this.statsService.recordPut(appended, bytes, Date.now() - began)
    }
    return results
  }

  /** Counts a refused put and tells the logger why, at debug level. */
  private refused(message: Message, result: PutMessageResult): PutMessageResult {
    this.statsService.putMessageFailedTimes++
    this.logger('debug', `put to topic ${JSON.stringify(message.topic)} refused with ${result.status}: ${result.reason}`)
    return result
  }

  /** Dispatches a record just appended from what the put knows, without parsing it back. */
  private dispatchAppended(message: Message, record: PreparedRecord, result: PutMessageResult): boolean {
    const request = appendedRequest(message, record, result)
    return request !== null && this.dispatcher.dispatchAppended(request, result.wroteOffset, this.commitLog.lastBlankOffset)
  }

  // ---- get ----------------------------------------------------------------------------------

  /** Dispatches what the log holds beyond the consume queues, so that a read sees every put. */
  private catchUp(): void {
    if (this.dispatcher.reputFromOffset < this.commitLog.getMaxOffset()) this.dispatcher.doReput()
  }

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
    this.catchUp()
    const result = this.compacted.readQueue(topic, queueId, offset, maxMsgNums, filterTags(filter)) ?? this.reads.readQueue(topic, queueId, offset, maxMsgNums, filterTags(filter))
    this.statsService.recordGet(result.messages.length, Date.now() - began)
    return result
  }

  /** The message whose record starts at `commitLogOffset`, or null when no record starts there. */
  lookMessageByOffset(commitLogOffset: number): MessageExt | null {
    checkOffset(commitLogOffset, 'commitLogOffset')
    return this.reading(() => this.reads.lookMessageByOffset(commitLogOffset))
  }

  /**
   * Messages of `topic` with `key` (in KEYS or as UNIQ_KEY) stored between `begin` (default 0) and
   * `end` (default now), in ms: the newest min(maxNum, maxMsgsNumBatch) matches, returned oldest
   * first (commit-log order). For the newest alone, see getLatestByKey.
   */
  queryMessage(topic: string, key: string, maxNum: number, begin?: number, end?: number): QueryMessageResult {
    const range = checkQuery(topic, key, maxNum, begin, end, Date.now())
    return this.reading(() => this.reads.queryMessage(topic, key, maxNum, range.begin, range.end))
  }

  /** The newest message of `topic` with `key` (in KEYS or as UNIQ_KEY), or null. */
  getLatestByKey(topic: string, key: string): MessageExt | null {
    checkQuery(topic, key, 1, undefined, undefined, 0)
    return this.reading(() => this.reads.getLatestByKey(topic, key))
  }

  /** Runs a read after dispatch caught up, so that it sees every put before it. */
  private reading<T>(read: () => T, topic?: string, queueId?: number): T {
    this.assertOpen()
    if (topic !== undefined || queueId !== undefined) checkQueue(topic as string, queueId as number)
    this.catchUp()
    return read()
  }

  getMinOffsetInQueue(topic: string, queueId: number): number {
    return this.reading(() => (this.compacted.isCompacted(topic) ? this.compacted.minOffset(topic, queueId) : (this.queues.find(topic, queueId)?.getMinOffsetInQueue() ?? 0)), topic, queueId)
  }

  getMaxOffsetInQueue(topic: string, queueId: number): number {
    return this.reading(() => (this.compacted.isCompacted(topic) ? this.compacted.maxOffset(topic, queueId) : (this.queues.find(topic, queueId)?.getMaxOffsetInQueue() ?? 0)), topic, queueId)
  }

  getMessageTotalInQueue(topic: string, queueId: number): number {
    return this.reading(() => this.queues.find(topic, queueId)?.getMessageTotalInQueue() ?? 0, topic, queueId)
  }

  /** The queue offset whose message's store time is nearest to `timestamp` (0 for an unknown queue). */
  getOffsetInQueueByTime(topic: string, queueId: number, timestamp: number): number {
    checkOffset(timestamp, 'timestamp')
    return this.reading(() => (this.compacted.isCompacted(topic) ? this.compacted.offsetByTime(topic, queueId, timestamp) : (this.queues.find(topic, queueId)?.getOffsetInQueueByTime(timestamp) ?? 0)), topic, queueId)
  }

  /** The commit-log offset of the message at `consumeQueueOffset`, 0 when unreadable. */
  getCommitLogOffsetInQueue(topic: string, queueId: number, consumeQueueOffset: number): number {
    checkOffset(consumeQueueOffset, 'consumeQueueOffset')
    return this.reading(() => this.reads.readUnit(topic, queueId, consumeQueueOffset)?.offset ?? 0, topic, queueId)
  }

  /** Store time of the message at `consumeQueueOffset`, -1 when unreadable. */
  getMessageStoreTimeStamp(topic: string, queueId: number, consumeQueueOffset: number): number {
    checkOffset(consumeQueueOffset, 'consumeQueueOffset')
    return this.reading(() => (this.compacted.isCompacted(topic) ? this.compacted.storeTimeAt(topic, queueId, consumeQueueOffset) : this.reads.getMessageStoreTimeStamp(topic, queueId, consumeQueueOffset)), topic, queueId)
  }

  /** Store time of the earliest message of one queue, or of the whole commit log; -1 when there is none. */
  getEarliestMessageTime(topic?: string, queueId?: number): number {
    return this.reading(() => (topic !== undefined && queueId !== undefined && this.compacted.isCompacted(topic) ? this.compacted.storeTimeAt(topic, queueId, 0) : this.reads.getEarliestMessageTime(topic, queueId)))
  }

  getMinPhyOffset(): number {
    return this.commitLog.getMinOffset()
  }

  getMaxPhyOffset(): number {
    return this.commitLog.getMaxOffset()
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
    this.consumerOffsets.commitOffset(group, topic, queueId, offset)
    if (options === undefined) return
    if (!durable) return Promise.resolve()
    return this.consumerOffsets.persistDurable((error) => this.logger('error', `durable offset commit failed: ${error.message}`))
  }

  /** The group's committed offset for the queue, -1 when it never committed one. */
  queryOffset(group: string, topic: string, queueId: number): number {
    this.assertOpen()
    checkName(group, 'group')
    checkQueue(topic, queueId)
    return this.consumerOffsets.queryOffset(group, topic, queueId)
  }

  /**
   * Tails one queue: yields every message from `from` on, then waits for new ones (woken by
   * dispatch, no polling) until `signal` aborts or the store closes; the iteration then ends.
   */
  consume(options: ConsumeOptions): Subscription {
    this.assertOpen()
    checkName(options.group, 'group')
    checkQueue(options.topic, options.queueId)
    const batchSize = options.batchSize ?? 32
    checkPositive(batchSize, 'batchSize')
    const tags = filterTags(options.tags)
    return this.subscriptions.subscribe(options, batchSize, tags)
  }

  // ---- retention ----------------------------------------------------------------------------

  /**
   * The next 20 cleanup passes (one every cleanResourceInterval, as in RocketMQ) delete commit-log
   * files past fileReservedTime at any hour.
   */
  executeDeleteFilesManually(): void {
    this.assertOpen()
    this.cleanup.executeDeleteFilesManually()
  }

  /** @internal What a cleanup pass would delete now and why (`mqstore clean --dry-run`). */
  planCleanup(): Promise<CleanupPlan> {
    this.assertOpen()
    return this.cleanup.plan()
  }

  /** @internal Runs one cleanup pass now (`mqstore clean`); shares a pass already running. */
  runCleanupPass(): Promise<CleanupPass> {
    this.assertOpen()
    return this.cleanup.runPass()
  }

  // Topic settings and compaction (docs/compaction.md): settings merge into a topic's and are saved in config/topics.json;
  // compact() runs a pass now over the compacted queues (of `topic`) with anything to clean; retryCompaction() clears backoffs.
  setTopicConfig = (topic: string, config: TopicConfigInput, options?: SetTopicConfigOptions): Promise<TopicConfig> => this.reading(() => this.compacted.setTopicConfig(topic, config, options))
  getTopicConfig = (topic: string): TopicConfig => this.reading(() => this.compacted.getTopicConfig(topic))
  compact = (topic?: string, options: { onProgress?: (done: number, total: number) => void } = {}): Promise<CompactReport> => this.reading(() => this.compacted.compact(topic, options.onProgress), topic, topic === undefined ? undefined : 0)
  retryCompaction = (topic?: string): void => this.reading(() => this.compacted.service.retryUncleanable(topic))

  // ---- stats and close ----------------------------------------------------------------------

  /** The store's figures, documented field by field in docs/api.md; after close, those at close. */
  stats(): MessageStoreStats {
    if (this.statsAtClose !== null) return structuredClone(this.statsAtClose)
    const { diskUsage, ...cleanup } = this.cleanup.stats()
    // Onto the snapshot rather than spread into a new literal: a 40-field spread made this 5x slower.
    return Object.assign(this.statsService.snapshot(), {
      commitLogMinOffset: this.commitLog.getMinOffset(),
      commitLogMaxOffset: this.commitLog.getMaxOffset(),
      commitLogFlushedOffset: this.commitLog.mappedFileQueue.flushedWhere,
      // Without write buffers every append lands in the mapping: nothing waits to be committed.
      commitBehindBytes: this.pool === null ? 0 : this.commitLog.mappedFileQueue.remainHowManyDataToCommit(),
      flushBehindBytes: this.commitLog.mappedFileQueue.remainHowManyDataToFlush(),
      dispatchBehindBytes: this.dispatcher.behindBytes(),
      dispatchStuck: this.dispatcher.failed,
      lastExitOK: this.lastExitOK,
      recovery: this.recovery,
      repairs: [...this.repairs],
      consumeQueueCount: this.queues.size,
      indexFileCount: this.index.current.getFileCount(),
      diskUsage,
      runningFlags: { value: this.flags.value, flags: this.flags.list() },
      cleanup,
      bodyCrcFailures: this.reads.bodyCrcFailures,
      compaction: this.compacted.stats(),
    })
  }

  get isClosed(): boolean {
    return this.closed
  }

  private assertOpen(): void {
    if (this.closed) throw new MQStoreError('STORE_CLOSED', 'the store is closed')
  }

  /**
   * Clean shutdown: stops the services, dispatches and flushes everything, writes the checkpoint,
   * persists consumer offsets, removes the abort file and releases the directory lock.
   * Idempotent; concurrent calls share one shutdown.
   */
  close(): Promise<void> {
    if (this.closing === null) this.closing = this.shutdown()
    return this.closing
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  private async shutdown(): Promise<void> {
    this.closed = true
    this.subscriptions.wakeAll()
    try {
      await this.cleanup.stop()
      for (const loop of this.loops) await loop.stop()
      this.statsService.shutdown()
      this.dispatcher.doReput()
      this.dispatcher.stop()
      await this.compacted.close()
      await this.flusher.shutdown()
      await this.commitLog.mappedFileQueue.settle()
      // After a failed sync nothing more is synced or vouched for: the abort file stays, and the
      // next open recovers from what is really on disk.
      const durable = !this.flags.isSet('NOT_WRITEABLE')
      if (durable) {
        this.queues.flushAll()
        this.index.current.flush()
        const logQueue = this.commitLog.mappedFileQueue
        if (logQueue.storeTimestamp > 0) this.checkpoint.physicMsgTimestamp = logQueue.storeTimestamp
        this.checkpoint.flush()
      }
      await this.consumerOffsets.settle()
      this.consumerOffsets.saveAtClose((error) => this.logger('error', `consumer offsets not saved at close: ${error.message}`))
      const clean = durable && this.dispatcher.behindBytes() <= 0 && !this.dispatcher.failed
      if (clean) {
        this.checkpoint.writeShutdownRecord({
          endOffset: this.commitLog.getMaxOffset(),
          lastRecordOffset: this.commitLog.lastRecordOffset,
          ...this.queues.summary(),
        })
      }
      // The files are about to be unmapped: from here on stats() gives the figures at close.
      this.statsAtClose = this.stats()
      this.queues.shutdown()
      this.index.current.shutdown()
      this.commitLog.shutdown()
      this.checkpoint.shutdown()
      this.pool?.destroy()
      if (clean) {
        fs.rmSync(this.paths.abort, { force: true })
        syncDirectory(this.paths.abort)
      }
    } finally {
      this.lock.release()
    }
  }
}

/** How a service's failure is logged: its name and the error's message, at error level. */
function logError(log: StoreLog): (name: string, error: unknown) => void {
  return (name, error) => log('error', `${name}: ${(error as Error)?.message ?? String(error)}`)
}
