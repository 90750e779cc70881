// Commit-log flushing. msync always runs on the libuv pool (flushAsync), never on the JS thread.
//
// SYNC_FLUSH (group commit): each waiting put registers the offset its record ends at; one flush
// serves every put that arrived while the previous flush ran. A put whose data is not on disk by
// its deadline (syncFlushTimeout) gets FLUSH_DISK_TIMEOUT; the message stays stored.
//
// ASYNC_FLUSH: a loop flushes every flushIntervalCommitLog ms once flushCommitLogLeastPages pages
// are dirty, and everything every flushCommitLogThoroughInterval ms or once a pass finds nothing
// appended since the last one. With the transient store
// pool, a second loop first commits the write buffers into the files.
//
// A failed sync stops the store (fail-stop). Since Linux 4.13 the kernel reports a writeback error
// once per open file: a retried msync/fdatasync succeeds although the pages it failed to write may
// be gone, so a retry would advance flushedWhere over lost data. On the first error the flusher
// sets NOT_WRITEABLE (puts are refused), answers every waiting put FLUSH_DISK_TIMEOUT, never syncs
// again, and close leaves the abort file: only a reopen, which recovers from what is really on
// disk, makes the store writeable again.
import type { CommitLog, PutMessageResult, PutMessageStatus } from './commitlog/commit-log.js'
import type { MessageStoreConfig } from './config.js'
import type { RunningFlags } from './running-flags.js'
import { ServiceLoop } from './service-loop.js'
import type { StoreCheckpoint } from './store-checkpoint.js'
import type { StoreStatsService } from './store-stats.js'

/** Told once whether the commit log was flushed up to the offset it waited for. */
export interface FlushWaiter {
  flushed(status: PutMessageStatus): void
  /** The put calls it answers, counted in the group commit's stats (1 when absent). */
  readonly requests?: number
}

/** A waiter for the commit log to be flushed up to `nextOffset`; settled once. */
class FlushRequest {
  settled = false

  constructor(
    readonly nextOffset: number,
    readonly deadline: number,
    private readonly waiter: FlushWaiter,
  ) {}

  get requests(): number {
    return this.waiter.requests ?? 1
  }

  settle(status: PutMessageStatus): void {
    if (this.settled) return
    this.settled = true
    this.waiter.flushed(status)
  }
}

/** SYNC_FLUSH: how often bytes no put waits for are flushed (RocketMQ's group commit idle wait). */
const SYNC_IDLE_FLUSH_MS = 10

export class CommitLogFlusher {
  private readonly commitLog: CommitLog
  private readonly config: MessageStoreConfig
  private readonly checkpoint: StoreCheckpoint
  private readonly onError: (name: string, error: unknown) => void
  /** Called when a commit made more data readable (dispatch should run). */
  private readonly onCommitted: () => void

  private flushLoop: ServiceLoop | null = null
  private commitLoop: ServiceLoop | null = null
  private lastThoroughFlush = Date.now()
  private lastThoroughCommit = Date.now()
  /** The commit log's end at the last periodic flush pass (ASYNC_FLUSH). */
  private lastPassEnd = -1

  // Group commit state.
  private requests: FlushRequest[] = []
  private inFlight: FlushRequest[] = []
  private groupRunning: Promise<void> | null = null
  private deadlineTimer: NodeJS.Timeout | null = null
  private stopped = false
  private readonly flags: RunningFlags
  /** Why durability was lost (the first sync error), or null. */
  private failure: string | null = null

  constructor(
    commitLog: CommitLog,
    config: MessageStoreConfig,
    checkpoint: StoreCheckpoint,
    flags: RunningFlags,
    onCommitted: () => void,
    onError: (name: string, error: unknown) => void,
    /** Where each group commit is counted (stats()), or null. */
    private readonly stats: Pick<StoreStatsService, 'recordGroupCommit'> | null = null,
  ) {
    this.commitLog = commitLog
    this.config = config
    this.checkpoint = checkpoint
    this.flags = flags
    this.onCommitted = onCommitted
    this.onError = onError
  }

