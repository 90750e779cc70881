// A periodic async task that never overlaps itself and can be woken early or stopped, like
// RocketMQ's ServiceThread (waitForRunning / wakeup / shutdown). Timers are unref'd so a store
// left open does not keep the process alive.

export class ServiceLoop {
  private timer: NodeJS.Timeout | null = null
  private running: Promise<void> | null = null
  private stopped = false
  private wakeupPending = false

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
    this.schedule(0)
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = setTimeout(() => void this.runOnce(), delayMs)
    this.timer.unref()
  }

  private async runOnce(): Promise<void> {
    this.timer = null
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
    if (this.running !== null) await this.running
  }
}
