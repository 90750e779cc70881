// The facade: open, put, get, query, consume, stats, close. It owns every service and is the only
// place that knows the order in which they start, recover and stop.
import * as fs from 'node:fs'
import * as os from 'node:os'
import { join, resolve } from 'node:path'

import { ioError, MQStoreError } from '../errors.js'
import { native } from '../native.js'
import {
  checkRecord,
  decodeMessage,
  encodeProperties,
  isPrepareFailure,
  prepareRecord,
  SCHEDULE_TOPIC,
  SysFlag,
  tagsCodeOf,
  tagsMatch,
  validateTopic,
  type DecodedMessage,
  type DispatchRequest,
  type HostAddress,
  type PreparedRecord,
} from './commitlog/record.js'
import { CommitLog, PutMessageResult, type CommitLogReader, type PutMessageStatus, type RecoveryOutcome } from './commitlog/commit-log.js'
import { parseHost, resolveConfig, type MessageStoreConfig, type MessageStoreOptions } from './config.js'
import { ConsumeQueue, CQ_STORE_UNIT_SIZE } from './queue/consume-queue.js'
import { ConsumerOffsets } from './consumer-offsets.js'
import { Dispatcher } from './dispatcher.js'
import { CommitLogFlusher } from './flusher.js'
import { IndexService } from './index/index-service.js'
import { syncDirectory } from './mapped/directory.js'
import { ServiceLoop } from './service-loop.js'
import { StoreCheckpoint } from './store-checkpoint.js'
import { StoreStatsService, type StoreStats } from './store-stats.js'
import { TransientStorePool } from './mapped/transient-store-pool.js'

export type { PutMessageStatus } from './commitlog/commit-log.js'
export { PutMessageResult } from './commitlog/commit-log.js'

/** A message to put. Only topic and body are required. */
export interface Message {
  topic: string
  queueId?: number
  body: Uint8Array | string
  tags?: string
  keys?: string | string[]
  properties?: Record<string, string>
  flag?: number
  sysFlag?: number
  bornTimestamp?: number
  bornHost?: string
  reconsumeTimes?: number
  preparedTransactionOffset?: number
}

/** A stored message as returned: RocketMQ MessageExt's fields. */
export type MessageExt = DecodedMessage

export type GetMessageStatus =
  | 'FOUND'
  | 'NO_MATCHED_MESSAGE'
  | 'MESSAGE_WAS_REMOVING'
  | 'OFFSET_FOUND_NULL'
  | 'OFFSET_OVERFLOW_BADLY'
  | 'OFFSET_OVERFLOW_ONE'
  | 'OFFSET_TOO_SMALL'
  | 'NO_MATCHED_LOGIC_QUEUE'
  | 'NO_MESSAGE_IN_QUEUE'

export interface GetMessageResult {
  status: GetMessageStatus
  messages: MessageExt[]
  nextBeginOffset: number
  minOffset: number
  maxOffset: number
  /** Total bytes of the records returned. */
  bufferTotalSize: number
  suggestPullingFromSlave: boolean
}

/** A tag subscription: a list of tags, an expression "a || b", or '*' / undefined for all. */
export type MessageFilter = { tags?: string[] | string } | string[] | string

export interface QueryMessageResult {
  messages: MessageExt[]
  indexLastUpdateTimestamp: number
  indexLastUpdatePhyoffset: number
}

export interface ConsumeOptions {
  group: string
  topic: string
  queueId: number
  /** Where to start: the group's committed offset (default), the queue's min or max, or an offset. */
  from?: 'committed' | 'earliest' | 'latest' | number
  tags?: string[] | string
  signal?: AbortSignal
  /** Commit after every message handed out (default false: call `commit()` yourself). */
  autoCommit?: boolean
  /** Messages fetched per read (default 32). */
  batchSize?: number
}

/** An async iterable over one queue that waits for new messages; see MessageStore.consume. */
export interface Subscription extends AsyncIterable<MessageExt> {
  /** The queue offset after the last message handed out. */
  readonly position: number
  /** Commits `position` (or the given offset) as the group's offset for the queue. */
  commit(offset?: number): void
}

export interface OpenOptions extends MessageStoreOptions {
  /** Called with what the store repaired or noticed at open and while running. */
  logger?: (level: 'info' | 'warn' | 'error', message: string) => void
  /** Called while open() scans the commit log after a crash (about every 64 MiB, and at the end). */
  onProgress?: (progress: { phase: 'recover'; scannedBytes: number; totalBytes: number }) => void
}

const LOCK_FILE = 'lock'
const ABORT_FILE = 'abort'
const CHECKPOINT_FILE = 'checkpoint'
const GROUP_PATTERN = /^[%|a-zA-Z0-9_-]{1,255}$/

export class MessageStore implements AsyncDisposable {
  readonly storePath: string
  readonly config: MessageStoreConfig
  private readonly storeHost: HostAddress
  private readonly bornHost: HostAddress
  private readonly logger: NonNullable<OpenOptions['logger']>
  private readonly lockFd: number
  private readonly commitLog: CommitLog
  private checkpoint!: StoreCheckpoint
  private indexService!: IndexService
  private readonly consumeQueues = new Map<string, Map<number, ConsumeQueue>>()
  private consumerOffsets!: ConsumerOffsets
  private readonly dispatcher: Dispatcher
  private readonly flusher: CommitLogFlusher
  private readonly statsService = new StoreStatsService()
  private pool: TransientStorePool | null = null
  private readonly loops: ServiceLoop[] = []
  private readonly waiters = new Map<string, Set<() => void>>()
  private readonly totalMemory = os.totalmem()
  private lastExitOK = true
  private readonly onProgress: OpenOptions['onProgress'] | null
  private readonly repairs: { action: string; reason: string }[] = []
  private rebuildConsumeQueues = false
  /** True until open() finishes: what recovery finds wrong it can still rebuild. */
  private opening = true
  private readonly gapQueues = new Set<ConsumeQueue>()
  private rebuildIndex = false
  private recovery: RecoveryOutcome | null = null
  private closed = false
  private closing: Promise<void> | null = null
  private lastCqFlushThorough = Date.now()

