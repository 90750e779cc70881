// What the facade needs of compacted topics, in one place: the topic table (policies), admission
// of puts (a compacted topic takes keyed messages only), dispatch into the compaction logs, the
// read path of compacted queues (removed offsets skipped; min / max / time from the compacted
// files), policy changes at run time, and the consistency of the logs with the consume queues
// after a crash (truncate what the commit log lost, copy in what the logs missed).
import { MQStoreError } from '../../errors.js'
import type { CommitLog } from '../commitlog/commit-log.js'
import {
  checkRecord,
  isPrepareFailure,
  OFFSET_PHYSICALOFFSET,
  SysFlag,
  type DispatchRequest,
  type PrepareFailure,
  type PreparedRecord,
} from '../commitlog/record.js'
import { DataViewCache, readInt64BE } from '../bytes.js'
import { keysString } from '../message-validation.js'
import type { MessageStoreConfig } from '../config.js'
import type { Clock } from '../environment.js'
import { ConsumeQueue, CQ_STORE_UNIT_SIZE } from '../queue/consume-queue.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import { hasCompact, TopicTable, type TopicConfig, type TopicConfigInput } from '../topics/topic-table.js'
import type { GetMessageResult, Message, MessageExt } from '../types.js'
import type { ReadService } from '../read/read-service.js'
import type { SubscriptionDeps } from '../read/subscriptions.js'
import { ReadBatch, type BatchOutcome } from '../read/read-batch.js'
import { emptyQueuePlace, placeFor, type QueuePlace } from '../read/record-identity.js'
import type { SelectMappedBufferResult } from '../mapped/mapped-file-types.js'
import type { SegmentLease } from './segment.js'
import { CompactedRead } from './compacted-read.js'

export type { CompactReport } from './compaction-service.js'
export type { TopicConfig, TopicConfigInput } from '../topics/topic-table.js'
import { CompactionService, type CleanerStats, type CompactionOptions, type CompactReport } from './compaction-service.js'

export interface CompactedTopicsDeps {
  topicsFile: string
  compactionDir: string
  clock: Clock
  config: MessageStoreConfig
  commitLog: CommitLog
  queues: ConsumeQueueTable
  log: (level: 'info' | 'warn' | 'error', message: string) => void
  /** Records a repair of damaged files (stats().repairs). */
  repair: (action: string, reason: string) => void
}

export interface SetTopicConfigOptions {
  /** Make a topic compacted even though it holds messages without a key (they are never compacted in). */
  force?: boolean
}

export class CompactedTopics {
  readonly table: TopicTable
  readonly service: CompactionService
  private readonly deps: CompactedTopicsDeps
  /** Topics whose policy holds compact, kept as a set: dispatch asks for every record. */
  private readonly compacted = new Set<string>()

  /** Settings given at open (options.topics), applied over the saved ones by load(). */
  private readonly initial: Record<string, unknown> | undefined
  // Reads: the batch their records are copied with, the place they must name, views of the files.
  private batch: ReadBatch | null = null
  private read: CompactedRead | null = null
  private readonly place: QueuePlace = emptyQueuePlace()
  private readonly positions = new UnitPositions()
  private readonly views = new DataViewCache()

  constructor(deps: CompactedTopicsDeps, options: CompactionOptions | undefined, initial?: Record<string, unknown>) {
    this.deps = deps
    this.initial = initial
    this.table = new TopicTable(deps.topicsFile, deps.clock)
    this.service = new CompactionService(deps.compactionDir, deps.clock, (topic) => this.table.get(topic), options, deps.queues.budget)
    this.service.durableCommitLogOffset = () => deps.commitLog.mappedFileQueue.flushedWhere
    this.service.onError = (topic, queueId, error) =>
      deps.log('error', `compaction of ${topic}/${queueId}: ${(error as Error)?.message ?? String(error)}`)
  }

