// Dispatch (RocketMQ's ReputMessageService): reads the commit log from the last dispatched offset
// and feeds each record to the consume queues and the index, in commit-log order. A consumer sees a
// message only once it is dispatched. Dispatch runs on the JS thread in batches: right after puts
// (a microtask, so an awaited put is visible to the next read) and before every read.
import { checkRecord, type DispatchRequest } from './commitlog/format.js'
import type { CommitLog } from './commit-log.js'

export type DispatchHandler = (request: DispatchRequest) => void

export class Dispatcher {
  /** The commit-log offset of the next record to dispatch. */
  reputFromOffset = 0
  private readonly commitLog: CommitLog
  private readonly handle: DispatchHandler
  private scheduled = false
  private stopped = false
  /** Records skipped because they failed their checks while being dispatched. */
  skippedRanges: { offset: number; bytes: number; reason: string }[] = []

  constructor(commitLog: CommitLog, handle: DispatchHandler) {
    this.commitLog = commitLog
    this.handle = handle
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

  /** Dispatches everything readable; returns the number of records dispatched. */
  doReput(): number {
    const commitLog = this.commitLog
    let dispatched = 0
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
          const request = checkRecord(buffer, pos, limit, false)
          if (request.status === 'OK') {
            this.handle(request)
            dispatched++
            pos += request.size
            this.reputFromOffset += request.size
          } else if (request.status === 'BLANK') {
            this.reputFromOffset = commitLog.rollNextFile(this.reputFromOffset)
            leaveFile = true
            break
          } else {
            // Readable data never holds a bad record unless the file was damaged under a running
            // store; skip the rest of the view (as RocketMQ does on a master) and report it.
            const bytes = request.status === 'LENGTH_MISMATCH' && request.size > 0 ? request.size : limit - pos
            this.skippedRanges.push({ offset: this.reputFromOffset, bytes, reason: request.reason ?? request.status })
            if (this.skippedRanges.length > 100) this.skippedRanges.shift()
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
}
