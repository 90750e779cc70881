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
  /** Reads the queue's end again (for a compacted topic, its compaction log's). */
  readEnd(topic: string, queueId: number): number
  /** Wakes the consumers of a queue. */
  wake(topic: string, queueId: number): void
  hasWaiters(): boolean
}

export class Follower {
  private timer: NodeJS.Timeout | null = null
  /** The end each waited queue had at the last tick (queues no longer waited on are dropped). */
  private ends = new Map<string, number>()
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

  /**
   * One look at every waited queue: its consumers are woken when its end moved since the last
   * tick, or when this tick is the first to see them wait (they may have read just before an
   * append this tick would not tell apart from the end it reads now).
   */
  tick(): void {
    this.ticks++
    const ends = new Map<string, number>()
    const grown: [string, number][] = []
    for (const [topic, queueId] of this.target.waited()) {
      const key = `${topic}-${queueId}`
      const end = this.target.readEnd(topic, queueId)
      ends.set(key, end)
      if (this.ends.get(key) !== end) grown.push([topic, queueId])
    }
    this.ends = ends
    for (const [topic, queueId] of grown) this.target.wake(topic, queueId)
    if (!this.target.hasWaiters()) this.stop()
  }

  stop(): void {
    if (this.timer === null) return
    clearInterval(this.timer)
    this.timer = null
    this.ends.clear()
  }

  get watching(): boolean {
    return this.timer !== null
  }
}
