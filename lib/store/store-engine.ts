// The store's engine: every service, wired together, and the order in which they load, recover,
// start and stop. The facade (message-store.ts) checks callers' input and runs puts and reads on it.
import * as fs from 'node:fs'
import { CleanupService } from './cleanup/cleanup-service.js'
import { CommitLog, type RecoveryOutcome } from './commitlog/commit-log.js'
import type { DispatchRequest, HostAddress } from './commitlog/record.js'
import { parseHost, resolveConfig, type MessageStoreConfig } from './config.js'
import { ConsumerOffsets } from './consumer-offsets.js'
import { DispatchTargets, RecordDispatch } from './dispatch-targets.js'
import { Dispatcher } from './dispatcher.js'
import { defaultEnvironment, type StoreEnvironment } from './environment.js'
import { CommitLogFlusher } from './flusher.js'
import { CompactedTopics } from './compaction/compacted-topics.js'
import { IndexSlot } from './index/index-slot.js'
import { syncDirectory } from './mapped/directory.js'
import { MappingBudget } from './mapped/mapping-budget.js'
import { TransientStorePool } from './mapped/transient-store-pool.js'
import { checkCommitOptions, checkOffset, type RecordDefaults } from './message-validation.js'
import type { ConsumeQueue } from './queue/consume-queue.js'
import { ConsumeQueueTable } from './queue/queue-table.js'
import { TopicRouter } from './topics/topic-router.js'
import { ReadService } from './read/read-service.js'
import { Subscriptions } from './read/subscriptions.js'
import { syncCommitLogAhead, syncRecoveredFiles } from './recovery/crash-sync.js'
import { recoverStore, replayDerivedFiles } from './recovery/store-recovery.js'
import { abortFileContent, crashedInThisBoot } from './recovery/boot-identity.js'
import { RunningFlags } from './running-flags.js'
import { RetryCounts } from './retry/retry-stats.js'
import { DelayLevels } from './schedule/delay-level-table.js'
import { dueTimeCorrection } from './schedule/delay-levels.js'
import { ScheduleService } from './schedule/schedule-service.js'
import { OverdueFlushes } from './overdue-flushes.js'
import { ServiceLoop } from './service-loop.js'
import { maxFrameBytesFor } from './sharing/frame.js'
import { ArrivalsFile } from './sharing/arrivals-file.js'
import { ForwardingServer } from './sharing/forwarding-server.js'
import { HaService } from './ha/ha-service.js'
import { splitHaOptions } from './ha/ha-options.js'
import { closeStore } from './store-close.js'
import { StoreCheckpoint } from './store-checkpoint.js'
import { StoreLock } from './store-lock.js'
import { createStoreLog, type StoreLog } from './store-logger.js'
import { StorePaths } from './store-paths.js'
import { resolveStoreSizes } from './store-sizes.js'
import { StoreStatsService } from './store-stats.js'
import { storeFigures } from './store-figures.js'
import type { Message, MessageStoreStats, OpenOptions, Repair } from './types.js'
import type { PutMessageResult } from './commitlog/commit-log.js'

/**
 * Everything a store runs: the services, wired together, and the order in which they load,
 * recover, start and stop. MessageStore is the public face over it (checks, the put and read
 * paths); nothing else holds an engine.
 */
