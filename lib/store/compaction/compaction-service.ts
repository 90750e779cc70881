// Compacted topics, as one unit under <store>/compaction/: the compaction log of every queue of
// every topic whose policy holds `compact`, the cleaner checkpoint, the per-queue states, and the
// cleaner loop (one pass at a time, in slices on the event loop, with backoff when nothing is
// dirty). The facade feeds it dispatched records and asks it for reads of compacted queues.
import * as fs from 'node:fs'
import { join } from 'node:path'

import { MQStoreError } from '../../errors.js'
import type { DispatchRequest } from '../commitlog/record.js'
import type { Clock } from '../environment.js'
import { ensureDirectory } from '../mapped/directory.js'
import { hasCompact, type TopicConfig } from '../topics/topic-table.js'
import { CleanerCheckpoint, CHECKPOINT_FILE_NAME, queueKey } from './cleaner-checkpoint.js'
import { CleanerManager, CleaningAborted } from './cleaner-manager.js'
import { cleanQueue, DEFAULT_SLICE_MS, dirtiness, Slicer, isEligible, type Dirtiness, type PassResult } from './cleaner.js'
import { CompactionLog, type LogOpenReport, type ReadVisitor } from './compaction-log.js'
import { OffsetMap } from './offset-map.js'
import type { MappingBudget as BytesBudget } from '../mapped/mapping-budget.js'
import { MappingBudget, type SegmentLease } from './segment.js'
import { Throttler } from './throttler.js'

export interface CompactionOptions {
  /** Memory of the offset map, bytes (24 per slot, filled to 90 %). Default 16 MiB ≈ 630,000 keys a pass. */
  offsetMapBytes?: number
  /** Shared read + write rate limit of cleaning passes, bytes/s. Default unlimited. */
  ioMaxBytesPerSecond?: number
  /** Idle time between automatic selections when nothing was dirty; also the first uncleanable backoff. */
  backoffMs?: number
  /** How long an old file renamed .deleted stays for readers that still hold it. */
  fileDeleteDelayMs?: number
  /** Sealed compaction-log files mapped at once, over all queues (default 1024; each holds a descriptor). */
  maxMappedFiles?: number
  /** Longest run of a pass on the event loop before it yields, ms (default 0.25). */
  sliceMs?: number
  /** Run automatic passes (default true). compact() works either way. */
  enabled?: boolean
}

export const COMPACTION_DEFAULTS = {
  offsetMapBytes: 16 * 1024 * 1024,
  ioMaxBytesPerSecond: Infinity,
  backoffMs: 15_000,
  fileDeleteDelayMs: 60_000,
  maxMappedFiles: 1024,
  sliceMs: DEFAULT_SLICE_MS,
  enabled: true,
} as const

export interface CompactReport {
  queues: PassResult[]
  bytesRead: number
  bytesWritten: number
  recordsKept: number
  recordsDropped: number
  durationMs: number
  /** Queues whose pass failed (marked uncleanable) with the error text. */
  failed: { topic: string; queueId: number; error: string }[]
}

export interface CleanerStats {
  passes: number
  maxDirtyPercent: number
  recopyPercent: number
  maxBufferUtilizationPercent: number
  maxCleanTimeSecs: number
  maxCompactionDelaySecs: number
  uncleanableQueueCount: number
  uncleanableBytes: number
  uncleanable: { topic: string; queueId: number; error: string; failures: number; retryAt: number }[]
  timeSinceLastRunMs: number
  deadWorkers: number
  bytesRead: number
  bytesWritten: number
  throttledMs: number
  lastPass: PassResult | null
  logs: number
  logBytes: number
  /** Sealed compaction-log files mapped right now (active files are always mapped). */
  mappedFiles: number
}

export type TopicConfigSource = (topic: string) => TopicConfig