  private constructor(storePath: string, options: OpenOptions) {
    const { logger, onProgress, ...storeOptions } = options
    this.storePath = storePath
    this.config = resolveConfig(storeOptions)
    this.logger = logger ?? (() => {})
    this.onProgress = onProgress ?? null
    this.storeHost = parseHost(this.config.storeHost)
    this.bornHost = parseHost(this.config.bornHost)
    fs.mkdirSync(storePath, { recursive: true })
    this.lockFd = takeLock(join(storePath, LOCK_FILE))
    try {
      this.commitLog = this.createServices()
    } catch (error) {
      releaseLock(this.lockFd)
      throw error
    }
    const log = (name: string, error: unknown) => this.logger('error', `${name}: ${(error as Error)?.message ?? String(error)}`)
    this.dispatcher = new Dispatcher(this.commitLog, (request) => this.dispatch(request), {
      onSkip: (offset, bytes, reason) =>
        this.logger('error', `dispatch skipped ${bytes} damaged bytes at commit-log offset ${offset}: ${reason}`),
      onFailure: (offset, error) => log(`dispatch stopped at commit-log offset ${offset}; puts are refused until it gets past it`, error ?? 'a consume queue could not be written'),
    })
    this.flusher = new CommitLogFlusher(this.commitLog, this.config, this.checkpoint, () => this.dispatcher.schedule(), log)
  }

  /** Creates the file-backed services; the caller releases the lock if this throws. */
  private createServices(): CommitLog {
    const usePool = this.config.transientStorePoolEnable && this.config.flushDiskType === 'ASYNC_FLUSH'
    this.pool = usePool ? new TransientStorePool(this.config.transientStorePoolSize, this.config.mappedFileSizeCommitLog) : null
    const storePath = this.storePath
    const commitLog = new CommitLog(storePath, this.config, this.storeHost, this.pool)
    this.checkpoint = new StoreCheckpoint(join(storePath, CHECKPOINT_FILE))
    this.indexService = this.createIndexService()
    this.consumerOffsets = new ConsumerOffsets(join(storePath, 'config', 'consumerOffset.json'))
    return commitLog
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
    this.lastExitOK = !fs.existsSync(join(this.storePath, ABORT_FILE))
    this.commitLog.load()
    if (this.checkpoint.recreated && this.commitLog.mappedFileQueue.mappedFiles.length > 0) {
      this.repair('recreated the checkpoint', 'it was missing or not 4096 bytes')
    }
    this.loadConsumeQueues()
    this.loadIndex()
    this.consumerOffsets.load()
    this.recover()
  }

  private createIndexService(): IndexService {
    const service = new IndexService(join(this.storePath, 'index'), {
      maxHashSlotNum: this.config.maxHashSlotNum,
      maxIndexNum: this.config.maxIndexNum,
      messageIndexEnable: this.config.messageIndexEnable,
    })
    service.onRoll = (endTimestamp) => {
      this.checkpoint.indexMsgTimestamp = endTimestamp
      this.checkpoint.flush()
    }
    return service
  }

  /** How many consume queues there are and how many units they hold in all. */
  private queueSummary(): { queueCount: number; queueUnitSum: number } {
    let queueCount = 0
    let queueUnitSum = 0
    for (const queue of this.allConsumeQueues()) {
      queueCount++
      queueUnitSum += queue.getMaxOffsetInQueue()
    }
    return { queueCount, queueUnitSum }
  }

  /** Records a repair: kept for stats() and told to the logger. */
  private repair(action: string, reason: string): void {
    this.repairs.push({ action, reason })
    this.logger('warn', `${action}: ${reason}`)
  }

  /**
   * The index is derived data: files that fail their checks are deleted and rebuilt from the
   * commit log. After an abnormal exit, files newer than the checkpoint are dropped (RocketMQ).
   */
  private loadIndex(): void {
    try {
      this.indexService.load(this.lastExitOK, this.checkpoint.indexMsgTimestamp)
    } catch (error) {
      this.indexService.shutdown()
      fs.rmSync(join(this.storePath, 'index'), { recursive: true, force: true })
      this.indexService = this.createIndexService()
      this.rebuildIndex = true
      this.repair('deleted the index to rebuild it', (error as Error).message)
    }
  }

  private loadConsumeQueues(): void {
    const root = join(this.storePath, 'consumequeue')
    let topics: string[] = []
    try {
      topics = fs.readdirSync(root)
    } catch {
      return
    }
    for (const topic of topics) {
      if (validateTopic(topic) !== null) continue
      for (const name of fs.readdirSync(join(root, topic))) {
        if (!/^\d{1,10}$/.test(name)) continue
        const queue = this.createConsumeQueue(topic, Number(name))
        try {
          queue.load()
        } catch (error) {
          this.discardConsumeQueue(queue, (error as Error).message)
        }
      }
    }
  }

  /** Deletes a consume queue that cannot be trusted; dispatch rebuilds it from the commit log. */
  private discardConsumeQueue(queue: ConsumeQueue, reason: string): void {
    queue.shutdown()
    fs.rmSync(join(this.storePath, 'consumequeue', queue.topic, String(queue.queueId)), { recursive: true, force: true })
    this.consumeQueues.get(queue.topic)?.delete(queue.queueId)
    this.rebuildConsumeQueues = true
    this.repair(`deleted consume queue ${queue.topic}/${queue.queueId} to rebuild it`, reason)
  }