  /**
   * Loads the table, applies `options.topics` over it, and opens the compaction logs (`afterCrash`:
   * the store was not closed cleanly).
   */
  load(afterCrash = false): void {
    const initial = this.initial
    this.table.load()
    if (initial !== undefined) {
      if (initial === null || typeof initial !== 'object')
        throw new MQStoreError('INVALID_OPTION', 'topics must be an object of topic settings')
      for (const [topic, input] of Object.entries(initial)) this.table.set(topic, input)
    }
    for (const topic of this.table.topics()) if (hasCompact(this.table.get(topic).cleanupPolicy)) this.compacted.add(topic)
    this.service.open(afterCrash)
    for (const { topic, queueId, report } of this.service.openReports) {
      // A rewrite a crash interrupted is finished (or undone) by the open: nothing is lost, but
      // an operator who finds files gone or renamed should be able to tell why.
      if (report.rolledForward.length > 0 || report.removed.length > 0) {
        const forward = report.rolledForward.length > 0 ? `; rolled forward ${report.rolledForward.join(', ')}` : ''
        const removed = report.removed.length > 0 ? `; removed ${report.removed.join(', ')}` : ''
        this.deps.log('info', `compaction log ${topic}/${queueId}: recovered a rewrite a crash interrupted${forward}${removed}`)
      }
      for (const cut of report.cutShort) {
        const what = `compaction log ${topic}/${queueId}: dropped what follows byte ${cut.position} of ${cut.file}`
        // The active file's tail may be a record a crash tore; a sealed file was whole once.
        if (cut.sealed) this.deps.repair(what, 'not a record there: the file is damaged')
        else this.deps.log('warn', `${what} (not a record there: torn by a crash, or damaged)`)
      }
    }
    // Logs of a topic that left compaction while the store was closed (options.topics) are stale.
    for (const topic of new Set(this.service.queues().map((q) => q.topic))) {
      if (!this.compacted.has(topic)) {
        this.deps.log('warn', `topic ${topic} is no longer compacted: deleted its compaction logs`)
        this.service.dropTopicAtOpen(topic)
      }
    }
  }

  /**
   * After recovery and replay: each compacted queue's log is cut back to its consume queue's end
   * (the commit log lost the rest) and filled in from it where it lags (its own tail was lost).
   */
  reconcile(): void {
    for (const topic of this.compacted) {
      for (const queueId of this.queueIds(topic)) {
        const queue = this.deps.queues.find(topic, queueId)
        const end = queue?.getMaxOffsetInQueue() ?? 0
        const log = this.service.logOf(topic, queueId)
        const cut = log !== undefined && log.nextOffset > end ? this.firstLostOffset(topic, queueId, end) : -1
        if (log !== undefined && cut >= 0) {
          this.deps.log(
            'warn',
            `compaction log ${topic}/${queueId}: dropped offsets ${cut}..${log.nextOffset - 1} the commit log no longer holds`,
          )
          this.service.truncateAtOpen(topic, queueId, cut)
        }
        this.backfill(topic, queueId)
        // Every offset the queue handed out is below the log's end, kept there or not (keyless
        // records, records compacted away before a cut): the files name only what they hold.
        this.service.coverTo(topic, queueId, end)
        // Offsets the log still holds are never handed out again, even when the consume queue
        // ends before them (rebuilt after damage from a log that retention had already shortened).
        const next = this.service.maxOffset(topic, queueId)
        const table = this.deps.commitLog.topicQueueTable
        if (next > table.get(topic, queueId)) table.set(topic, queueId, next)
      }
    }
  }

  /**
   * The first offset at or past `end` (the consume queue's end) whose copy the commit log lost:
   * its record lies in the log's range but the queue has no unit for it (a truncated tail). Copies
   * of records below the log's start were removed by retention, not lost: they are the only copy
   * left, and a consume queue rebuilt after that cannot vouch for them. -1 when none is lost.
   */
  private firstLostOffset(topic: string, queueId: number, end: number): number {
    const logStart = this.deps.commitLog.getMinOffset()
    let lost = -1
    let kept = false
    this.service.read(topic, queueId, end, (data, position, _size, queueOffset) => {
      if (queueOffset < end) return true
      if (readInt64BE(data, position + OFFSET_PHYSICALOFFSET) < logStart) {
        kept = true
        return true
      }
      // With nothing kept before it, the offsets from `end` on go (those between were compacted away).
      lost = kept ? queueOffset : end
      return false
    })
    return lost
  }

  private queueIds(topic: string): number[] {
    const ids = new Set<number>()
    for (const q of this.service.queues(topic)) ids.add(q.queueId)
    for (const q of this.deps.queues.queuesOf(topic)) ids.add(q.queueId)
    return [...ids].sort((a, b) => a - b)
  }