export class CompactionService {
  readonly rootDir: string
  private readonly clock: Clock
  private readonly configOf: TopicConfigSource
  private readonly options: Required<CompactionOptions>
  private readonly logs = new Map<string, CompactionLog>()
  private readonly checkpoint: CleanerCheckpoint
  readonly manager: CleanerManager
  private readonly throttler: Throttler
  private readonly map: OffsetMap
  private readonly budget: MappingBudget
  /** One pass at a time: automatic and manual passes queue up here. */
  private chain: Promise<unknown> = Promise.resolve()
  private timer: NodeJS.Timeout | null = null
  private closed = false
  private lastSelectionAt = 0
  private maxDirtyPercent = 0
  private maxCompactionDelayMs = 0
  private readonly totals = { passes: 0, bytesRead: 0, bytesWritten: 0 }
  private lastPass: PassResult | null = null
  /** Reports of the swap recovery done at open, per queue directory. */
  readonly openReports: { topic: string; queueId: number; report: LogOpenReport }[] = []
  /** Errors of passes and of the loop, for the facade to report. */
  onError: ((topic: string, queueId: number, error: unknown) => void) | undefined

  /** Records appended since the commit log was last known flushed past them, per log, oldest first. */
  private readonly notDurable = new WeakMap<CompactionLog, { queueOffset: number; endPhy: number }[]>()
  /** Commit-log offset up to which records are on disk (the store sets it; everything by default). */
  durableCommitLogOffset: () => number = () => Number.POSITIVE_INFINITY

  /** `mappedBytes`: the store's budget of mapped bytes, which sealed files are mapped within. */
  constructor(
    rootDir: string,
    clock: Clock,
    configOf: TopicConfigSource,
    options: CompactionOptions = {},
    mappedBytes: BytesBudget | null = null,
  ) {
    this.rootDir = rootDir
    this.clock = clock
    this.configOf = configOf
    this.options = { ...COMPACTION_DEFAULTS, ...definedOnly(options) }
    const o = this.options
    if (!Number.isSafeInteger(o.backoffMs) || o.backoffMs < 1)
      throw new MQStoreError('INVALID_OPTION', `compaction backoffMs must be a positive integer`)
    if (!Number.isSafeInteger(o.fileDeleteDelayMs) || o.fileDeleteDelayMs < 0) {
      throw new MQStoreError('INVALID_OPTION', `compaction fileDeleteDelayMs must be an integer >= 0`)
    }
    if (!(o.sliceMs > 0)) throw new MQStoreError('INVALID_OPTION', `compaction sliceMs must be positive`)
    if (!(o.ioMaxBytesPerSecond > 0)) throw new MQStoreError('INVALID_OPTION', `compaction ioMaxBytesPerSecond must be positive`)
    try {
      this.map = new OffsetMap(o.offsetMapBytes)
    } catch (cause) {
      throw new MQStoreError('INVALID_OPTION', `compaction offsetMapBytes: ${(cause as Error).message}`, { cause })
    }
    try {
      this.budget = new MappingBudget(o.maxMappedFiles, mappedBytes)
    } catch (cause) {
      throw new MQStoreError('INVALID_OPTION', `compaction maxMappedFiles: ${(cause as Error).message}`, { cause })
    }
    this.checkpoint = new CleanerCheckpoint(join(rootDir, CHECKPOINT_FILE_NAME))
    this.manager = new CleanerManager(o.backoffMs)
    this.throttler = new Throttler(o.ioMaxBytesPerSecond, clock)
  }

  /**
   * Loads every queue's log found on disk (finishing interrupted swaps) and the checkpoint;
   * `afterCrash`: the store was not closed cleanly, so each active file's tail is cleared.
   */
  open(afterCrash = false): void {
    ensureDirectory(this.rootDir)
    this.checkpoint.load()
    for (const topic of fs.readdirSync(this.rootDir)) {
      const topicDir = join(this.rootDir, topic)
      if (!fs.statSync(topicDir).isDirectory()) continue
      for (const q of fs.readdirSync(topicDir)) {
        const queueId = Number(q)
        if (!/^\d+$/.test(q) || !Number.isSafeInteger(queueId)) continue
        const { log, report } = CompactionLog.open(join(topicDir, q), topic, queueId, this.clock.now(), this.budget, afterCrash)
        this.logs.set(queueKey(topic, queueId), log)
        if (report.removed.length > 0 || report.rolledForward.length > 0 || report.cutShort.length > 0)
          this.openReports.push({ topic, queueId, report })
      }
    }
  }

  /** Starts automatic passes (and time rolls, retention) on a timer. */
  start(): void {
    if (!this.options.enabled || this.closed) return
    this.schedule(this.options.backoffMs)
  }