  /** The reason the flusher stopped after a failed sync, or null while syncs succeed. */
  get failed(): string | null {
    return this.failure
  }

  /** The first sync error: refuse puts, fail every waiting put, never sync again. */
  private failStop(name: string, error: unknown): void {
    if (this.failure !== null) return
    const detail = (error as Error)?.message ?? String(error)
    this.failure = `a commit-log sync failed, so data after offset ${this.commitLog.mappedFileQueue.flushedWhere} may not be on disk (${detail}); reopen the store to recover`
    this.flags.set('NOT_WRITEABLE', this.failure)
    this.onError(name, error)
    for (const request of [...this.requests, ...this.inFlight]) request.settle('FLUSH_DISK_TIMEOUT')
    this.requests = []
  }

  private get usesWriteBuffer(): boolean {
    return this.config.transientStorePoolEnable && this.config.flushDiskType === 'ASYNC_FLUSH'
  }

  start(): void {
    if (this.config.flushDiskType === 'ASYNC_FLUSH') {
      this.flushLoop = new ServiceLoop('flush', this.config.flushIntervalCommitLog, () => this.flushOnce(), this.onError)
      this.flushLoop.start()
    } else {
      // Bytes appended with no put waiting for them (a put with WAIT=false, a slave's replicated
      // frames) are flushed too: RocketMQ's group commit flushes every 10 ms when no request waits.
      this.flushLoop = new ServiceLoop('flush', SYNC_IDLE_FLUSH_MS, () => this.flushUnwaited(), this.onError)
      this.flushLoop.start()
    }
    if (this.usesWriteBuffer) {
      this.commitLoop = new ServiceLoop('commit', this.config.commitIntervalCommitLog, () => this.commitOnce(), this.onError)
      this.commitLoop.start()
    }
  }

  /** Runs the flush (and commit) passes a busy event loop kept overdue (ServiceLoop.runIfDue). */
  runIfDue(now: number): void {
    this.commitLoop?.runIfDue(now)
    this.flushLoop?.runIfDue(now)
  }

  /** After a put that does not wait: nudge the services that make it durable or readable. */
  wakeup(): void {
    if (this.commitLoop !== null) this.commitLoop.wakeup()
    else if (this.flushLoop !== null && !this.config.flushCommitLogTimed) this.flushLoop.wakeup()
  }

  private async flushOnce(): Promise<void> {
    if (this.failure !== null) return
    try {
      await this.flushPeriodically()
    } catch (error) {
      this.failStop('flush', error)
    }
  }

  private async flushPeriodically(): Promise<void> {
    let leastPages = this.config.flushCommitLogLeastPages
    const now = Date.now()
    if (now >= this.lastThoroughFlush + this.config.flushCommitLogThoroughInterval) {
      this.lastThoroughFlush = now
      leastPages = 0
    }
    const queue = this.commitLog.mappedFileQueue
    // Nothing appended since the last pass: the writer went quiet, and what leastPages held back
    // to batch with later puts is flushed now rather than at the next thorough pass (or close).
    const end = queue.getMaxOffset()
    if (end === this.lastPassEnd) leastPages = 0
    this.lastPassEnd = end
    // One flush covers one file (RocketMQ's rule). With small files a burst fills several between
    // two passes, and flushing one per pass would leave the rest unsynced for seconds: go on while
    // the last flush completed a file and a later one exists.
    while (!(await queue.flushAsync(leastPages)) && queue.flushedWhere % queue.mappedFileSize === 0) {
      if (queue.flushedWhere >= queue.getMaxOffset() || this.failure !== null) break
    }
    if (queue.storeTimestamp > 0) this.checkpoint.physicMsgTimestamp = queue.storeTimestamp
    this.commitLog.hugePagesPass()
  }