  private createConsumeQueue(topic: string, queueId: number): ConsumeQueue {
    let queues = this.consumeQueues.get(topic)
    if (queues === undefined) {
      queues = new Map()
      this.consumeQueues.set(topic, queues)
    }
    let queue = queues.get(queueId)
    if (queue === undefined) {
      queue = new ConsumeQueue(topic, queueId, join(this.storePath, 'consumequeue'), this.config.mappedFileSizeConsumeQueue, this.commitLog)
      queues.set(queueId, queue)
    }
    return queue
  }

  private findConsumeQueue(topic: string, queueId: number): ConsumeQueue | null {
    return this.consumeQueues.get(topic)?.get(queueId) ?? null
  }

  private *allConsumeQueues(): Generator<ConsumeQueue> {
    for (const queues of this.consumeQueues.values()) yield* queues.values()
  }

  /** The open-time decisions of docs/recovery.md, in order. */
  private recover(): void {
    // A valid shutdown record means a clean close flushed every queue: find their ends by
    // bisection. Without one (or when a queue does not look clean), scan as RocketMQ does.
    const record = this.lastExitOK ? this.checkpoint.readShutdownRecord() : null
    let maxPhyOffsetOfConsumeQueue = -1
    for (const queue of this.allConsumeQueues()) {
      if (record === null || !queue.recoverClean()) queue.recover()
      maxPhyOffsetOfConsumeQueue = Math.max(maxPhyOffsetOfConsumeQueue, queue.getMaxPhysicOffset())
    }
    if (this.commitLog.mappedFileQueue.mappedFiles.length === 0) {
      // No commit log: nothing a consume queue or the index points to exists.
      if (this.consumeQueues.size > 0) this.repair('deleted every consume queue', 'the commit log has no files')
      for (const queue of this.allConsumeQueues()) queue.destroy()
      this.consumeQueues.clear()
      this.recovery = this.commitLog.recoverNormally()
      return
    }
    const progress = this.onProgress === null ? null : (scanned: number, total: number) =>
      this.onProgress?.({ phase: 'recover', scannedBytes: scanned, totalBytes: total })
    let outcome: RecoveryOutcome | null = null
    if (this.lastExitOK) {
      if (record !== null) {
        outcome = this.commitLog.recoverFromShutdownRecord(record.endOffset, record.lastRecordOffset)
        if (outcome === null) {
          this.repair('scanned the commit log tail', 'the shutdown record does not match the files')
          maxPhyOffsetOfConsumeQueue = -1
          for (const queue of this.allConsumeQueues()) {
            queue.recover()
            maxPhyOffsetOfConsumeQueue = Math.max(maxPhyOffsetOfConsumeQueue, queue.getMaxPhysicOffset())
          }
        }
        const now = this.queueSummary()
        if (now.queueCount !== record.queueCount || now.queueUnitSum !== record.queueUnitSum) {
          // A queue lost files or units since the clean close: dispatch everything again (replays
          // are no-ops), which rebuilds what is missing.
          this.rebuildConsumeQueues = true
          this.repair(
            're-dispatching the whole commit log',
            `the consume queues hold ${now.queueUnitSum} units in ${now.queueCount} queues; the last clean close left ${record.queueUnitSum} in ${record.queueCount}`,
          )
        }
      }
      outcome ??= this.commitLog.recoverNormally(progress)
    } else {
      // The scan rebuilds consume-queue tails only: the index is filled afterwards, in order, from
      // where it ends (an index only grows in commit-log order, so indexing the scan's records
      // first would make it skip the older ones it lost).
      outcome = this.commitLog.recoverAbnormally(this.minRecoveryTimestamp(), (request) => void this.dispatch(request, false), progress)
    }
    this.recovery = outcome
    const damage = outcome.damage
    if (damage !== null) {
      const where = `commit-log bytes [${damage.offset}, ${damage.offset + damage.length})`
      if (damage.kind === 'corrupt' && this.config.corruptionPolicy === 'strict') {
        throw new MQStoreError(
          'CORRUPTION',
          `${where} fail their checks (${damage.reason}) and data follows them; ` +
            `refusing to open (corruptionPolicy 'strict'). Run mqstore verify, or open with corruptionPolicy 'tolerant' to truncate there.`,
        )
      }
      this.repair(`truncated the commit log at ${damage.offset}`, `${damage.kind === 'torn' ? 'a torn write' : 'corruption'} at ${where}: ${damage.reason}`)
    }
    this.commitLog.truncateTo(outcome.processOffset)
    // Only units that end past the log need cutting (RocketMQ also rescans when one ends exactly there).
    if (maxPhyOffsetOfConsumeQueue > outcome.processOffset || !this.lastExitOK) {
      for (const queue of this.allConsumeQueues()) queue.truncateDirtyLogicFiles(outcome.processOffset)
    }
    this.checkDerivedFiles(outcome.processOffset)
    this.recoverTopicQueueTable()
  }