  /** Copies into the queue's log every record its consume queue has beyond the log's end. */
  private backfill(topic: string, queueId: number): number {
    const queue = this.deps.queues.find(topic, queueId)
    if (queue === null) return 0
    let offset = Math.max(this.service.maxOffset(topic, queueId), queue.getMinOffsetInQueue())
    const end = queue.getMaxOffsetInQueue()
    let copied = 0
    const reader = this.deps.commitLog.openReader()
    try {
      while (offset < end) {
        const units = queue.getIndexBuffer(offset)
        if (units === null) break
        try {
          for (let i = 0; i + CQ_STORE_UNIT_SIZE <= units.size && offset < end; i += CQ_STORE_UNIT_SIZE, offset++) {
            const at = reader.locate(ConsumeQueue.readOffset(units.buffer, i), ConsumeQueue.readSize(units.buffer, i))
            if (at < 0) continue
            const request = checkRecord(reader.data, at, at + ConsumeQueue.readSize(units.buffer, i), false)
            if (request.status !== 'OK') continue
            this.service.dispatch(request, reader.data.subarray(at, at + request.size))
            copied++
          }
        } finally {
          units.release()
        }
      }
    } finally {
      reader.close()
    }
    return copied
  }

  isCompacted(topic: string): boolean {
    return this.compacted.has(topic)
  }

  /**
   * A put to a compacted topic needs a non-empty key (the whole KEYS property is the compaction
   * key): the record as built, or MESSAGE_ILLEGAL.
   */
  admit<R extends PreparedRecord | PrepareFailure>(message: Message, record: R): R | PrepareFailure {
    // Most stores compact no topic: no lookup for each record then.
    if (isPrepareFailure(record) || this.compacted.size === 0 || !this.compacted.has(record.topic)) return record
    const keys = keysString(message.keys) ?? message.properties?.KEYS
    if (keys !== undefined && keys.trim() !== '') return record
    return { status: 'MESSAGE_ILLEGAL', reason: `topic ${record.topic} is compacted: a message needs a key` }
  }

  /** Dispatch stage: copies a record of a compacted topic into its queue's log. */
  dispatch(request: DispatchRequest): boolean {
    if (this.compacted.size === 0 || !this.compacted.has(request.topic)) return true
    // Like the consume queue: prepared and rolled-back transactional records are not messages yet.
    const tranType = request.sysFlag & SysFlag.TRANSACTION_MASK
    if (tranType !== SysFlag.TRANSACTION_NOT_TYPE && tranType !== SysFlag.TRANSACTION_COMMIT) return true
    const view = this.deps.commitLog.getMessage(request.commitLogOffset, request.size)
    if (view === null) return false
    try {
      this.service.dispatch(request, view.buffer)
    } finally {
      view.release()
    }
    return true
  }

  // ---- reads --------------------------------------------------------------------------------

  /**
   * getMessage of a compacted queue, or null for other topics. A removed offset (or one below the
   * minimum) is served from the next survivor; nextBeginOffset follows the last record returned.
   */
  readQueue(topic: string, queueId: number, offset: number, maxMsgNums: number, tags: string[] | undefined): GetMessageResult | null {
    if (!this.compacted.has(topic)) return null
    const min = this.service.minOffset(topic, queueId)
    const max = this.service.maxOffset(topic, queueId)
    const result: { -readonly [K in keyof GetMessageResult]: GetMessageResult[K] } & { messages: MessageExt[] } = {
      status: 'NO_MESSAGE_IN_QUEUE',
      messages: [],
      nextBeginOffset: offset,
      minOffset: min,
      maxOffset: max,
      bufferTotalSize: 0,
      suggestPullingFromSlave: false,
      bodyCrcFailures: 0,
    }
    if (max === 0) {
      result.nextBeginOffset = 0
      return result
    }
    if (offset === max) {
      result.status = 'OFFSET_OVERFLOW_ONE'
      return result
    }
    if (offset > max) {
      result.status = 'OFFSET_OVERFLOW_BADLY'
      result.nextBeginOffset = max
      return result
    }
    result.status = 'NO_MATCHED_MESSAGE'
    // Always a copy, as the commit log's default reads make (read/read-batch.ts): a compaction log is
    // a shared writable mapping, which a consumer must not reach (copyMessageBody: false applies to
    // commit-log reads only). The files read stay held until the copies are made.
    const read = this.compactedRead()
    placeFor(this.place, topic, queueId)
    const held: SegmentLease[] = []
    const positions = this.positions
    positions.begin(this.deps.queues.find(topic, queueId), this.deps.commitLog.getMaxOffset())
    let outcome: BatchOutcome
    try {
      read.begin(offset, { maxMsgNums, maxBytes: this.deps.config.maxTransferBytesOnMessageInMemory, tags })
      this.service.read(
        topic,
        queueId,
        offset,
        (data, position, size, queueOffset, tagsCode) => read.visit(data, this.views.of(data), position, size, queueOffset, tagsCode),
        held,
      )
      outcome = read.finish()
    } finally {
      positions.end()
      for (const lease of held) lease.release()
      // Nothing of a file is kept past the read.
      this.views.clear()
    }
    for (const phy of outcome.badBodies) {
      this.deps.log('error', `compacted read skipped ${topic}/${queueId} the copy of commit-log offset ${phy}: its body fails its CRC`)
    }
    result.bodyCrcFailures = outcome.badBodies.length
    result.messages = outcome.messages
    result.bufferTotalSize = outcome.bytes
    if (outcome.messages.length > 0) result.status = 'FOUND'
    // Nothing at or after the offset survives (only keyless offsets were there): skip to the end.
    result.nextBeginOffset = read.next === offset && result.messages.length === 0 ? max : read.next
    return result
  }

