// The flush passes that reads run when their timers are overdue. A timer fires only when the event
// loop turns, and reads in a synchronous loop keep it from turning: after a burst of puts, such a
// loop left the burst's tail, the consume queues and the index dirty until close, which then
// synced them all at once. RocketMQ's flush services have threads of their own; here every read
// looks, and runs what its timer would have run (ServiceLoop.runIfDue).
import type { CommitLogFlusher } from './flusher.js'
import type { ServiceLoop } from './service-loop.js'

/** Reads look once every POLL_MASK + 1 calls: a clock read on every call would show in lookups. */
const POLL_MASK = 63

export class OverdueFlushes {
  private calls = 0

  constructor(
    private readonly flusher: CommitLogFlusher,
    /** The loops that sync derived files (consume queues with the index, compaction logs). */
    private readonly loops: readonly ServiceLoop[],
  ) {}

  /** Called by every read: every 64th call runs the passes whose timers are overdue. */
  tick(): void {
    this.calls = (this.calls + 1) & POLL_MASK
    if (this.calls !== 0) return
    const now = performance.now()
    this.flusher.runIfDue(now)
    for (const loop of this.loops) loop.runIfDue(now)
  }
}
