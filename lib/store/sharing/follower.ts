// How a read-only opener learns that the writer (another process) appended: the writer's dispatch
// cannot wake it directly, so after each dispatch pass that wrote units the writer touches the
// store's `arrivals` file (arrivals-file.ts), and the reader watches that file. A change, and every
// new wait, makes the reader look: one 20-byte positioned read after the known end of each queue
// waited on (the folder is listed again at most every 100 ms, or when that unit is there), and the
// consumers of a queue whose end moved are woken. Between changes the reader sleeps.
//
// A slow look every intervalMs while a consumer waits covers what the watch cannot: a file system
// without change events, a writer of an older version that does not touch the file, a file not
// made yet (the watch is tried again at each slow look), a change missed while the watch was set up.
// With nobody waiting there is no timer, and changes are ignored.
import type * as fs from 'node:fs'

import { watchArrivals } from './arrivals-file.js'

/** Default milliseconds between two slow looks while a consumer waits (the fallback of the watch). */
export const FOLLOW_INTERVAL_MS = 200

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
  /** The slow look, set while consumers wait. */
  private timer: NodeJS.Timeout | null = null
  private watcher: fs.FSWatcher | null = null
  /** A look is due on the next turn of the event loop. */
  private lookDue = false
  private stopped = false
  /** The end each waited queue had at the last look (queues no longer waited on are dropped). */
  private ends = new Map<string, number>()
  /** Looks taken since open, for stats. */
  ticks = 0
  /** Changes of the arrivals file seen since open, for stats. */
  signals = 0

  constructor(
    private readonly target: FollowTarget,
    readonly intervalMs: number,
    /** The writer's arrivals file, or null to rely on the slow look alone. */
    private readonly arrivalsPath: string | null,
  ) {}

  /**
   * A consumer started waiting: a look on the next turn (it may have read just before an append
   * whose touch came before it waited), and from then on at each change and each slow look.
   */
  watch(): void {
    if (this.stopped) return
    // A missing file is tried again at the slow looks, not at every wait.
    if (this.timer === null) this.arm()
    this.lookSoon()
    // Ref'd on purpose: a process whose consumer waits for messages stays alive, as with a writer.
    this.timer ??= setTimeout(() => this.slowLook(), this.intervalMs)
  }

  /** Whether the arrivals file is watched now. */
  get signalled(): boolean {
    return this.watcher !== null
  }

  private arm(): void {
    if (this.watcher !== null || this.arrivalsPath === null) return
    this.watcher = watchArrivals(
      this.arrivalsPath,
      () => {
        this.signals++
        if (this.timer !== null) this.lookSoon()
      },
      () => {
        // Replaced or gone: drop this watch; the next slow look (or wait) watches the file anew.
        this.disarm()
        if (this.timer !== null) this.lookSoon()
      },
    )
  }

  private disarm(): void {
    this.watcher?.close()
    this.watcher = null
  }

  private lookSoon(): void {
    if (this.lookDue) return
    this.lookDue = true
    setImmediate(() => {
      this.lookDue = false
      if (!this.stopped && this.timer !== null && !this.tick()) this.idle()
    })
  }

  private slowLook(): void {
    this.timer = null
    if (this.stopped) return
    this.arm()
    if (this.tick()) this.timer = setTimeout(() => this.slowLook(), this.intervalMs)
    else this.ends.clear()
  }

  /** Nobody waits: no timer; changes are ignored until the next wait. */
  private idle(): void {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    this.ends.clear()
  }

  /**
   * One look at every waited queue: its consumers are woken when its end moved since the last
   * look, or when this look is the first to see them wait (they may have read just before an
   * append this look would not tell apart from the end it reads now). False once nobody waits.
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
    for (const [topic, queueId] of grown) this.target.wake(topic, queueId)
    // Woken consumers wait again only after they read: what the look knows stays for them.
    return grown.length > 0 || this.target.hasWaiters()
  }

  stop(): void {
    this.stopped = true
    this.idle()
    this.disarm()
  }

  get watching(): boolean {
    return this.timer !== null
  }
}
