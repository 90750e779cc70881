// How a read-only opener learns that the writer (another process) appended: the writer's dispatch
// cannot wake it, and file-change events do not report writes made through a mapping, so the
// reader looks. A timer runs only while a consumer waits; each tick reads the end of the queues
// waited on (a stat of the folder and a 80 KiB positioned read at most, usually one unit) and
// wakes the consumers of a queue that grew. With nobody waiting there is no timer at all.

/** Default milliseconds between two looks while a consumer waits. */
export const FOLLOW_INTERVAL_MS = 4

export interface FollowTarget {
  /** The queues consumers wait on now. */
  waited(): Iterable<[string, number]>
  /** The queue's end as the reader knows it, without reading. */
  knownEnd(topic: string, queueId: number): number
  /** Reads the queue's end again. */
  readEnd(topic: string, queueId: number): number
  /** Wakes the consumers of a queue. */
  wake(topic: string, queueId: number): void
  hasWaiters(): boolean
}

export class Follower {
  private timer: NodeJS.Timeout | null = null
  /** Ticks run, for stats. */
  ticks = 0

  constructor(
    private readonly target: FollowTarget,
    readonly intervalMs: number,
  ) {}

  /** A consumer started waiting: look every intervalMs until none waits. */
  watch(): void {
    if (this.timer !== null) return
    // Ref'd on purpose: a process whose consumer waits for messages stays alive, as with a writer.
    this.timer = setInterval(() => this.tick(), this.intervalMs)
  }

  /** One look at every waited queue. */
  tick(): void {
    this.ticks++
    const grown: [string, number][] = []
    for (const [topic, queueId] of this.target.waited()) {
      const before = this.target.knownEnd(topic, queueId)
      if (this.target.readEnd(topic, queueId) !== before) grown.push([topic, queueId])
    }
    for (const [topic, queueId] of grown) this.target.wake(topic, queueId)
    if (!this.target.hasWaiters()) this.stop()
  }

  stop(): void {
    if (this.timer === null) return
    clearInterval(this.timer)
    this.timer = null
  }

  get watching(): boolean {
    return this.timer !== null
  }
}