export class StoreEngine {
  readonly storePath: string
  readonly config: MessageStoreConfig
  readonly paths: StorePaths
  readonly env: StoreEnvironment
  readonly recordDefaults: RecordDefaults
  readonly logger: StoreLog
  /** Child loggers of the services that log the most (pino: `{ component }` bindings). */
  readonly recoveryLog: StoreLog
  readonly cleanupLog: StoreLog
  readonly lock: StoreLock
  readonly pool: TransientStorePool | null
  readonly commitLog: CommitLog
  readonly checkpoint: StoreCheckpoint
  readonly index: IndexSlot
  readonly queues: ConsumeQueueTable
  readonly consumerOffsets: ConsumerOffsets
  readonly targets: DispatchTargets
  readonly dispatcher: Dispatcher
  readonly flusher: CommitLogFlusher
  readonly reads: ReadService
  readonly subscriptions: Subscriptions
  readonly compacted: CompactedTopics
  readonly router: TopicRouter
  readonly statsService = new StoreStatsService()
  readonly loops: ServiceLoop[] = []
  /** The flush passes reads run when their timers are overdue (from start on). */
  private overdue: OverdueFlushes | null = null
  /** RocketMQ's RunningFlags: puts are refused while any write-blocking flag is set. */
  readonly flags: RunningFlags
  readonly cleanup: CleanupService
  readonly schedule: ScheduleService
  readonly retries = new RetryCounts()
  cleanLoop: ServiceLoop | null = null
  /** Where the last clean close had dispatched everything to (from its shutdown record), or null. */
  dispatchedTo: number | null = null
  lastExitOK = true
  readonly onProgress: OpenOptions['onProgress'] | null
  readonly repairs: Repair[] = []
  /** Set when open finds derived files to rebuild: dispatch then starts at the log's beginning. */
  rebuild = false
  recovery: RecoveryOutcome | null = null
  /** After a crash: the commit-log write-back started before the scan (crash-sync.ts), or null. */
  logSyncAhead: Promise<Error | null> | null = null
  /** After a crash: where the synced range starts (RecoveryResult.syncFrom). */
  private crashSyncFrom: number | null = null
  /**
   * After a crash, whether the scan's records also go to the index: only when the index ends at
   * or after the scan's first record (else the records between would be skipped for good); null
   * until the first record.
   */
  private indexInScan: boolean | null = null
  /** A schedule unit's due time under the store's delay levels (the parser assumes RocketMQ's). */
  private readonly dueTimes: (request: DispatchRequest) => DispatchRequest
  closed = false
  statsAtClose: MessageStoreStats | null = null
  closing: Promise<void> | null = null
  /** The socket producers in other processes forward puts through (shareWrites), or null. */
  sharing: ForwardingServer | null = null
  /** Replication: the role, a master's HA port and SYNC_MASTER waits, or a slave's link (ha/). */
  readonly ha: HaService
  /** Touched after dispatch passes that wrote units: wakes readers in other processes. */
  readonly arrivals: ArrivalsFile

