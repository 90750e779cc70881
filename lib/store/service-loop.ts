// A periodic async task that never overlaps itself and can be woken early or stopped, like
// RocketMQ's ServiceThread (waitForRunning / wakeup / shutdown). Timers are unref'd so a store
// left open does not keep the process alive.
//
// A timer fires only when the event loop turns. RocketMQ's services have threads of their own, but
// here a burst of synchronous calls (reads in a loop, say) would starve them: the store's calls
// then run the overdue ones themselves (runIfDue), as the timer would have.

export class ServiceLoop {
  private timer: NodeJS.Timeout | null = null
  private running: Promise<void> | null = null
  private stopped = false
  private wakeupPending = false
  /** When the pending timer is due (performance.now() ms); +Infinity when none is pending. */
  private dueAt = Number.POSITIVE_INFINITY

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly task: () => Promise<void> | void,
    private readonly onError: (name: string, error: unknown) => void,
  ) {}

  start(): void {
    this.schedule(this.intervalMs)
  }

  /** Runs the task soon instead of at the end of the interval (at most one pending wake-up). */
  wakeup(): void {
    if (this.stopped) return
    if (this.running !== null) {
      this.wakeupPending = true
      return
    }
    // A timer already due runs the task soon: a stream of puts each waking the loop would
    // otherwise replace it with a new one per put.
    if (this.timer !== null && this.dueAt <= performance.now()) return
    this.schedule(0)
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = setTimeout(() => void this.runOnce(), delayMs)
    this.timer.unref()
    this.dueAt = performance.now() + delayMs
  }

  /**
   * Runs the task now when its timer is overdue at `now` (performance.now() ms) and it is not
   * running: for callers that keep the event loop busy. The task's synchronous part runs here.
   */
  runIfDue(now: number): void {
    if (now < this.dueAt || this.timer === null || this.running !== null || this.stopped) return
    clearTimeout(this.timer)
    void this.runOnce()
  }

  private async runOnce(): Promise<void> {
    this.timer = null
    this.dueAt = Number.POSITIVE_INFINITY
    if (this.stopped || this.running !== null) return
    this.running = (async () => {
      try {
        await this.task()
      } catch (error) {
        this.onError(this.name, error)
      }
    })()
    await this.running
    this.running = null
    const again = this.wakeupPending
    this.wakeupPending = false
    this.schedule(again ? 0 : this.intervalMs)
  }

  /** Stops scheduling and waits for a run in progress to finish. */
  async stop(): Promise<void> {
    this.stopped = true
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    this.dueAt = Number.POSITIVE_INFINITY
    if (this.running !== null) await this.running
  }
}