  private commitOnce(): void {
    let leastPages = this.config.commitCommitLogLeastPages
    const now = Date.now()
    if (now >= this.lastThoroughCommit + this.config.commitCommitLogThoroughInterval) {
      this.lastThoroughCommit = now
      leastPages = 0
    }
    const queue = this.commitLog.mappedFileQueue
    if (!queue.commit(leastPages)) {
      this.lastThoroughCommit = now
      this.onCommitted()
      this.flushLoop?.wakeup()
    }
  }

  // ---- group commit -------------------------------------------------------------------------

  /**
   * SYNC_FLUSH: resolves once the commit log is flushed up to `nextOffset`, or times out.
   * `requests`: the put calls the wait answers, for the group commit's stats.
   */
  awaitFlush(nextOffset: number, requests = 1): Promise<PutMessageStatus> {
    return new Promise((resolve) => this.waitFlush(nextOffset, { flushed: resolve, requests }))
  }

  /**
   * SYNC_FLUSH: tells `waiter` once the commit log is flushed up to `nextOffset`, or at its
   * deadline. No promise of its own: a put waiting for a flush pays for one object here.
   */
  waitFlush(nextOffset: number, waiter: FlushWaiter): void {
    if (this.commitLog.mappedFileQueue.flushedWhere >= nextOffset || this.failure !== null) {
      waiter.flushed(this.failure === null ? 'PUT_OK' : 'FLUSH_DISK_TIMEOUT')
      return
    }
    this.requests.push(new FlushRequest(nextOffset, Date.now() + this.config.syncFlushTimeout, waiter))
    this.armDeadlineWatcher()
    if (this.groupRunning === null) this.groupRunning = this.runGroupCommits()
  }

  /** SYNC_FLUSH with no group commit running: a group commit for what was appended unwaited. */
  private async flushUnwaited(): Promise<void> {
    const queue = this.commitLog.mappedFileQueue
    const end = queue.getMaxOffset()
    if (this.failure !== null || this.groupRunning !== null || queue.flushedWhere >= end) return
    await this.awaitFlush(end)
  }

  private async runGroupCommits(): Promise<void> {
    // Start on the next microtask: the puts of this synchronous burst join this flush, and puts
    // that arrive while it runs form the next group, so two groups alternate and the disk is
    // never idle while producers work.
    // One sync at a time, on purpose. Linux reports a writeback error once per open file, and every
    // msync of a mapping goes through the same open file: with two in flight, the later one can
    // take the error of the earlier one's pages while the earlier one returns success, so a group
    // could be acknowledged only once every sync that overlapped it had completed, and that wait
    // undoes the overlap. Measured too (issue 22's SYNC bench, a virtio disk): syncing a second group
    // while the first was in flight gained nothing beyond the noise, and lost at a lower load.
    await Promise.resolve()
    const queue = this.commitLog.mappedFileQueue
    try {
      while (this.requests.length > 0 && this.failure === null) {
        // The two lists trade places: the group's requests go in flight, and the list the last
        // group left (emptied) takes the next puts' (no new list per group).
        const spare = this.inFlight
        this.inFlight = this.requests
        this.requests = spare
        let target = 0
        for (const request of this.inFlight) if (request.nextOffset > target) target = request.nextOffset
        let error: unknown = null
        const began = performance.now()
        try {
          // Staged appends (write-stage.ts) go into the file first, readable from then on, and are
          // dispatched while the sync runs (a put that filled the stage wrote part of them already).
          const staged = this.commitLog.staged
          if (staged) this.commitLog.commitStaged()
          const flushing = this.flushUpTo(target)
          if (staged) this.dispatchCommitted()
          await flushing
        } catch (e) {
          error = e
        }
        if (error !== null) this.failStop('group-commit', error)
        else this.stats?.recordGroupCommit(requestsOf(this.inFlight), Math.round((performance.now() - began) * 1000))
        const inFlight = this.inFlight
        for (let i = 0; i < inFlight.length; i++) {
          const request = inFlight[i]
          request.settle(queue.flushedWhere >= request.nextOffset ? 'PUT_OK' : 'FLUSH_DISK_TIMEOUT')
        }
        inFlight.length = 0
        if (queue.storeTimestamp > 0) this.checkpoint.physicMsgTimestamp = queue.storeTimestamp
      }
    } finally {
      this.groupRunning = null
    }
  }