  constructor(storePath: string, options: OpenOptions) {
    const {
      logger,
      onProgress,
      clock,
      diskUsage,
      topics,
      compaction,
      shareWrites: _shareWrites,
      readOnly: _writer,
      ...allOptions
    } = options
    const { ha, rest: storeOptions } = splitHaOptions(allOptions)
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
    let budget: MappingBudget
    try {
      // One budget of mapped bytes for the files mapped on first use: consume-queue and index
      // files, commit-log files other than the one being written, sealed compaction-log files.
      budget = new MappingBudget({
        maxBytes: this.config.mappingBudgetBytes,
        idleMs: this.config.mappingIdleMs,
        clock: () => this.env.clock.now(),
      })
      // File sizes are the store's own (store-sizes.ts), not the options'.
      Object.assign(this.config, resolveStoreSizes(this.paths, this.config, storeOptions))
      const usePool = this.config.transientStorePoolEnable && this.config.flushDiskType === 'ASYNC_FLUSH'
      this.pool = usePool ? new TransientStorePool(this.config.transientStorePoolSize, this.config.mappedFileSizeCommitLog) : null
      this.commitLog = new CommitLog(storePath, this.config, storeHost as HostAddress, this.pool, false, budget)
      this.checkpoint = new StoreCheckpoint(this.paths.checkpoint, false, this.paths.queueEnds)
      const { maxHashSlotNum, maxIndexNum, messageIndexEnable } = this.config
      const indexOptions = { maxHashSlotNum, maxIndexNum, messageIndexEnable, budget, markPath: this.paths.indexMark }
      this.index = new IndexSlot(this.paths.index, indexOptions, (endTimestamp) => {
        this.checkpoint.indexMsgTimestamp = endTimestamp
        this.checkpoint.flush()
      })
      this.consumerOffsets = new ConsumerOffsets(this.paths.consumerOffsets)
    } catch (error) {
      this.lock.release()
      throw error
    }
    this.queues = new ConsumeQueueTable(this.paths, this.config.mappedFileSizeConsumeQueue, this.commitLog, this.env.clock.now(), budget)
    this.reads = new ReadService({
      commitLog: this.commitLog,
      queues: this.queues,
      index: this.index,
      config: this.config,
      onBadBody: (offset) => this.logger('error', `read skipped the record at commit-log offset ${offset}: its body fails its CRC`),
    })
    this.compacted = new CompactedTopics(
      {
        topicsFile: this.paths.topics,
        compactionDir: this.paths.compaction,
        clock: this.env.clock,
        config: this.config,
        commitLog: this.commitLog,
        queues: this.queues,
        log: this.logger,
        repair: (action, reason) => this.repair(action, reason),
      },
      compaction,
      topics,
    )
    this.router = new TopicRouter(this.compacted.table)
    this.subscriptions = new Subscriptions({
      read: this.compacted.subscriptionReads(this.reads),
      queues: this.queues,
      offsets: this.consumerOffsets,
      catchUp: () => this.catchUp(),
      isClosed: () => this.closed,
      commit: (group, topic, queueId, offset, options) => {
        checkOffset(offset)
        return this.commit(group, topic, queueId, offset, checkCommitOptions(options))
      },
    })
    const dispatchLog = this.logger.child('dispatch')
    this.arrivals = new ArrivalsFile(this.paths.arrivals, (message) => dispatchLog('warn', message))
    this.targets = new DispatchTargets({
      config: this.config,
      queues: this.queues,
      index: this.index,
      checkpoint: this.checkpoint,
      subscriptions: this.subscriptions,
      arrivals: this.arrivals,
      log: (message) => dispatchLog('error', message),
    })
    const levels = new DelayLevels(this.config.messageDelayLevel)
    this.schedule = new ScheduleService({
      levels,
      queues: this.queues,
      lookMessage: (offset) => this.reads.lookMessageByOffset(offset),
      commitLogMinOffset: () => this.commitLog.getMinOffset(),
      commitLogMaxOffset: () => this.commitLog.getMaxOffset(),
      commitLogFlushedOffset: () => this.commitLog.mappedFileQueue.flushedWhere,
      catchUp: () => this.catchUp(),
      clock: this.env.clock,
      log: this.logger.child('schedule'),
      repair: (action, reason) => this.repair(action, reason),
      path: this.paths.delayOffsets,
      flushDelayOffsetInterval: this.config.flushDelayOffsetInterval,
      timer: {
        root: storePath,
        configDir: this.paths.config,
        precisionMs: this.config.timerPrecisionMs,
        logFileSize: this.config.mappedFileSizeTimerLog,
        findByKey: (topic, key) => this.reads.queryMessage(topic, key, 32, 0, Number.MAX_SAFE_INTEGER).messages,
      },
    })
    this.dueTimes = dueTimeCorrection(levels)
    const dispatch = new RecordDispatch(this.targets, levels.isDefault ? null : this.dueTimes, this.compacted)
    this.dispatcher = new Dispatcher(this.commitLog, dispatch, {
      onSkip: (offset, bytes, reason) => {
        this.statsService.dispatchSkippedRanges++
        this.statsService.dispatchSkippedBytes += bytes
        dispatchLog('error', `dispatch skipped ${bytes} damaged bytes at commit-log offset ${offset}: ${reason}`)
      },
      onFailure: (offset, error) =>
        logError(dispatchLog)(
          `dispatch stopped at commit-log offset ${offset}; puts are refused until it gets past it`,
          error ?? 'a consume queue could not be written',
        ),
    })
    this.flags = new RunningFlags(
      () => this.env.clock.now(),
      (name, set, reason) => this.logger(set ? 'warn' : 'info', `running flag ${name} ${set ? 'set' : 'cleared'}: ${reason}`),
    )
    this.flusher = new CommitLogFlusher(
      this.commitLog,
      this.config,
      this.checkpoint,
      this.flags,
      () => (this.commitLog.staged ? this.dispatcher.dispatchStaged() : this.dispatcher.schedule()),
      logError(this.logger.child('flush')),
      this.statsService,
    )
    const dispatchSoon = () => this.dispatcher.schedule()
    this.ha = new HaService(ha, this.commitLog, this.logger.child('ha'), this.config.syncFlushTimeout, dispatchSoon, this.paths.haRole)
    this.dispatcher.holdIncompleteTail = ha.brokerRole === 'SLAVE'
    this.cleanup = new CleanupService(
      {
        commitLog: this.commitLog,
        // A copy: a pass may pause between queues while puts create new ones. Cleanup asks only
        // when the commit log lost files, and then every queue must follow, deferred ones too.
        consumeQueues: () => this.queues.allOpening(),
        indexService: () => this.index.current,
        dispatchedOffset: () => this.dispatcher.reputFromOffset,
        commitLogPath: this.paths.commitLog,
        consumeQueuePath: this.paths.consumeQueues,
        // On the calling thread: rare (only passes that delete), and a pass then sees no interleaving.
        syncDerived: () => {
          this.queues.flushAll()
          this.compacted.flush()
        },
      },
      this.config,
      this.env,
      this.flags,
      this.cleanupLog,
    )
  }

