// Dispatch (RocketMQ's ReputMessageService): reads the commit log from the last dispatched offset
// and feeds each record to the consume queues and the index, in commit-log order. A consumer sees a
// message only once it is dispatched. Dispatch runs on the JS thread in batches: right after puts
// (a microtask, so an awaited put is visible to the next read) and before every read.
import { checkRecord, type DispatchRequest, MESSAGE_MAGIC_CODE, OFFSET_MAGIC, OFFSET_TOTALSIZE } from './commitlog/record.js'
import type { CommitLog } from './commitlog/commit-log.js'
import { DataViewCache } from './bytes.js'

/**
 * Builds the derived entries of one record; false (or a throw) when that failed, a promise when
 * the record must wait for it (a new queue's file): dispatch stops there and resumes once it settles.
 */
export interface DispatchHandler {
  dispatch(request: DispatchRequest): boolean | Promise<void>
}

export interface DispatcherEvents {
  /** A readable range failed its record checks and was skipped. */
  onSkip(offset: number, bytes: number, reason: string): void
  /** Building a record's entries failed; dispatch stops there and retries on its next run. */
  onFailure(offset: number, error: unknown): void
}

export class Dispatcher {
  /** The commit-log offset of the next record to dispatch. */
  reputFromOffset = 0
  private readonly commitLog: CommitLog
  private readonly handle: DispatchHandler
  private readonly events: DispatcherEvents
  private scheduled = false
  private stopped = false
  /** Records skipped because they failed their checks while being dispatched. */
  skippedRanges: { offset: number; bytes: number; reason: string }[] = []

  /** Set while dispatch waits at a record (see DispatchHandler); it resumes when this settles. */
  waiting: Promise<void> | null = null

  /**
   * On a slave, replicated bytes may end inside a record: dispatch then waits at it for the rest
   * instead of skipping it as damaged.
   */
  holdIncompleteTail = false

  /** Set while the last record could not be dispatched; cleared when dispatch gets past it. */
  failed = false
  /** Why dispatch is stuck while `failed` (puts are refused with it). */
  failureReason = ''

  constructor(commitLog: CommitLog, handle: DispatchHandler, events: DispatcherEvents) {
    this.commitLog = commitLog
    this.handle = handle
    this.events = events
  }

  behindBytes(): number {
    return this.commitLog.getMaxOffset() - this.reputFromOffset
  }

  /** Dispatch soon, once per burst of puts. */
  schedule(): void {
    if (this.scheduled || this.stopped) return
    this.scheduled = true
    queueMicrotask(() => {
      this.scheduled = false
      if (!this.stopped) this.doReput()
    })
  }

  stop(): void {
    this.stopped = true
  }

  /** Waits while dispatch waits at a record, dispatching after each wait; resolves once it waits no more. */
  async settle(): Promise<void> {
    while (this.waiting !== null && !this.stopped) {
      await this.waiting
      this.doReput()
    }
  }

  /**
   * Dispatches a record its writer has just appended at `wroteOffset`, from what the writer knows,
   * without reading it back, when dispatch stands exactly at that record (or at the blank that the
   * same append wrote before it). False when it does not; the record is then dispatched from the
   * commit log by the next doReput.
   */
  dispatchAppended(request: DispatchRequest, wroteOffset: number, blankOffset: number): boolean {
    if (this.failed || this.stopped) return false
    // Both compared on every call (blankOffset is -1 without a blank, and no dispatch stands at
    // -1): a comparison that first runs at a file's first roll would send the compiled put path
    // back to the compiler there.
    const atRecord = this.reputFromOffset === wroteOffset
    const atBlank = this.reputFromOffset === blankOffset
    if (!atRecord && !atBlank) return false
    if (!this.tryHandle(request)) return false
    this.reputFromOffset = wroteOffset + request.size
    return true
  }

  /**
   * After a commit wrote staged records into the commit log (SYNC_FLUSH, write-stage.ts): each is
   * dispatched from its put's request, in order, until one is refused (a pass then reads that one
   * and the rest from the log).
   */
  dispatchStaged(): void {
    this.commitLog.takeStagedRequests((requests, blanks) => {
      for (let i = 0; i < requests.length; i++) {
        if (!this.dispatchAppended(requests[i], requests[i].commitLogOffset, blanks[i])) break
      }
    })
    if (this.behindBytes() > 0) this.schedule()
  }