  /**
   * Cheap checks of the derived files against the recovered commit log: each consume queue's last
   * unit must point at a record of that queue with that queue offset, and no index file may end
   * past the log. What fails is deleted and rebuilt by dispatch.
   */
  private checkDerivedFiles(commitLogEnd: number): void {
    const minOffset = this.commitLog.getMinOffset()
    for (const queue of [...this.allConsumeQueues()]) {
      const max = queue.getMaxOffsetInQueue()
      if (max === 0 || max - 1 < queue.getMinOffsetInQueue()) continue
      const units = queue.getIndexBuffer(max - 1)
      if (units === null) continue
      const phy = ConsumeQueue.readOffset(units.buffer, 0)
      const size = ConsumeQueue.readSize(units.buffer, 0)
      units.release()
      if (phy < minOffset) continue
      const record = this.commitLog.getMessage(phy, size)
      const request = record === null ? null : checkRecord(record.buffer, 0, size, false)
      record?.release()
      const fits =
        request !== null &&
        request.status === 'OK' &&
        request.size === size &&
        request.topic === queue.topic &&
        request.queueId === queue.queueId &&
        request.queueOffset === max - 1
      if (!fits) this.discardConsumeQueue(queue, `its last unit (queue offset ${max - 1}) does not match the commit log`)
    }
    const files = this.indexService.getFiles()
    const last = files.length > 0 ? files[files.length - 1] : null
    if (last !== null && last.getEndPhyOffset() >= commitLogEnd && last.getIndexCount() > 1) {
      this.indexService.destroy()
      fs.rmSync(join(this.storePath, 'index'), { recursive: true, force: true })
      this.indexService = this.createIndexService()
      this.rebuildIndex = true
      this.repair('deleted the index to rebuild it', `it indexes records at or past the end of the commit log (${commitLogEnd})`)
    }
  }

  private minRecoveryTimestamp(): number {
    return this.config.messageIndexEnable && this.config.messageIndexSafe
      ? this.checkpoint.getMinTimestampIndex()
      : this.checkpoint.getMinTimestamp()
  }

  private recoverTopicQueueTable(): void {
    const table = this.commitLog.topicQueueTable
    table.clear()
    const minPhy = this.commitLog.getMinOffset()
    for (const queue of this.allConsumeQueues()) {
      table.set(queue.topic, queue.queueId, queue.getMaxOffsetInQueue())
      queue.correctMinOffset(minPhy)
    }
  }

  private start(): void {
    const minOffset = Math.max(0, this.commitLog.getMinOffset())
    let reputFrom = minOffset
    for (const queue of this.allConsumeQueues()) reputFrom = Math.max(reputFrom, queue.getMaxPhysicOffset())
    // The index may end earlier than the consume queues (after an abnormal exit its newer files
    // are dropped): dispatch again from its end. Consume-queue writes of replayed records are no-ops.
    if (this.config.messageIndexEnable) {
      const files = this.indexService.getFiles()
      const indexEnd = files.length === 0 ? minOffset : files[files.length - 1].getEndPhyOffset()
      reputFrom = Math.min(reputFrom, Math.max(minOffset, indexEnd))
    }
    if (this.rebuildConsumeQueues || this.rebuildIndex) reputFrom = minOffset
    this.dispatcher.reputFromOffset = reputFrom
    this.dispatcher.doReput()
    if (this.gapQueues.size > 0) {
      for (const queue of this.gapQueues) {
        this.discardConsumeQueue(queue, 'records of the queue follow units it does not have (a lost tail)')
      }
      this.gapQueues.clear()
      this.dispatcher.reputFromOffset = minOffset
      this.dispatcher.doReput()
    }
    this.opening = false
    this.recoverTopicQueueTable()
    // Consume-queue files whose units all point below the commit log's first file are
    // unreachable (the cleaner deletes them while running; a store may have been closed before).
    const minPhy = this.commitLog.getMinOffset()
    if (minPhy > 0) for (const queue of this.allConsumeQueues()) queue.deleteExpiredFile(minPhy)

    // From here on the store changes: a crash must not find a shutdown record that vouches for it.
    this.checkpoint.clearShutdownRecord()
    fs.writeFileSync(join(this.storePath, ABORT_FILE), '')
    syncDirectory(join(this.storePath, ABORT_FILE))

    this.flusher.start()
    this.statsService.start()
    const onError = (name: string, error: unknown) =>
      this.logger('error', `${name}: ${(error as Error)?.message ?? String(error)}`)
    this.loops.push(
      new ServiceLoop('flush-consume-queue', this.config.flushIntervalConsumeQueue, () => this.flushConsumeQueues(), onError),
      new ServiceLoop('persist-consumer-offsets', this.config.flushConsumerOffsetInterval, () => this.consumerOffsets.persist(), onError),
    )
    for (const loop of this.loops) loop.start()
  }

  /** Releases what the constructor and a failed load took, without flushing anything. */
  private abandon(): void {
    this.closed = true
    this.dispatcher.stop()
    try {
      for (const queue of this.allConsumeQueues()) queue.shutdown()
      this.indexService.shutdown()
      this.commitLog.shutdown()
      this.checkpoint.shutdown()
    } finally {
      releaseLock(this.lockFd)
    }
  }

  // ---- dispatch -----------------------------------------------------------------------------

  /** Writes a record's consume-queue unit and index entries; false when the unit could not be written. */
  private dispatch(request: DispatchRequest, index = true): boolean {
    const buildIndex = index && this.config.messageIndexEnable
    const tranType = request.sysFlag & SysFlag.TRANSACTION_MASK
    if (tranType === SysFlag.TRANSACTION_NOT_TYPE || tranType === SysFlag.TRANSACTION_COMMIT) {
      const queue = this.findConsumeQueue(request.topic, request.queueId) ?? this.createConsumeQueue(request.topic, request.queueId)
      const max = queue.getMaxOffsetInQueue()
      if (max > 0 && request.queueOffset > max) {
        // The queue is missing units before this record (lost with a consume-queue tail): writing
        // this unit now would put it at the wrong queue offset. Open rebuilds such queues.
        if (this.opening) this.gapQueues.add(queue)
        else this.logger('error', `consume queue ${queue.topic}/${queue.queueId} misses units ${max}..${request.queueOffset - 1}`)
        if (buildIndex) this.indexService.buildIndex(request)
        return true
      }
      if (!queue.putMessagePositionInfo(request.commitLogOffset, request.size, request.tagsCode, request.queueOffset)) {
        return false
      }
      this.checkpoint.logicsMsgTimestamp = request.storeTimestamp
      if (this.waiters.size > 0) this.notifyArrival(request.topic, request.queueId)
    }
    if (buildIndex) this.indexService.buildIndex(request)
    return true
  }