  /** The batch compacted reads copy their records with (made on the first read). */
  private readBatch(): ReadBatch {
    this.batch ??= new ReadBatch({ zeroCopy: false, verify: this.deps.config.checkCRCOnRead })
    return this.batch
  }

  /** What a compacted read takes of the copies it visits (made on the first read). */
  private compactedRead(): CompactedRead {
    this.read ??= new CompactedRead(
      this.readBatch(),
      this.place,
      (phy, queueOffset) => this.positions.holds(phy, queueOffset),
      (queueOffset) =>
        this.deps.log(
          'error',
          `compacted read skipped ${this.place.topic}/${this.place.queueId} offset ${queueOffset}: its record's header is damaged`,
        ),
    )
    return this.read
  }

  /** What subscriptions read through: compacted queues here, the others from `reads`. */
  subscriptionReads(reads: Pick<ReadService, 'readQueue'>): SubscriptionDeps['read'] {
    return {
      readQueue: (topic, queueId, offset, maxMsgNums, tags, pull) =>
        this.readQueue(topic, queueId, offset, maxMsgNums, tags) ?? reads.readQueue(topic, queueId, offset, maxMsgNums, tags, pull),
      bounds: (topic, queueId) =>
        this.compacted.has(topic) ? { min: this.minOffset(topic, queueId), max: this.maxOffset(topic, queueId) } : null,
    }
  }

  minOffset(topic: string, queueId: number): number {
    return this.service.minOffset(topic, queueId)
  }

  maxOffset(topic: string, queueId: number): number {
    return this.service.maxOffset(topic, queueId)
  }

  offsetByTime(topic: string, queueId: number, timestamp: number): number {
    return this.service.offsetByTime(topic, queueId, timestamp)
  }

  storeTimeAt(topic: string, queueId: number, queueOffset: number): number {
    return this.service.logOf(topic, queueId)?.storeTimeAt(queueOffset) ?? -1
  }

  // ---- configuration ------------------------------------------------------------------------

  getTopicConfig(topic: string): TopicConfig {
    return this.table.get(topic)
  }

  /**
   * Changes a topic's settings at run time. Removing `compact` aborts its passes and deletes its
   * compaction logs (reads go back to the consume queues); adding it copies the topic's existing
   * messages into new logs, and is refused when some have no key unless `force` is set.
   */
  async setTopicConfig(topic: string, input: TopicConfigInput, options: SetTopicConfigOptions = {}): Promise<TopicConfig> {
    const { config } = this.table.preview(topic, input)
    const was = this.compacted.has(topic)
    const will = hasCompact(config.cleanupPolicy)
    if (!was && will && options.force !== true) {
      const keyless = this.countKeyless(topic)
      if (keyless > 0) {
        throw new MQStoreError(
          'INVALID_OPTION',
          `topic ${topic} holds ${keyless} message(s) without a key, which compaction cannot keep; pass { force: true } to compact it anyway`,
        )
      }
    }
    const result = this.table.set(topic, input)
    if (was && !will) {
      this.compacted.delete(topic)
      await this.service.dropTopic(topic)
    } else if (!was && will) {
      this.compacted.add(topic)
      for (const q of this.deps.queues.queuesOf(topic)) this.backfill(topic, q.queueId)
    }
    return result
  }