  private schedule(delayMs: number): void {
    if (this.closed) return
    this.timer = setTimeout(() => {
      this.timer = null
      void this.tick().then((cleaned) => this.schedule(cleaned ? 0 : this.options.backoffMs))
    }, delayMs)
    this.timer.unref()
  }

  /** One round of the loop: time rolls, retention, then at most one pass on the dirtiest queue. */
  async tick(): Promise<boolean> {
    if (this.closed) return false
    try {
      this.rollDue()
      this.applyRetention()
      const report = await this.serial(() => this.cleanDirtiest())
      return report !== null
    } catch (error) {
      this.onError?.('', -1, error)
      return false
    }
  }

  // ---- logs and dispatch --------------------------------------------------------------------

  logOf(topic: string, queueId: number): CompactionLog | undefined {
    return this.logs.get(queueKey(topic, queueId))
  }

  private logFor(topic: string, queueId: number): CompactionLog {
    const key = queueKey(topic, queueId)
    let log = this.logs.get(key)
    if (log === undefined) {
      log = CompactionLog.open(join(this.rootDir, topic, String(queueId)), topic, queueId, this.clock.now(), this.budget).log
      this.logs.set(key, log)
    }
    return log
  }

  /** Adds a dispatched record of a compacted topic (`record` = its bytes in the commit log). */
  dispatch(request: DispatchRequest, record: Uint8Array): void {
    const log = this.logFor(request.topic, request.queueId)
    if (request.keys === undefined || request.keys === '') {
      log.skip(request.queueOffset)
      return
    }
    const config = this.configOf(request.topic)
    const now = this.clock.now()
    const active = log.active()
    if (active !== null && active.count > 0 && now - active.firstTimestamp >= maxSegmentMs(config)) {
      log.roll(request.queueOffset, config.segmentBytes, now)
    }
    if (log.append(record, request.queueOffset, request.storeTimestamp, request.tagsCode, config.segmentBytes, now)) {
      const pending = this.notDurable.get(log) ?? []
      pending.push({ queueOffset: request.queueOffset, endPhy: request.commitLogOffset + request.size })
      this.notDurable.set(log, pending)
    }
  }

  /**
   * The first queue offset of `log` whose commit-log record may not be durable yet (Infinity when
   * all are): appended records are remembered until the commit log is flushed past them.
   */
  private durableLimit(log: CompactionLog): number {
    const pending = this.notDurable.get(log)
    if (pending === undefined) return Number.POSITIVE_INFINITY
    const flushed = this.durableCommitLogOffset()
    let i = 0
    while (i < pending.length && pending[i].endPhy <= flushed) i++
    pending.splice(0, i)
    return pending.length === 0 ? Number.POSITIVE_INFINITY : pending[0].queueOffset
  }

  minOffset(topic: string, queueId: number): number {
    return this.logOf(topic, queueId)?.minOffset() ?? 0
  }

  /** Raises the end of a queue's log to `end` (offsets handed out that the log keeps no record for). */
  coverTo(topic: string, queueId: number, end: number): void {
    if (end > 0) this.logOf(topic, queueId)?.skip(end - 1)
  }

  maxOffset(topic: string, queueId: number): number {
    return this.logOf(topic, queueId)?.maxOffset() ?? 0
  }

  offsetByTime(topic: string, queueId: number, timestamp: number): number {
    return this.logOf(topic, queueId)?.offsetByTime(timestamp) ?? 0
  }

  /** CompactionLog.read of the queue's log (0 when it has none). */
  read(topic: string, queueId: number, fromOffset: number, visit: ReadVisitor, held?: SegmentLease[]): number {
    return this.logOf(topic, queueId)?.read(fromOffset, visit, held) ?? 0
  }

  /** Queues (topic, queueId) that have a compaction log. */
  queues(topic?: string): { topic: string; queueId: number }[] {
    const out: { topic: string; queueId: number }[] = []
    for (const log of this.logs.values())
      if (topic === undefined || log.topic === topic) out.push({ topic: log.topic, queueId: log.queueId })
    return out
  }