  private notifyArrival(topic: string, queueId: number): void {
    const key = `${topic}-${queueId}`
    const set = this.waiters.get(key)
    if (set === undefined) return
    this.waiters.delete(key)
    for (const wake of set) wake()
  }

  private async flushConsumeQueues(): Promise<void> {
    let leastPages = this.config.flushConsumeQueueLeastPages
    const now = Date.now()
    const thorough = now >= this.lastCqFlushThorough + this.config.flushConsumeQueueThoroughInterval
    let logicsMsgTimestamp = 0
    if (thorough) {
      this.lastCqFlushThorough = now
      leastPages = 0
      logicsMsgTimestamp = this.checkpoint.logicsMsgTimestamp
    }
    for (const queue of [...this.allConsumeQueues()]) await queue.flushAsync(leastPages)
    if (thorough) {
      if (logicsMsgTimestamp > 0) this.checkpoint.logicsMsgTimestamp = logicsMsgTimestamp
      this.checkpoint.flush()
    }
  }

  // ---- put ----------------------------------------------------------------------------------

  /** Puts are refused when closed, and while dispatch is stuck on a record it cannot index. */
  private checkWritable(): PutMessageStatus | null {
    if (this.closed) return 'SERVICE_NOT_AVAILABLE'
    if (this.dispatcher.failed) {
      this.dispatcher.doReput()
      if (this.dispatcher.failed) return 'SERVICE_NOT_AVAILABLE'
    }
    return null
  }