  // ---- start-up -----------------------------------------------------------------------------

  load(): void {
    this.lastExitOK = !fs.existsSync(this.paths.abort)
    const afterProcessCrash = !this.lastExitOK && crashedInThisBoot(this.paths.abort)
    this.commitLog.load()
    if (this.checkpoint.recreated && this.commitLog.mappedFileQueue.mappedFiles.length > 0) {
      this.repair('recreated the checkpoint', 'it was missing or not 4096 bytes')
    }
    // Listed only: recovery opens them now, or on first use after a clean close.
    this.queues.list()
    this.commitLog.topicQueueTable.missing = (topic, queueId) => this.queues.find(topic, queueId)?.getMaxOffsetInQueue() ?? 0
    const indexFailure = this.index.load(this.lastExitOK, this.checkpoint.indexMsgTimestamp, afterProcessCrash)
    // After the index's load, which may delete files: an unlink waits behind the write-back's
    // journal commits (a second instead of milliseconds for a 1 GiB log all dirty).
    if (!this.lastExitOK) this.logSyncAhead = syncCommitLogAhead(this.commitLog.mappedFileQueue.mappedFiles.map((file) => file.fileName))
    if (indexFailure !== null) {
      this.rebuild = true
      this.repair('deleted the index to rebuild it', indexFailure)
    }
    this.consumerOffsets.load()
    this.schedule.load()
    this.compacted.load(!this.lastExitOK)
    const progress =
      this.onProgress === null
        ? null
        : (scanned: number, total: number) => this.onProgress?.({ phase: 'recover', scannedBytes: scanned, totalBytes: total })
    const { outcome, redispatchAll, dispatchedTo, syncFrom } = recoverStore({
      config: this.config,
      commitLog: this.commitLog,
      queues: this.queues,
      checkpoint: this.checkpoint,
      lastExitOK: this.lastExitOK,
      afterProcessCrash,
      index: () => this.index.current,
      repair: (action, reason) => this.repair(action, reason),
      discardQueue: (queue, reason) => this.discardConsumeQueue(queue, reason),
      discardIndex: (reason) => this.discardIndex(reason),
      dispatchRecovered: (request) => {
        this.indexInScan ??= this.indexEndsBy(request.commitLogOffset)
        this.targets.dispatch(this.dueTimes(request), this.indexInScan)
        this.compacted.dispatch(request)
      },
      progress,
    })
    this.recovery = outcome
    this.crashSyncFrom = syncFrom
    if (redispatchAll) this.rebuild = true
    this.dispatchedTo = dispatchedTo
  }

  /**
   * True when the index holds every record before `offset` (its end is at or past it), so the
   * crash scan starting there may index its records in the same pass: the index grows only in
   * commit-log order and skips what is below its end, so the replay then has nothing left to add.
   */
  private indexEndsBy(offset: number): boolean {
    if (!this.config.messageIndexEnable) return false
    const files = this.index.current.getFiles()
    const end = files.length === 0 ? Math.max(0, this.commitLog.getMinOffset()) : files[files.length - 1].getEndPhyOffset()
    return end >= offset
  }