  /**
   * Flushes the commit log up to `target`. One flush covers one file; a batch that crossed into
   * later files needs one per file. Stops when a flush moves nothing (the data is not there, or
   * the sync failed).
   */
  private async flushUpTo(target: number): Promise<void> {
    const queue = this.commitLog.mappedFileQueue
    while (queue.flushedWhere < target) {
      if (await queue.flushAsync(0)) break
    }
  }

  /** onCommitted, whose failure must not abandon the sync it runs beside. */
  private dispatchCommitted(): void {
    try {
      this.onCommitted()
    } catch (error) {
      this.onError('dispatch', error)
    }
  }

  /** A watcher settles requests still pending at their deadline, even if a flush hangs. */
  private armDeadlineWatcher(): void {
    if (this.deadlineTimer === null) this.startDeadlineWatcher()
  }

  /**
   * Apart from armDeadlineWatcher, which runs for every waiting put: a function that makes a
   * closure has V8 allocate that closure's context each time it is called, returned early or not.
   */
  private startDeadlineWatcher(): void {
    this.deadlineTimer = setInterval(
      () => {
        const now = Date.now()
        let pending = 0
        for (const list of [this.requests, this.inFlight]) {
          for (const request of list) {
            if (request.settled) continue
            if (now >= request.deadline) request.settle('FLUSH_DISK_TIMEOUT')
            else pending++
          }
        }
        if (pending === 0 && this.deadlineTimer !== null) {
          clearInterval(this.deadlineTimer)
          this.deadlineTimer = null
        }
      },
      Math.max(10, Math.min(100, this.config.syncFlushTimeout / 4)),
    )
    this.deadlineTimer.unref()
  }

  /** Stops the loops, lets group commits finish, then flushes everything (msync on the libuv pool). */
  async shutdown(): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    await this.commitLoop?.stop()
    await this.flushLoop?.stop()
    if (this.groupRunning !== null) await this.groupRunning
    if (this.failure === null) {
      try {
        await this.commitLog.flushAllAsync()
      } catch (error) {
        this.failStop('flush', error)
      }
    }
    for (const request of [...this.requests, ...this.inFlight]) {
      request.settle(this.commitLog.mappedFileQueue.flushedWhere >= request.nextOffset ? 'PUT_OK' : 'FLUSH_DISK_TIMEOUT')
    }
    if (this.deadlineTimer !== null) clearInterval(this.deadlineTimer)
    this.deadlineTimer = null
    const queue = this.commitLog.mappedFileQueue
    if (queue.storeTimestamp > 0) this.checkpoint.physicMsgTimestamp = queue.storeTimestamp
  }
}

/**
 * After a SYNC_FLUSH wait ended without the disk: the puts that were appended (PUT_OK) take the
 * wait's status and say why (`failure`: the reason a failed sync stopped the store, if one did).
 */
export function markUnflushed(
  results: readonly PutMessageResult[],
  status: PutMessageStatus,
  syncFlushTimeout: number,
  failure: string | null,
): void {
  const reason =
    failure !== null
      ? `appended, but the commit log could not be flushed: ${failure}`
      : `appended, but not on disk within syncFlushTimeout (${syncFlushTimeout} ms)`
  for (const r of results) if (r.status === 'PUT_OK') Object.assign(r, { status, reason })
}

/** The put calls a group's requests answer. */
function requestsOf(group: readonly FlushRequest[]): number {
  let count = 0
  for (const request of group) count += request.requests
  return count
}