  private buildRecord(message: Message, now: number) {
    if (message === null || typeof message !== 'object') throw new TypeError('message must be an object')
    const { topic, body } = message
    if (typeof topic !== 'string') throw new TypeError('message.topic must be a string')
    const queueId = message.queueId ?? 0
    if (!Number.isSafeInteger(queueId) || queueId < 0 || queueId > 0x7fffffff) {
      throw new RangeError('message.queueId must be an integer from 0 to 2^31-1')
    }
    let bodyBytes: Uint8Array
    if (typeof body === 'string') bodyBytes = Buffer.from(body, 'utf8')
    else if (body instanceof Uint8Array) bodyBytes = body
    else throw new TypeError('message.body must be a Uint8Array or a string')
    const { tags, keys } = message
    if (tags !== undefined && typeof tags !== 'string') throw new TypeError('message.tags must be a string')
    let keysString: string | undefined
    if (typeof keys === 'string') keysString = keys
    else if (keys !== undefined) {
      if (!Array.isArray(keys) || keys.some((k) => typeof k !== 'string')) {
        throw new TypeError('message.keys must be a string or an array of strings')
      }
      keysString = keys.join(' ')
    }
    let propertiesString: string
    try {
      // The common message carries only TAGS and KEYS: skip building a properties object for it.
      propertiesString =
        message.properties === undefined
          ? encodeTagsAndKeys(tags, keysString)
          : encodeProperties(withTagsAndKeys(message.properties, tags, keysString))
    } catch (error) {
      return { status: 'MESSAGE_ILLEGAL' as const, reason: (error as Error).message }
    }
    return prepareRecord(
      {
        topic,
        queueId,
        body: bodyBytes,
        flag: message.flag ?? 0,
        sysFlag: message.sysFlag ?? 0,
        bornTimestamp: message.bornTimestamp ?? now,
        bornHost: message.bornHost === undefined ? this.bornHost : parseHost(message.bornHost, 'bornHost'),
        storeHost: this.storeHost,
        reconsumeTimes: message.reconsumeTimes ?? 0,
        preparedTransactionOffset: message.preparedTransactionOffset ?? 0,
        propertiesString,
      },
      this.config.maxMessageSize,
    )
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
    if (unavailable !== null) return messages.map(() => new PutMessageResult(unavailable))
    const results: PutMessageResult[] = new Array(messages.length)
    // Encode (and so validate) every message first: a TypeError for one message must not leave
    // the earlier ones stored behind the caller's back.
    const now = Date.now()
    const records = messages.map((message) => this.buildRecord(message, now))
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
        results[i] = new PutMessageResult(record.status)
        this.statsService.putMessageFailedTimes++
        continue
      }
      let result: PutMessageResult
      try {
        result = this.commitLog.append(record, now)
      } catch (error) {
        this.logger('error', `append failed: ${(error as Error).message}`)
        result = new PutMessageResult('UNKNOWN_ERROR')
      }
      results[i] = result
      if (!result.isOk()) {
        this.statsService.putMessageFailedTimes++
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
        if (status !== 'PUT_OK') for (const r of results) if (r.status === 'PUT_OK') r.status = status
      } else {
        this.flusher.wakeup()
      }
      this.statsService.recordPut(appended, bytes, Date.now() - began)
    }
    return results
  }

  /** Builds the dispatch request of a record just appended and hands it to the dispatcher. */
  private dispatchAppended(message: Message, record: PreparedRecord, result: PutMessageResult): boolean {
    // The schedule topic's tagsCode is a delivery time that only the record parser computes.
    if (record.topic === SCHEDULE_TOPIC) return false
    const { properties } = message
    const keys = message.keys === undefined ? properties?.KEYS : typeof message.keys === 'string' ? message.keys : message.keys.join(' ')
    const tags = message.tags ?? properties?.TAGS
    const request: DispatchRequest = {
      status: 'OK',
      size: result.wroteBytes,
      topic: record.topic,
      queueId: record.queueId,
      queueOffset: result.queueOffset,
      commitLogOffset: result.wroteOffset,
      sysFlag: record.sysFlag,
      bornTimestamp: message.bornTimestamp ?? result.storeTimestamp,
      storeTimestamp: result.storeTimestamp,
      preparedTransactionOffset: message.preparedTransactionOffset ?? 0,
      tagsCode: tagsCodeOf(tags),
      keys: keys === '' ? undefined : keys,
      uniqKey: properties?.UNIQ_KEY === '' ? undefined : properties?.UNIQ_KEY,
      bodyCRC: record.bodyCRC,
    }
    return this.dispatcher.dispatchAppended(request, result.wroteOffset, this.commitLog.lastBlankOffset)
  }

  // ---- get ----------------------------------------------------------------------------------

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
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError('offset must be a non-negative integer')
    if (!Number.isSafeInteger(maxMsgNums) || maxMsgNums < 1) throw new RangeError('maxMsgNums must be a positive integer')
    const began = Date.now()
    this.catchUp()
    const tags = filterTags(filter)
    const result = this.readQueue(topic, queueId, offset, maxMsgNums, tags)
    this.statsService.recordGet(result.messages.length, Date.now() - began)
    return result
  }

  private readQueue(topic: string, queueId: number, offset: number, maxMsgNums: number, tags: string[] | undefined): GetMessageResult {
    const result: GetMessageResult = {
      status: 'NO_MESSAGE_IN_QUEUE',
      messages: [],
      nextBeginOffset: offset,
      minOffset: 0,
      maxOffset: 0,
      bufferTotalSize: 0,
      suggestPullingFromSlave: false,
    }
    const queue = this.findConsumeQueue(topic, queueId)
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

  private collect(queue: ConsumeQueue, offset: number, maxMsgNums: number, tags: string[] | undefined, result: GetMessageResult): void {
    const units = queue.getIndexBuffer(offset)
    if (units === null) {
      result.status = 'OFFSET_FOUND_NULL'
      result.nextBeginOffset = queue.rollNextFile(offset)
      return
    }
    const maxPhy = this.commitLog.getMaxOffset()
    const memoryLimit = (this.totalMemory * this.config.accessMessageInMemoryMaxRatio) / 100
    const copyBody = this.config.copyMessageBody
    result.status = 'NO_MATCHED_MESSAGE'
    let skipUntil = -1
    let consumed = 0
    let lastPhy = 0
    const reader = this.commitLog.openReader()
    try {
      const view = units.buffer
      const limit = Math.min(units.size, Math.max(16_000, maxMsgNums * CQ_STORE_UNIT_SIZE))
      for (let i = 0; i + CQ_STORE_UNIT_SIZE <= limit; i += CQ_STORE_UNIT_SIZE) {
        const phy = ConsumeQueue.readOffset(view, i)
        const size = ConsumeQueue.readSize(view, i)
        const tagsCode = ConsumeQueue.readTagsCode(view, i)
        lastPhy = phy
        if (skipUntil >= 0 && phy < skipUntil) {
          consumed++
          continue
        }
        const inDisk = maxPhy - phy > memoryLimit
        if (this.isTheBatchFull(size, maxMsgNums, result, inDisk)) break
        consumed++
        if (!tagsMatch(tags, tagsCode)) continue
        const at = reader.locate(phy, size)
        if (at < 0) {
          if (result.messages.length === 0) result.status = 'MESSAGE_WAS_REMOVING'
          skipUntil = this.commitLog.rollNextFile(phy)
          continue
        }
        const message = decodeMessage(reader.data, at, copyBody)
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
    result.suggestPullingFromSlave = maxPhy - lastPhy > memoryLimit
  }

  private isTheBatchFull(size: number, maxMsgNums: number, result: GetMessageResult, inDisk: boolean): boolean {
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
    this.assertOpen()
    if (!Number.isSafeInteger(commitLogOffset) || commitLogOffset < 0) return null
    this.catchUp()
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
    return at < 0 ? null : decodeMessage(reader.data, at, this.config.copyMessageBody)
  }

  /**
   * Messages of `topic` with `key` (in KEYS or as UNIQ_KEY) stored between `begin` and `end` (ms),
   * newest index files first, at most min(maxNum, maxMsgsNumBatch). Hash collisions are filtered
   * out by comparing the keys of each message found.
   */
  queryMessage(topic: string, key: string, maxNum: number, begin: number, end: number): QueryMessageResult {
    this.assertOpen()
    if (typeof topic !== 'string' || typeof key !== 'string') throw new TypeError('topic and key must be strings')
    if (!Number.isSafeInteger(maxNum) || maxNum < 1) throw new RangeError('maxNum must be a positive integer')
    this.catchUp()
    // Ask the index for a full batch: other keys with the same hash are filtered out below, and
    // must not use up maxNum. The newest matches are kept, returned in commit-log order.
    const found = this.indexService.queryOffset(topic, key, this.config.maxMsgsNumBatch, begin, end)
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

  getMinOffsetInQueue(topic: string, queueId: number): number {
    this.assertOpen()
    this.catchUp()
    return this.findConsumeQueue(topic, queueId)?.getMinOffsetInQueue() ?? 0
  }

  getMaxOffsetInQueue(topic: string, queueId: number): number {
    this.assertOpen()
    this.catchUp()
    return this.findConsumeQueue(topic, queueId)?.getMaxOffsetInQueue() ?? 0
  }

  getMessageTotalInQueue(topic: string, queueId: number): number {
    this.assertOpen()
    this.catchUp()
    return this.findConsumeQueue(topic, queueId)?.getMessageTotalInQueue() ?? 0
  }

  /** The queue offset whose message's store time is nearest to `timestamp` (0 for an unknown queue). */
  getOffsetInQueueByTime(topic: string, queueId: number, timestamp: number): number {
    this.assertOpen()
    this.catchUp()
    return this.findConsumeQueue(topic, queueId)?.getOffsetInQueueByTime(timestamp) ?? 0
  }

  /** The commit-log offset of the message at `consumeQueueOffset`, 0 when unreadable. */
  getCommitLogOffsetInQueue(topic: string, queueId: number, consumeQueueOffset: number): number {
    this.assertOpen()
    this.catchUp()
    const unit = this.readUnit(topic, queueId, consumeQueueOffset)
    return unit === null ? 0 : unit.offset
  }

  private readUnit(topic: string, queueId: number, consumeQueueOffset: number): { offset: number; size: number } | null {
    const queue = this.findConsumeQueue(topic, queueId)
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
    this.assertOpen()
    this.catchUp()
    const unit = this.readUnit(topic, queueId, consumeQueueOffset)
    return unit === null ? -1 : this.commitLog.pickupStoreTimestamp(unit.offset, unit.size)
  }

  /**
   * Store time of the earliest message: of one queue when topic and queueId are given, else of
   * the whole commit log. -1 when there is none.
   */
  getEarliestMessageTime(topic?: string, queueId?: number): number {
    this.assertOpen()
    this.catchUp()
    if (topic !== undefined && queueId !== undefined) {
      const queue = this.findConsumeQueue(topic, queueId)
      if (queue === null) return -1
      return this.getMessageStoreTimeStamp(topic, queueId, queue.getMinOffsetInQueue())
    }
    const min = this.commitLog.getMinOffset()
    if (min < 0) return -1
    const message = this.lookMessageByOffset(min)
    return message === null ? -1 : message.storeTimestamp
  }

  getMinPhyOffset(): number {
    return this.commitLog.getMinOffset()
  }

  getMaxPhyOffset(): number {
    return this.commitLog.getMaxOffset()
  }

  // ---- consumer offsets ---------------------------------------------------------------------

  commitOffset(group: string, topic: string, queueId: number, offset: number): void {
    this.assertOpen()
    checkName(group, 'group')
    checkQueue(topic, queueId)
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError('offset must be a non-negative integer')
    this.consumerOffsets.commitOffset(group, topic, queueId, offset)
  }

  /** The group's committed offset for the queue, -1 when it never committed one. */
  queryOffset(group: string, topic: string, queueId: number): number {
    this.assertOpen()
    checkName(group, 'group')
    checkQueue(topic, queueId)
    return this.consumerOffsets.queryOffset(group, topic, queueId)
  }

  // ---- consume ------------------------------------------------------------------------------

  /**
   * Tails one queue: yields every message from `from` on, then waits for new ones (woken by
   * dispatch, no polling) until `signal` aborts or the store closes; the iteration then ends.
   */
  consume(options: ConsumeOptions): Subscription {
    this.assertOpen()
    const { group, topic, queueId, signal } = options
    checkName(group, 'group')
    checkQueue(topic, queueId)
    const batchSize = options.batchSize ?? 32
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError('batchSize must be a positive integer')
    const from = options.from ?? 'committed'
    const tags = filterTags(options.tags === undefined ? undefined : { tags: options.tags })
    const store = this
    const stopped = () => store.closed || signal?.aborted === true
    let position = this.startOffset(group, topic, queueId, from)
    const subscription: Subscription = {
      get position() {
        return position
      },
      commit(offset?: number) {
        store.commitOffset(group, topic, queueId, offset ?? position)
      },
      async *[Symbol.asyncIterator]() {
        while (!stopped()) {
          store.catchUp()
          const result = store.readQueue(topic, queueId, position, batchSize, tags)
          if (result.status === 'FOUND') {
            for (const message of result.messages) {
              position = message.queueOffset + 1
              if (options.autoCommit === true) store.consumerOffsets.commitOffset(group, topic, queueId, position)
              yield message
              if (stopped()) return
            }
            position = Math.max(position, result.nextBeginOffset)
            continue
          }
          if (result.nextBeginOffset !== position && result.status !== 'NO_MESSAGE_IN_QUEUE') {
            position = result.nextBeginOffset
            continue
          }
          await store.waitForArrival(topic, queueId, signal)
        }
      },
    }
    return subscription
  }

  private startOffset(group: string, topic: string, queueId: number, from: ConsumeOptions['from']): number {
    this.catchUp()
    const queue = this.findConsumeQueue(topic, queueId)
    const min = queue?.getMinOffsetInQueue() ?? 0
    const max = queue?.getMaxOffsetInQueue() ?? 0
    if (typeof from === 'number') {
      if (!Number.isSafeInteger(from) || from < 0) throw new RangeError('from must be a non-negative integer')
      return from
    }
    if (from === 'earliest') return min
    if (from === 'latest') return max
    if (from !== 'committed') throw new TypeError(`from must be 'committed', 'earliest', 'latest' or an offset`)
    const committed = this.consumerOffsets.queryOffset(group, topic, queueId)
    return committed >= 0 ? committed : min
  }

  private waitForArrival(topic: string, queueId: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      if (this.closed || signal?.aborted === true) return resolve()
      const key = `${topic}-${queueId}`
      let set = this.waiters.get(key)
      if (set === undefined) {
        set = new Set()
        this.waiters.set(key, set)
      }
      const wake = () => {
        signal?.removeEventListener('abort', onAbort)
        resolve()
      }
      const onAbort = () => {
        this.waiters.get(key)?.delete(wake)
        resolve()
      }
      set.add(wake)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  // ---- stats and close ----------------------------------------------------------------------

  stats(): StoreStats & {
    commitLogMinOffset: number
    commitLogMaxOffset: number
    commitLogFlushedOffset: number
    dispatchBehindBytes: number
    lastExitOK: boolean
    recovery: RecoveryOutcome | null
    repairs: { action: string; reason: string }[]
    consumeQueueCount: number
    indexFileCount: number
  } {
    let consumeQueueCount = 0
    for (const queues of this.consumeQueues.values()) consumeQueueCount += queues.size
    return {
      ...this.statsService.snapshot(),
      commitLogMinOffset: this.commitLog.getMinOffset(),
      commitLogMaxOffset: this.commitLog.getMaxOffset(),
      commitLogFlushedOffset: this.commitLog.mappedFileQueue.flushedWhere,
      dispatchBehindBytes: this.dispatcher.behindBytes(),
      lastExitOK: this.lastExitOK,
      recovery: this.recovery,
      repairs: [...this.repairs],
      consumeQueueCount,
      indexFileCount: this.indexService.getFileCount(),
    }
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
    for (const set of this.waiters.values()) for (const wake of set) wake()
    this.waiters.clear()
    try {
      for (const loop of this.loops) await loop.stop()
      this.statsService.shutdown()
      this.dispatcher.doReput()
      this.dispatcher.stop()
      await this.flusher.shutdown()
      await this.commitLog.mappedFileQueue.settle()
      for (const queue of this.allConsumeQueues()) for (let i = 0; i < 3 && !queue.flush(0); i++);
      this.indexService.flush()
      const queue = this.commitLog.mappedFileQueue
      if (queue.storeTimestamp > 0) this.checkpoint.physicMsgTimestamp = queue.storeTimestamp
      this.checkpoint.flush()
      this.consumerOffsets.persist(true)
      const clean = this.dispatcher.behindBytes() <= 0 && !this.dispatcher.failed
      if (clean) {
        this.checkpoint.writeShutdownRecord({
          endOffset: this.commitLog.getMaxOffset(),
          lastRecordOffset: this.commitLog.lastRecordOffset,
          ...this.queueSummary(),
        })
      }
      for (const consumeQueue of this.allConsumeQueues()) consumeQueue.shutdown()
      this.indexService.shutdown()
      this.commitLog.shutdown()
      this.checkpoint.shutdown()
      this.pool?.destroy()
      if (clean) {
        fs.rmSync(join(this.storePath, ABORT_FILE), { force: true })
        syncDirectory(join(this.storePath, ABORT_FILE))
      }
    } finally {
      releaseLock(this.lockFd)
    }
  }
}

function takeLock(path: string): number {
  let fd: number
  try {
    fd = fs.openSync(path, 'a+')
  } catch (cause) {
    throw ioError(`cannot open the lock file ${path}`, cause)
  }
  try {
    native.lockFile(fd)
  } catch (cause) {
    fs.closeSync(fd)
    const code = (cause as NodeJS.ErrnoException).code
    if (code === 'EAGAIN' || code === 'EWOULDBLOCK') {
      throw new MQStoreError('LOCKED', `the store at ${path.slice(0, -LOCK_FILE.length - 1)} is locked by another process`, { cause })
    }
    throw ioError(`cannot lock ${path}`, cause)
  }
  if (fs.fstatSync(fd).size === 0) fs.writeSync(fd, 'lock')
  return fd
}

function releaseLock(fd: number): void {
  try {
    native.unlockFile(fd)
  } catch {
    // closing the descriptor releases the lock anyway
  }
  fs.closeSync(fd)
}

function checkName(name: string, what: string): void {
  if (typeof name !== 'string' || !GROUP_PATTERN.test(name)) {
    throw new TypeError(`${what} must be 1 to 255 characters of [%|a-zA-Z0-9_-], got ${JSON.stringify(name)}`)
  }
}

function checkQueue(topic: string, queueId: number): void {
  if (typeof topic !== 'string') throw new TypeError('topic must be a string')
  const invalid = validateTopic(topic)
  if (invalid !== null) throw new TypeError(`invalid topic ${JSON.stringify(topic)}: ${invalid}`)
  if (!Number.isSafeInteger(queueId) || queueId < 0 || queueId > 0x7fffffff) {
    throw new RangeError('queueId must be an integer from 0 to 2^31-1')
  }
}

const SEPARATORS = /[\u0000\u0001\u0002]/

function withTagsAndKeys(
  properties: Record<string, string>,
  tags: string | undefined,
  keys: string | undefined,
): Record<string, string | undefined> {
  const all: Record<string, string | undefined> = { ...properties }
  if (tags !== undefined) all.TAGS = tags
  if (keys !== undefined) all.KEYS = keys
  return all
}

/** encodeProperties({ TAGS: tags, KEYS: keys }) without the object. */
function encodeTagsAndKeys(tags: string | undefined, keys: string | undefined): string {
  if ((tags !== undefined && SEPARATORS.test(tags)) || (keys !== undefined && SEPARATORS.test(keys))) {
    return encodeProperties({ TAGS: tags, KEYS: keys }) // throws the precise error
  }
  const tagsPart = tags === undefined || tags === '' ? '' : `TAGS\u0001${tags}`
  const keysPart = keys === undefined || keys === '' ? '' : `KEYS\u0001${keys}`
  return tagsPart === '' ? keysPart : keysPart === '' ? tagsPart : `${tagsPart}\u0002${keysPart}`
}

/** Normalises a filter to a list of tags, or undefined for "everything". */
function filterTags(filter: MessageFilter | undefined): string[] | undefined {
  if (filter === undefined || filter === null) return undefined
  let tags: string[] | string | undefined
  if (typeof filter === 'string' || Array.isArray(filter)) tags = filter
  else tags = filter.tags
  if (tags === undefined) return undefined
  const list = (typeof tags === 'string' ? tags.split('||') : tags).map((t) => t.trim()).filter((t) => t !== '')
  if (list.length === 0 || list.includes('*')) return undefined
  return list
}