  /**
   * Between load() and start() after a crash: what recovery kept may be in the page cache only,
   * and is synced before open returns (crash-sync.ts). Nothing to do after a clean close.
   */
  async syncAfterCrash(): Promise<void> {
    await this.index.deletionsDone()
    const outcome = this.recovery
    if (this.lastExitOK || outcome === null) return
    const startedMs = Date.now()
    const ahead = this.logSyncAhead === null ? null : await this.logSyncAhead
    if (ahead !== null) throw ahead
    // From the file the checkpoint names, also when the scan started later (after a crash of this boot).
    const scanStart = Math.min(outcome.processOffset - outcome.scannedBytes, this.crashSyncFrom ?? Number.POSITIVE_INFINITY)
    const figures = await syncRecoveredFiles({ paths: this.paths, commitLog: this.commitLog, queues: this.queues, scanStart })
    this.recoveryLog(
      'info',
      `synced what the recovery kept from the page cache in ${Date.now() - startedMs} ms: ${figures.commitLogFiles} commit-log files from offset ${scanStart}, ` +
        `${figures.consumeQueueFiles} consume-queue files, ${figures.otherFiles} other files, ${figures.directories} folders`,
    )
  }

  /** Records a repair: kept for stats() and told to the logger. */
  repair(action: string, reason: string): void {
    this.repairs.push({ action, reason })
    this.recoveryLog('warn', `${action}: ${reason}`)
  }

  /** Deletes the index so that dispatch rebuilds it. */
  discardIndex(reason: string): void {
    this.index.discard(true)
    this.rebuild = true
    this.repair('deleted the index to rebuild it', reason)
  }

  /** Deletes a consume queue that cannot be trusted; dispatch rebuilds it from the commit log. */
  discardConsumeQueue(queue: ConsumeQueue, reason: string): void {
    this.checkpoint.withdrawLogics()
    this.queues.discard(queue)
    this.rebuild = true
    this.repair(`deleted consume queue ${queue.topic}/${queue.queueId} to rebuild it`, reason)
  }

  start(): void {
    // No bulk index pass here (IndexService.beginBulk): a failed dispatch is retried one record at a time.
    const replay = replayDerivedFiles({
      dispatchedTo: this.dispatchedTo,
      commitLog: this.commitLog,
      queues: this.queues,
      dispatcher: this.dispatcher,
      targets: this.targets,
      indexFiles: this.config.messageIndexEnable ? this.index.current.getFiles() : null,
      rebuild: this.rebuild,
      discardQueue: (queue, reason) => this.discardConsumeQueue(queue, reason),
    })
    this.recoveryLog(
      'info',
      `open dispatched ${replay.records} records from commit-log offset ${replay.from} into the consume queues and the index`,
    )

    // The folders the puts write into, made now where missing: the root's sync below makes their
    // entries durable with the abort file's, where each one's first file would pay a directory
    // sync on the put path (about 3 ms on ext4).
    this.paths.makeWriterFolders(this.config.messageIndexEnable)
    // A new store's first put finds its index file made (index-file-ahead.ts).
    this.index.current.makeFileAhead()

    // From here on the store changes: a crash must not find a shutdown record that vouches for it.
    this.checkpoint.clearShutdownRecord()
    fs.writeFileSync(this.paths.abort, abortFileContent())
    syncDirectory(this.paths.abort)

    this.flusher.start()
    this.statsService.start()
    const onError = logError(this.logger)
    const flushLoops = [
      new ServiceLoop(
        'flush-consume-queue',
        this.config.flushIntervalConsumeQueue,
        () => this.flushConsumeQueues(),
        logError(this.logger.child('flush')),
      ),
      new ServiceLoop('flush-compaction-logs', this.config.flushIntervalConsumeQueue, () => this.compacted.flushAsync(), onError),
    ]
    this.overdue = new OverdueFlushes(this.flusher, flushLoops)
    this.loops.push(
      ...flushLoops,
      new ServiceLoop('persist-consumer-offsets', this.config.flushConsumerOffsetInterval, () => this.consumerOffsets.persist(), onError),
    )
    this.cleanLoop = new ServiceLoop(
      'clean-resource',
      this.config.cleanResourceInterval,
      async () => {
        await this.cleanup.runPass()
      },
      logError(this.cleanupLog),
    )
    this.loops.push(this.cleanLoop)
    // Read the disk now: a store opened on a full disk refuses puts from the start.
    this.cleanup.checkDisk()
    for (const loop of this.loops) loop.start()
    this.compacted.start()
  }