  /**
   * Cuts a queue's log back to `queueOffset` (the commit log lost what came after it in a crash),
   * under a pause, lowering the checkpoint if it pointed past the new end.
   */
  async truncate(topic: string, queueId: number, queueOffset: number): Promise<void> {
    const log = this.logOf(topic, queueId)
    if (log === undefined || log.nextOffset <= queueOffset) return
    const key = queueKey(topic, queueId)
    await this.manager.abortAndPause(key)
    try {
      log.truncateFrom(queueOffset, this.clock.now())
      this.notDurable.delete(log)
      const cp = this.checkpoint.get(topic, queueId)
      if (cp !== undefined && cp > log.nextOffset) this.checkpoint.update(topic, queueId, log.nextOffset)
    } finally {
      this.manager.resume(key)
    }
  }

  /** truncate() while nothing else can hold the queue (open, before the cleaner starts). */
  truncateAtOpen(topic: string, queueId: number, queueOffset: number): void {
    const key = queueKey(topic, queueId)
    const log = this.logOf(topic, queueId)
    if (log === undefined || !this.manager.tryStart(key)) return
    try {
      log.truncateFrom(queueOffset, this.clock.now())
      this.notDurable.delete(log)
      const cp = this.checkpoint.get(topic, queueId)
      if (cp !== undefined && cp > log.nextOffset) this.checkpoint.update(topic, queueId, log.nextOffset)
    } finally {
      this.manager.done(key)
    }
  }

  /** Deletes the logs of a topic that is no longer compacted, at open (nothing runs yet). */
  dropTopicAtOpen(topic: string): void {
    for (const { queueId } of this.queues(topic)) {
      const key = queueKey(topic, queueId)
      this.logs.get(key)?.destroy()
      this.logs.delete(key)
      if (this.checkpoint.get(topic, queueId) !== undefined) this.checkpoint.update(topic, queueId, undefined)
    }
    fs.rmSync(join(this.rootDir, topic), { recursive: true, force: true })
  }

  /** The topic left compaction: stop its passes and delete its logs and checkpoint entries. */
  async dropTopic(topic: string): Promise<void> {
    for (const { queueId } of this.queues(topic)) {
      const key = queueKey(topic, queueId)
      await this.manager.abortAndPause(key)
      try {
        this.logs.get(key)?.destroy()
        this.logs.delete(key)
        this.checkpoint.update(topic, queueId, undefined)
      } finally {
        this.manager.resume(key)
      }
    }
    fs.rmSync(join(this.rootDir, topic), { recursive: true, force: true })
  }