  /** Dispatches everything readable; returns the number of records dispatched. */
  doReput(): number {
    const commitLog = this.commitLog
    let dispatched = 0
    // One DataView per file walked, dropped when the pass ends (never kept past a close).
    const views = new DataViewCache()
    const minOffset = commitLog.getMinOffset()
    if (this.reputFromOffset < minOffset) this.reputFromOffset = minOffset
    while (this.reputFromOffset < commitLog.getMaxOffset()) {
      const view = commitLog.getData(this.reputFromOffset)
      if (view === null) break
      let leaveFile = false
      try {
        this.reputFromOffset = view.startOffset
        const buffer = view.buffer
        const limit = view.size
        let pos = 0
        while (pos < limit) {
          const request = checkRecord(buffer, pos, limit, false, undefined, views)
          if (request.status === 'OK' && request.commitLogOffset !== this.reputFromOffset) {
            request.status = 'BAD'
            request.reason = `header: physical offset ${request.commitLogOffset} at position ${this.reputFromOffset}`
          }
          if (request.status === 'OK') {
            if (!this.tryHandle(request)) return dispatched
            dispatched++
            pos += request.size
            this.reputFromOffset += request.size
          } else if (request.status === 'BLANK') {
            this.reputFromOffset = commitLog.rollNextFile(this.reputFromOffset)
            leaveFile = true
            break
          } else if (this.holdIncompleteTail && view.startOffset + limit >= commitLog.getMaxOffset() && runsPastEnd(buffer, pos, limit)) {
            return dispatched
          } else {
            // Readable data never holds a bad record unless the file was damaged under a running
            // store; skip the rest of the view (as RocketMQ does on a master) and report it.
            const bytes = request.status === 'LENGTH_MISMATCH' && request.size > 0 ? request.size : limit - pos
            const reason = request.reason ?? request.status
            this.skippedRanges.push({ offset: this.reputFromOffset, bytes, reason })
            if (this.skippedRanges.length > 100) this.skippedRanges.shift()
            this.events.onSkip(this.reputFromOffset, bytes, reason)
            this.reputFromOffset += bytes
            leaveFile = true
            break
          }
        }
      } finally {
        view.release()
      }
      if (!leaveFile && this.reputFromOffset >= commitLog.getMaxOffset()) break
    }
    return dispatched
  }

  /**
   * Runs the handler without letting a failure escape (dispatch also runs from a microtask, where
   * a throw would end the process). On failure the offset stays on this record, so the next run
   * retries it; the derived writes are idempotent.
   */
  private tryHandle(request: DispatchRequest): boolean {
    let ok: boolean | Promise<void>
    let error: unknown = null
    try {
      ok = this.handle.dispatch(request)
    } catch (e) {
      ok = false
      error = e
    }
    if (ok !== true && ok !== false) {
      this.waitFor(ok)
      return false
    }
    if (ok) {
      this.failed = false
      this.failureReason = ''
      return true
    }
    if (!this.failed) this.events.onFailure(request.commitLogOffset, error)
    this.failed = true
    const why = error instanceof Error ? error.message : 'a consume queue could not be written'
    this.failureReason = `dispatch is stuck at commit-log offset ${request.commitLogOffset}: ${why}`
    return false
  }

  /**
   * Dispatch waits at a record until `settled`, then resumes. Not inline in tryHandle: a closure
   * there would make V8 allocate its context on every call, that is for every record dispatched.
   */
  private waitFor(settled: Promise<void>): void {
    this.waiting ??= settled.then(() => {
      this.waiting = null
      this.schedule()
    })
  }
}

/** True when the bytes from `pos` to `limit` are the start of a record rather than damage. */
function runsPastEnd(buffer: Buffer, pos: number, limit: number): boolean {
  if (limit - pos < 8) return true
  return buffer.readInt32BE(pos + OFFSET_MAGIC) === MESSAGE_MAGIC_CODE && buffer.readInt32BE(pos + OFFSET_TOTALSIZE) > limit - pos
}
