// How a read-only opener learns that the writer (another process) appended: the writer's dispatch
// cannot wake it, and file-change events do not report writes made through a mapping, so the
// reader looks. A timer runs only while a consumer waits; each tick reads the unit after the known
// end of each queue waited on (one 20-byte positioned read; the folder is listed again at most
// every 100 ms, or when that unit is there) and wakes the consumers of a queue whose end moved.
// After a second without arrivals the looks come half as often (the wake-up of a timer is most of
// a tick's cost). With nobody waiting there is no timer at all.

/** Default milliseconds between two looks while messages arrive. */
export const FOLLOW_INTERVAL_MS = 4
/** Without an arrival for this long, the looks come at twice the interval. */
const QUIET_AFTER_MS = 1000

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
  /** When a look last found a queue's end moved (Date.now()). */
  private lastArrival = 0

  constructor(
    private readonly target: FollowTarget,
    readonly intervalMs: number,
  ) {}

  /** A consumer started waiting: look every intervalMs until none waits. */
  watch(): void {
    if (this.timer !== null) return
    this.lastArrival = Date.now()
    this.schedule()
  }

  private schedule(): void {
    const quiet = Date.now() - this.lastArrival > QUIET_AFTER_MS
    // Ref'd on purpose: a process whose consumer waits for messages stays alive, as with a writer.
    this.timer = setTimeout(
      () => {
        this.timer = null
        if (this.tick()) this.schedule()
      },
      quiet ? 2 * this.intervalMs : this.intervalMs,
    )
  }

  /**
   * One look at every waited queue: its consumers are woken when its end moved since the last
   * tick, or when this tick is the first to see them wait (they may have read just before an
   * append this tick would not tell apart from the end it reads now). False once nobody waits.
   */
  tick(): boolean {
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
    if (grown.length > 0) this.lastArrival = Date.now()
    for (const [topic, queueId] of grown) this.target.wake(topic, queueId)
    // Woken consumers wait again only after they read: the timer (and what it knows) stays for them.
    if (grown.length > 0 || this.target.hasWaiters()) return true
    this.ends.clear()
    return false
  }

  stop(): void {
    if (this.timer === null) return
    clearTimeout(this.timer)
    this.timer = null
    this.ends.clear()
  }

  get watching(): boolean {
    return this.timer !== null
  }
}