  // ---- cleaning -----------------------------------------------------------------------------

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work)
    this.chain = next.catch(() => undefined)
    return next
  }

  private dirtinessOf(log: CompactionLog, now: number): { d: Dirtiness; config: TopicConfig } {
    const config = this.configOf(log.topic)
    return { d: dirtiness(log, this.checkpoint.get(log.topic, log.queueId), config, now, this.durableLimit(log)), config }
  }

  /** Selects the dirtiest eligible queue and cleans it; null when none was eligible. */
  private async cleanDirtiest(): Promise<PassResult | null> {
    const now = this.clock.now()
    this.lastSelectionAt = now
    let best: { log: CompactionLog; d: Dirtiness; config: TopicConfig } | null = null
    let maxRatio = 0
    let maxDelay = 0
    for (const [key, log] of this.logs) {
      if (this.manager.state(key) !== undefined || this.manager.isUncleanable(key, now)) continue
      let picked: { d: Dirtiness; config: TopicConfig }
      try {
        picked = this.dirtinessOf(log, now)
      } catch (error) {
        this.manager.markUncleanable(key, error, now, 0)
        this.onError?.(log.topic, log.queueId, error)
        continue
      }
      if (!hasCompact(picked.config.cleanupPolicy)) continue
      maxRatio = Math.max(maxRatio, picked.d.cleanableRatio)
      maxDelay = Math.max(maxDelay, picked.d.compactionDelayMs)
      if (!isEligible(picked.d, picked.config)) continue
      if (best === null || picked.d.cleanableRatio > best.d.cleanableRatio) best = { log, ...picked }
    }
    this.maxDirtyPercent = maxRatio * 100
    this.maxCompactionDelayMs = maxDelay
    if (best === null) return null
    return (await this.runPass(best.log, best.d, best.config)).result
  }

  /**
   * Runs a pass now over every compacted queue (of `topic`) with anything to clean, ignoring the
   * dirty-ratio threshold but not the uncleanable boundary (active file, min lag).
   */
  compact(topic?: string, onProgress?: (queuesDone: number, queuesTotal: number) => void): Promise<CompactReport> {
    return this.serial(async () => {
      const started = performance.now()
      const report: CompactReport = {
        queues: [],
        bytesRead: 0,
        bytesWritten: 0,
        recordsKept: 0,
        recordsDropped: 0,
        durationMs: 0,
        failed: [],
      }
      const logs = [...this.logs.values()].filter((log) => topic === undefined || log.topic === topic)
      let done = 0
      for (const log of logs) {
        onProgress?.(done++, logs.length)
        const key = queueKey(log.topic, log.queueId)
        if (this.manager.state(key) !== undefined) continue
        const now = this.clock.now()
        const { d, config } = this.dirtinessOf(log, now)
        if (!hasCompact(config.cleanupPolicy)) continue
        if (d.cleanableBytes === 0 && !d.horizonPassed) continue
        this.manager.cleared(key)
        const { result, error } = await this.runPass(log, d, config)
        if (result !== null) {
          report.queues.push(result)
          report.bytesRead += result.bytesRead
          report.bytesWritten += result.bytesWritten
          report.recordsKept += result.recordsKept
          report.recordsDropped += result.recordsDropped
        } else if (error !== null) {
          report.failed.push({ topic: log.topic, queueId: log.queueId, error: String((error as Error).message ?? error) })
        }
      }
      onProgress?.(logs.length, logs.length)
      report.durationMs = performance.now() - started
      return report
    })
  }

  private async runPass(log: CompactionLog, d: Dirtiness, config: TopicConfig): Promise<{ result: PassResult | null; error: unknown }> {
    const key = queueKey(log.topic, log.queueId)
    if (this.closed || !this.manager.tryStart(key)) return { result: null, error: null }
    try {
      if (d.checkpointReset) this.checkpoint.update(log.topic, log.queueId, d.firstDirtyOffset)
      const result = await cleanQueue(
        {
          log,
          config,
          map: this.map,
          throttler: this.throttler,
          slicer: new Slicer(this.options.sliceMs),
          checkDone: () => {
            if (this.closed) throw new CleaningAborted(key)
            this.manager.checkDone(key)
          },
          now: () => this.clock.now(),
          fileDeleteDelayMs: this.options.fileDeleteDelayMs,
        },
        d,
      )
      // Written only by a pass that ran to its end (an aborted one throws before this).
      this.manager.checkDone(key)
      this.checkpoint.update(log.topic, log.queueId, result.endOffset)
      this.manager.cleared(key)
      this.totals.passes++
      this.totals.bytesRead += result.bytesRead
      this.totals.bytesWritten += result.bytesWritten
      this.lastPass = result
      return { result, error: null }
    } catch (error) {
      if (error instanceof CleaningAborted) return { result: null, error: null }
      this.manager.markUncleanable(key, error, this.clock.now(), d.cleanableBytes)
      this.onError?.(log.topic, log.queueId, error)
      return { result: null, error }
    } finally {
      this.manager.done(key)
    }
  }

  /** The operator's "retry now" for queues marked uncleanable. */
  retryUncleanable(topic?: string, queueId?: number): void {
    if (topic === undefined) this.manager.retryUncleanable()
    else
      for (const q of this.queues(topic))
        if (queueId === undefined || q.queueId === queueId) this.manager.retryUncleanable(queueKey(q.topic, q.queueId))
  }

  // ---- rolls and retention ------------------------------------------------------------------

  /** Rolls active files whose time is up (a quiet queue otherwise never gets its last file cleaned). */
  rollDue(): void {
    const now = this.clock.now()
    for (const log of this.logs.values()) {
      const active = log.active()
      if (active === null || active.count === 0) continue
      const config = this.configOf(log.topic)
      if (now - active.firstTimestamp >= maxSegmentMs(config)) log.roll(log.nextOffset, config.segmentBytes, now)
    }
  }

  /**
   * compact,delete: deletes the oldest files past retentionMs (by their newest record) or beyond
   * retentionBytes, prefix only, never the active file (rolled first when it too has expired).
   */
  applyRetention(): void {
    const now = this.clock.now()
    for (const [key, log] of this.logs) {
      const config = this.configOf(log.topic)
      if (config.cleanupPolicy !== 'compact,delete') {
        log.removeDueFiles(now)
        continue
      }
      if (!this.manager.tryStart(key)) continue
      try {
        const active = log.active()
        if (
          active !== null &&
          active.count > 0 &&
          expired(active.largestTimestamp, config, now) &&
          log.segments.every((s) => s === active || expired(s.largestTimestamp, config, now))
        ) {
          log.roll(log.nextOffset, config.segmentBytes, now)
        }
        let n = 0
        const segments = log.segments
        if (config.retentionMs >= 0) while (n < segments.length - 1 && expired(segments[n].largestTimestamp, config, now)) n++
        if (config.retentionBytes >= 0) {
          let excess = log.sizeBytes() - config.retentionBytes
          for (let i = 0; i < n; i++) excess -= segments[i].bytes
          while (n < segments.length - 1 && excess - segments[n].bytes >= 0) excess -= segments[n++].bytes
        }
        if (n > 0) log.deleteOldest(n, now, this.options.fileDeleteDelayMs)
        else log.removeDueFiles(now)
      } catch (error) {
        this.manager.markUncleanable(key, error, now, 0)
        this.onError?.(log.topic, log.queueId, error)
      } finally {
        this.manager.done(key)
      }
    }
  }

  // ---- reporting and lifecycle --------------------------------------------------------------

  stats(): CleanerStats {
    const now = this.clock.now()
    const uncleanable = []
    let uncleanableBytes = 0
    for (const [key, mark] of this.manager.uncleanable) {
      const [topic, q] = key.split(' ')
      uncleanable.push({ topic, queueId: Number(q), error: mark.error, failures: mark.failures, retryAt: mark.retryAt })
      uncleanableBytes += mark.bytes
    }
    const last = this.lastPass
    let logBytes = 0
    for (const log of this.logs.values()) logBytes += log.sizeBytes()
    return {
      passes: this.totals.passes,
      maxDirtyPercent: this.maxDirtyPercent,
      recopyPercent: last !== null && last.bytesRead > 0 ? (100 * last.bytesWritten) / last.bytesRead : 0,
      maxBufferUtilizationPercent: last !== null ? last.mapUtilization * 100 : 0,
      maxCleanTimeSecs: last !== null ? last.durationMs / 1000 : 0,
      maxCompactionDelaySecs: this.maxCompactionDelayMs / 1000,
      uncleanableQueueCount: uncleanable.length,
      uncleanableBytes,
      uncleanable,
      timeSinceLastRunMs: this.lastSelectionAt === 0 ? -1 : now - this.lastSelectionAt,
      // Passes run on the event loop, not on worker threads: none can die on its own.
      deadWorkers: 0,
      bytesRead: this.totals.bytesRead,
      bytesWritten: this.totals.bytesWritten,
      throttledMs: this.throttler.throttledMs,
      lastPass: last,
      logs: this.logs.size,
      logBytes,
      mappedFiles: this.budget.mapped,
    }
  }

  /** Forces the active files to disk (the commit log may drop the records they copy). */
  flush(): void {
    for (const log of this.logs.values()) log.flush()
  }

  /** flush() off the event loop, one file after another. */
  async flushAsync(): Promise<void> {
    for (const log of [...this.logs.values()]) await log.active()?.flushAsync()
  }

  /** Stops the loop, aborts a running pass (it leaves no .cleaned file), flushes and unmaps. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    await this.chain.catch(() => undefined)
    for (const log of this.logs.values()) {
      log.flush()
      log.close()
    }
    this.logs.clear()
  }
}

function maxSegmentMs(config: TopicConfig): number {
  return Math.min(config.segmentMs, config.maxCompactionLagMs)
}

function expired(largestTimestamp: number, config: TopicConfig, now: number): boolean {
  return config.retentionMs >= 0 && now - largestTimestamp > config.retentionMs
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>
}