  private countKeyless(topic: string): number {
    let keyless = 0
    const reader = this.deps.commitLog.openReader()
    try {
      for (const queue of this.deps.queues.queuesOf(topic)) {
        for (let offset = queue.getMinOffsetInQueue(); offset < queue.getMaxOffsetInQueue(); ) {
          const units = queue.getIndexBuffer(offset)
          if (units === null) break
          try {
            for (let i = 0; i + CQ_STORE_UNIT_SIZE <= units.size; i += CQ_STORE_UNIT_SIZE, offset++) {
              const at = reader.locate(ConsumeQueue.readOffset(units.buffer, i), ConsumeQueue.readSize(units.buffer, i))
              if (at < 0) continue
              const r = checkRecord(reader.data, at, reader.data.length, false)
              if (r.status === 'OK' && (r.keys === undefined || r.keys.trim() === '')) keyless++
            }
          } finally {
            units.release()
          }
        }
      }
    } finally {
      reader.close()
    }
    return keyless
  }

  // ---- cleaning, reporting, lifecycle --------------------------------------------------------

  compact(topic?: string, onProgress?: (queuesDone: number, queuesTotal: number) => void): Promise<CompactReport> {
    // A pass cleans only what the commit log holds on disk: flush first, so that a pass asked for
    // now covers every record put so far (automatic passes wait for the flush service instead).
    this.deps.commitLog.flushAll()
    return this.service.compact(topic, onProgress)
  }

  stats(): CleanerStats {
    return this.service.stats()
  }

  /** After open's replay: reconciles the logs with the consume queues, then starts automatic passes. */
  start(): void {
    this.reconcile()
    this.service.start()
  }

  flush(): void {
    this.service.flush()
  }

  flushAsync(): Promise<void> {
    return this.service.flushAsync()
  }

  close(): Promise<void> {
    return this.service.close()
  }
}

/**
 * What a compacted read checks each copy's position against. A copy in a compaction log keeps its
 * commit-log header, which no CRC covers (the body CRC is checked on the copy served): it is served
 * only when it names its queue and queue offset (the read checks) and a commit-log position the log
 * has reached, and, while the consume queue still holds that offset's unit, the position the unit
 * gives. The units come from one hold of the queue's file per read (getIndexBuffer reaches to the
 * file's written end), taken again only for an offset outside it.
 */
class UnitPositions {
  private queue: ConsumeQueue | null = null
  private min = 0
  private max = 0
  private logMax = 0
  private units: SelectMappedBufferResult | null = null
  private from = 0
  private count = 0

  /** Starts a read of `queue` (null: the queue has no units) with the commit log ending at `logMax`. */
  begin(queue: ConsumeQueue | null, logMax: number): void {
    this.queue = queue
    this.logMax = logMax
    this.min = queue?.getMinOffsetInQueue() ?? 0
    this.max = queue?.getMaxOffsetInQueue() ?? 0
  }

  /** Whether the copy of `queueOffset` may be served with the commit-log position `phy` it names. */
  holds(phy: number, queueOffset: number): boolean {
    if (!Number.isSafeInteger(phy) || phy < 0 || phy >= this.logMax) return false
    const queue = this.queue
    if (queue === null || queueOffset < this.min || queueOffset >= this.max) return true
    if (this.units === null || queueOffset < this.from || queueOffset >= this.from + this.count) {
      this.end()
      const units = queue.getIndexBuffer(queueOffset)
      if (units === null) return true
      this.units = units
      this.from = queueOffset
      this.count = Math.floor(units.size / CQ_STORE_UNIT_SIZE)
      if (this.count === 0) return true
    }
    return ConsumeQueue.readOffset(this.units.buffer, (queueOffset - this.from) * CQ_STORE_UNIT_SIZE) === phy
  }

  /** Lets go of the units held (the read ended). */
  end(): void {
    this.units?.release()
    this.units = null
    this.count = 0
  }
}