  /** Listens for producers in other processes (shareWrites); their puts run through `put`. */
  async shareWrites(put: (messages: Message[]) => Promise<PutMessageResult[]>): Promise<void> {
    this.sharing = await ForwardingServer.listen({
      socketPath: this.paths.shareSocket,
      maxFrameBytes: maxFrameBytesFor(this.config.maxMessageSize),
      storeHost: this.recordDefaults.storeHost,
      put,
      log: this.logger.child('sharing'),
    })
  }

  /** Releases what the constructor and a failed load took, without flushing anything. */
  abandon(): void {
    this.closed = true
    this.dispatcher.stop()
    void this.compacted.close()
    this.arrivals.close()
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
  async flushConsumeQueues(): Promise<void> {
    if (this.flags.isSet('NOT_WRITEABLE')) return
    try {
      const closing = () => this.closing !== null
      // The index file being written too, so that a close after a burst has little left to sync; beside
      // the queues' syncs, since a pass a burst of reads runs (catchUp) starts nothing after its first wait.
      const index = this.config.messageIndexEnable && !closing() ? this.index.current.flushCurrentAsync() : null
      await Promise.all([this.queues.flushAsync(this.config, this.checkpoint, this.env.clock.now(), closing), index])
    } catch (error) {
      // As with the commit log (flusher.ts): a retried sync could succeed over lost pages.
      this.flags.set(
        'NOT_WRITEABLE',
        `a consume-queue, index or checkpoint sync failed (${(error as Error)?.message ?? String(error)}); reopen the store to recover`,
      )
      throw error
    }
  }

  /**
   * Why puts are refused now, or null: the store is closed, a running flag blocks writes (a full
   * disk, a failed sync), or dispatch is stuck on a record it cannot index.
   */
  checkWritable(): string | null {
    if (this.closed) return 'the store is closed'
    const role = this.ha.refusesPuts()
    if (role !== null) return role
    const blocked = this.flags.writeBlockedReason()
    if (blocked !== null) return blocked
    if (this.dispatcher.failed) {
      this.dispatcher.doReput()
      if (this.dispatcher.failed) return this.dispatcher.failureReason
    }
    return null
  }

  /** Dispatches what the log holds beyond the consume queues, so that a read sees every put. */
  catchUp(): void {
    if (this.dispatcher.reputFromOffset < this.commitLog.getMaxOffset()) this.dispatcher.doReput()
    this.overdue?.tick()
  }

  /** The store's figures, documented field by field in docs/api.md; after close, those at close. */
  stats(): MessageStoreStats {
    return this.statsAtClose !== null ? structuredClone(this.statsAtClose) : storeFigures(this)
  }

  /** The clean shutdown close() runs (see MessageStore.close). */
  async shutdown(): Promise<void> {
    // Forwarded puts already received are answered before the store stops taking puts.
    await this.sharing?.close()
    await this.ha.close()
    this.closed = true
    this.subscriptions.wakeAll()
    await this.schedule.stop()
    const { cleanup, loops, statsService, dispatcher, compacted, flusher, commitLog, queues } = this
    const { index, checkpoint, consumerOffsets, flags, pool, paths, lock, logger } = this
    const takeFigures = (): void => void (this.statsAtClose = this.stats())
    // Closed whatever a failed step throws: close leaves no descriptor behind.
    try {
      await closeStore({
        cleanup,
        loops,
        statsService,
        dispatcher,
        compacted,
        flusher,
        commitLog,
        queues,
        index,
        checkpoint,
        consumerOffsets,
        flags,
        pool,
        paths,
        lock,
        logger,
        takeFigures,
        schedule: this.schedule,
      })
    } finally {
      this.arrivals.close()
    }
  }

  /** Commits a consumer offset (arguments already checked); with `durable`, resolves once it is on disk. */
  commit(group: string, topic: string, queueId: number, offset: number, durable: boolean): Promise<void> {
    this.consumerOffsets.commitOffset(group, topic, queueId, offset)
    if (!durable) return Promise.resolve()
    return this.consumerOffsets.persistDurable((error) => this.logger('error', `durable offset commit failed: ${error.message}`))
  }
}

/** How a service's failure is logged: its name and the error's message, at error level. */
function logError(log: StoreLog): (name: string, error: unknown) => void {
  return (name, error) => log('error', `${name}: ${(error as Error)?.message ?? String(error)}`)
}
