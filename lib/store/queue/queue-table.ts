// The consume-queue table: every (topic, queueId) queue of a store, listed from consumequeue/ at
// open, created by dispatch on a queue's first message, flushed on the consume-queue schedule.
//
// Deferred queues: after a clean close (a shutdown record vouches for every queue) open only lists
// the queue folders; each queue is opened and recovered on first use (a read, a put, dispatch), so
// reopen follows the work, not the number of queues. Until then a deferred queue counts in `size`
// and `summary()` with the figures the shutdown record gave, and is skipped by the passes that
// walk `all()` (flush, cleanup): nothing in it changed since the close, and cleanup catches up with
// it when it is opened.
import * as fs from 'node:fs'

import { validateTopic } from '../commitlog/record.js'
import type { MessageStoreConfig } from '../config.js'
import type { StoreCheckpoint } from '../store-checkpoint.js'
import type { StorePaths } from '../store-paths.js'
import type { MappingBudget } from '../mapped/mapping-budget.js'
import { ConsumeQueue, type CommitLogView } from './consume-queue.js'
import { QueueDirectories } from './queue-directories.js'
import { QueueEnds, type RecordedQueueEnds } from './queue-ends.js'
import { QueueWriteBack } from './queue-write-back.js'

/**
 * Queues synced at once, by close (flushAllAsync) and by the periodic pass: more than libuv's 4
 * threads, so the pool stays busy and the syncs share journal commits. The pass starts that many
 * at once also because a pass run by a burst of reads (overdue-flushes.ts) starts only what
 * it starts before its first wait: no completion is seen until the burst ends.
 */
const FLUSH_PARALLEL = 16

/** Slots of ConsumeQueueTable's cache of recent queues: 2^6, the top 6 bits of recentSlot's hash. */
const RECENT_SLOTS = 64

/** A queue's slot in that cache: a multiplicative hash of its id and its topic's length and last character. */
function recentSlot(topic: string, queueId: number): number {
  const tail = topic.charCodeAt(topic.length - 1) + (topic.length << 8)
  return (Math.imul(queueId, 0x9e3779b1) ^ Math.imul(tail, 0x85ebca77)) >>> 26
}

/** A queue folder name: the decimal queue id. */
const QUEUE_DIR_PATTERN = /^\d{1,10}$/

/** How deferred queues are opened, and what the shutdown record says about them as a whole. */
export interface DeferredQueues {
  /** Units in all the deferred queues (the shutdown record's sum). */
  unitSum: number
  /** The largest commit-log end a deferred queue may point at (the shutdown record's log end). */
  maxPhysicOffset: number
  /** Each queue's end at the last clean close (the queue-ends file), or null without a trusted one. */
  ends: RecordedQueueEnds | null
  /**
   * Loads and recovers a deferred queue on its first use, given its end at the close (null when
   * not known); may throw (the queue stays deferred).
   */
  open(queue: ConsumeQueue, recordedEnd: number | null): void
}

export class ConsumeQueueTable {
  private readonly topics = new Map<string, Map<number, ConsumeQueue>>()
  /** Queues listed on disk and not opened yet, by topic. */
  private readonly listed = new Map<string, Set<number>>()
  private listedCount = 0
  private deferred: DeferredQueues | null = null
  private lastThoroughFlush: number
  /** Each queue's end at the last periodic pass (see flushAsync). */
  private readonly passEnds = new WeakMap<ConsumeQueue, number>()
  /** Queues dispatch found lately, by recentSlot: every record asks, and two map lookups showed. */
  private readonly recent: (ConsumeQueue | undefined)[] = new Array(RECENT_SLOTS).fill(undefined)
  private readonly writeBack = new QueueWriteBack()
  /** Makes queue folders and shares their directory syncs between queues. */
  private readonly directories = new QueueDirectories()

  constructor(
    private readonly paths: StorePaths,
    private readonly fileSize: number,
    private readonly commitLog: CommitLogView,
    now: number,
    /** Maps queue files on first use and unmaps idle ones; null keeps every file mapped. */
    readonly budget: MappingBudget | null = null,
  ) {
    this.lastThoroughFlush = now
  }

  /**
   * Loads every queue found on disk. A queue that fails to load is handed to `onFailure` (which
   * discards it: dispatch rebuilds it); folders that are not a valid topic or queue id are ignored.
   */
  load(onFailure: (queue: ConsumeQueue, reason: string) => void): void {
    this.list()
    this.loadListed(onFailure)
  }

  /** Lists the queue folders on disk without opening any queue (one readdir per topic). */
  list(): void {
    let topics: string[]
    try {
      topics = fs.readdirSync(this.paths.consumeQueues)
    } catch {
      return
    }
    for (const topic of topics) {
      if (validateTopic(topic) !== null) continue
      for (const name of fs.readdirSync(this.paths.consumeQueueTopic(topic))) {
        if (!QUEUE_DIR_PATTERN.test(name)) continue
        const queueId = Number(name)
        if (this.topics.get(topic)?.has(queueId) === true) continue
        let ids = this.listed.get(topic)
        if (ids === undefined) this.listed.set(topic, (ids = new Set()))
        if (!ids.has(queueId)) this.listedCount++
        ids.add(queueId)
      }
    }
  }

  /** Loads every listed queue now (open without a shutdown record, or one that failed its checks). */
  loadListed(onFailure: (queue: ConsumeQueue, reason: string) => void): void {
    const listed = [...this.listed].flatMap(([topic, ids]) => [...ids].map((queueId) => [topic, queueId] as const))
    this.listed.clear()
    this.listedCount = 0
    this.deferred = null
    for (const [topic, queueId] of listed) {
      const queue = this.findOrCreate(topic, queueId)
      try {
        queue.load()
      } catch (error) {
        onFailure(queue, (error as Error).message)
      }
    }
  }

  /** Leaves the listed queues closed: each is opened through `deferred.open` on its first use. */
  defer(deferred: DeferredQueues): void {
    this.deferred = deferred
  }

  /** Queues listed and not opened yet. */
  get deferredCount(): number {
    return this.listedCount
  }

  find(topic: string, queueId: number): ConsumeQueue | null {
    return this.topics.get(topic)?.get(queueId) ?? this.openDeferred(topic, queueId)
  }

  /** Opens a listed queue on its first use; null when the queue is not listed. */
  private openDeferred(topic: string, queueId: number): ConsumeQueue | null {
    const ids = this.listed.get(topic)
    if (ids === undefined || !ids.has(queueId) || this.deferred === null) return null
    const queue = new ConsumeQueue(topic, queueId, this.paths.consumeQueues, this.fileSize, this.commitLog, {
      budget: this.budget,
      directories: this.directories,
    })
    const deferred = this.deferred
    try {
      deferred.open(queue, deferred.ends?.get(topic, queueId) ?? null)
    } catch (error) {
      queue.shutdown()
      throw error
    }
    ids.delete(queueId)
    if (ids.size === 0) this.listed.delete(topic)
    this.listedCount--
    deferred.unitSum -= queue.getMaxOffsetInQueue()
    this.add(queue)
    return queue
  }

  private add(queue: ConsumeQueue): void {
    let queues = this.topics.get(queue.topic)
    if (queues === undefined) {
      queues = new Map()
      this.topics.set(queue.topic, queues)
    }
    queues.set(queue.queueId, queue)
  }

  findOrCreate(topic: string, queueId: number): ConsumeQueue {
    const slot = recentSlot(topic, queueId)
    const hit = this.recent[slot]
    if (hit !== undefined && hit.queueId === queueId && hit.topic === topic) return hit
    const queue = this.lookUpOrCreate(topic, queueId)
    this.recent[slot] = queue
    return queue
  }

  private lookUpOrCreate(topic: string, queueId: number): ConsumeQueue {
    const found = this.topics.get(topic)?.get(queueId) ?? this.openDeferred(topic, queueId)
    if (found !== null) return found
    let queues = this.topics.get(topic)
    if (queues === undefined) {
      queues = new Map()
      this.topics.set(topic, queues)
    }
    let queue = queues.get(queueId)
    if (queue === undefined) {
      queue = new ConsumeQueue(topic, queueId, this.paths.consumeQueues, this.fileSize, this.commitLog, {
        budget: this.budget,
        directories: this.directories,
      })
      queues.set(queueId, queue)
    }
    return queue
  }

  /** Shuts a queue down, deletes its folder and forgets it. */
  discard(queue: ConsumeQueue): void {
    queue.shutdown()
    fs.rmSync(this.paths.consumeQueue(queue.topic, queue.queueId), { recursive: true, force: true })
    this.topics.get(queue.topic)?.delete(queue.queueId)
    this.recent.fill(undefined)
  }

  /** Destroys every queue (their files included), deferred ones too. */
  destroyAll(): void {
    for (const queue of this.all()) queue.destroy()
    this.topics.clear()
    this.recent.fill(undefined)
    for (const [topic, ids] of this.listed) {
      for (const queueId of ids) fs.rmSync(this.paths.consumeQueue(topic, queueId), { recursive: true, force: true })
    }
    this.listed.clear()
    this.listedCount = 0
    this.deferred = null
  }

  /**
   * Every queue, the open ones first, then each deferred queue opened as the caller gets to it
   * (cleanup, once the commit log lost files, must visit them all; it may pause between queues).
   * A queue that cannot be opened now stays deferred; one that something else opened meanwhile
   * is skipped (opening it ran the same cleanup).
   */
  *allOpening(): Generator<ConsumeQueue> {
    yield* [...this.all()]
    for (const [topic, ids] of [...this.listed]) {
      for (const queueId of [...ids]) {
        let queue: ConsumeQueue | null = null
        try {
          queue = this.openDeferred(topic, queueId)
        } catch {
          // Out of descriptors, most likely: the queue is opened by its next use or the next pass.
        }
        if (queue !== null) yield queue
      }
    }
  }

  /** The queues of one topic, by queue id. */
  queuesOf(topic: string): ConsumeQueue[] {
    // Deferred queues of the topic are opened: the caller is about to use them.
    for (const queueId of [...(this.listed.get(topic) ?? [])]) this.openDeferred(topic, queueId)
    return [...(this.topics.get(topic)?.values() ?? [])].sort((a, b) => a.queueId - b.queueId)
  }

  /** The queue ids a topic has (deferred ones included, without opening them), ascending. */
  queueIds(topic: string): number[] {
    const ids = new Set([...(this.topics.get(topic)?.keys() ?? []), ...(this.listed.get(topic) ?? [])])
    return [...ids].sort((a, b) => a - b)
  }

  /** The topics that have queues, deferred ones included. */
  topicNames(): string[] {
    return [...new Set([...this.topics.keys(), ...this.listed.keys()])]
  }

  *all(): Generator<ConsumeQueue> {
    for (const queues of this.topics.values()) yield* queues.values()
  }

  get topicCount(): number {
    let count = this.topics.size
    for (const topic of this.listed.keys()) if (!this.topics.has(topic)) count++
    return count
  }

  /** Number of queues, deferred ones included. */
  get size(): number {
    let count = this.listedCount
    for (const queues of this.topics.values()) count += queues.size
    return count
  }

  /**
   * How many queues there are and how many units they hold in all (the shutdown record's
   * figures); deferred queues count with the units the last shutdown record gave them.
   */
  summary(): { queueCount: number; queueUnitSum: number } {
    let queueCount = this.listedCount
    let queueUnitSum = this.listedCount > 0 ? (this.deferred?.unitSum ?? 0) : 0
    for (const queue of this.all()) {
      queueCount++
      queueUnitSum += queue.getMaxOffsetInQueue()
    }
    return { queueCount, queueUnitSum }
  }

  /**
   * Every queue's end, for the queue-ends file of a clean close: open queues from their files,
   * deferred ones as the last close recorded them (left out when that is not known).
   */
  ends(): QueueEnds {
    const ends = new QueueEnds()
    for (const queue of this.all()) ends.set(queue.topic, queue.queueId, queue.getMaxOffsetInQueue())
    const recorded = this.listedCount > 0 ? (this.deferred?.ends ?? null) : null
    if (recorded === null) return ends
    for (const [topic, ids] of this.listed) {
      for (const queueId of ids) {
        const end = recorded.get(topic, queueId)
        if (end !== null) ends.set(topic, queueId, end)
      }
    }
    return ends
  }

  /** The largest commit-log end any queue points at (deferred ones: at most the record's end), -1 without units. */
  maxPhysicOffset(): number {
    let max = this.listedCount > 0 ? (this.deferred?.maxPhysicOffset ?? -1) : -1
    for (const queue of this.all()) max = Math.max(max, queue.getMaxPhysicOffset())
    return max
  }

  /** Raises each queue's min offset past units that point below the commit log's min offset. */
  correctMinOffset(minPhy: number): void {
    for (const queue of this.all()) queue.correctMinOffset(minPhy)
  }

  /** `units` were dispatched by a put: starts the write-back of the queues now and then (queue-write-back.ts). */
  writeBackBehind(units: number): void {
    // The table itself, not a closure over it: this runs once per put.
    this.writeBack.note(units, this)
  }

  /** Deletes the files whose units all point below `minPhy`. */
  deleteExpiredFiles(minPhy: number): void {
    for (const queue of this.all()) queue.deleteExpiredFile(minPhy)
  }

  truncateDirtyLogicFiles(phyOffset: number): void {
    for (const queue of this.all()) queue.truncateDirtyLogicFiles(phyOffset)
  }

  /**
   * One pass of the consume-queue flush: at least `flushConsumeQueueLeastPages` dirty pages per
   * queue, or everything once `flushConsumeQueueThoroughInterval` has passed since the last
   * thorough pass; a thorough pass then flushes the checkpoint too.
   */
  async flushAsync(
    config: Pick<MessageStoreConfig, 'flushConsumeQueueLeastPages' | 'flushConsumeQueueThoroughInterval'>,
    checkpoint: StoreCheckpoint,
    now: number,
    shouldStop: () => boolean = () => false,
  ): Promise<void> {
    const thorough = now >= this.lastThoroughFlush + config.flushConsumeQueueThoroughInterval
    // The checkpoint may only claim the logics time the queues had before this flush began.
    const logicsMsgTimestamp = checkpoint.logicsDispatchedTimestamp
    if (thorough) this.lastThoroughFlush = now
    const leastPages = thorough ? 0 : config.flushConsumeQueueLeastPages
    // A queue no dispatch reached since the last pass is flushed whole: leastPages batches the
    // syncs of a queue being written, and a quiet queue has nothing left to batch. Without this,
    // every queue keeps up to leastPages unsynced after a burst, and close pays a journal commit
    // for each of them.
    const passEnds = this.passEnds
    const flushOne = (queue: ConsumeQueue): Promise<boolean> => {
      const end = queue.getMaxOffsetInQueue()
      const quiet = passEnds.get(queue) === end
      passEnds.set(queue, end)
      return queue.flushAsync(quiet ? 0 : leastPages)
    }
    // A close stops the pass between queues (its own flush syncs every queue at once).
    const complete = await flushEach([...this.all()], FLUSH_PARALLEL, flushOne, shouldStop)
    if (thorough && complete) {
      if (logicsMsgTimestamp > 0) checkpoint.logicsMsgTimestamp = logicsMsgTimestamp
      checkpoint.flush()
    }
    // Files unused for the idle time are unmapped (a flushed or unflushed file alike: see MappedFile).
    this.budget?.sweep()
  }

  /** Flushes everything on the calling thread (close), retrying a queue up to three times. */
  flushAll(checkpoint?: StoreCheckpoint): void {
    const logicsMsgTimestamp = checkpoint?.logicsDispatchedTimestamp ?? 0
    for (const queue of this.all()) for (let i = 0; i < 3 && !queue.flush(0); i++);
    if (checkpoint !== undefined && logicsMsgTimestamp > 0) checkpoint.logicsMsgTimestamp = logicsMsgTimestamp
  }

  /**
   * flushAll with the syncs on the libuv pool, `parallel` queues at a time (close): the syncs of
   * thousands of queues, each created since the last flush, share journal commits instead of
   * paying one each. Throws the first failure once every queue has been tried.
   */
  async flushAllAsync(checkpoint?: StoreCheckpoint, parallel = FLUSH_PARALLEL): Promise<void> {
    // As flushAll: the checkpoint may claim only the logics time dispatched before the flush began.
    const logicsMsgTimestamp = checkpoint?.logicsDispatchedTimestamp ?? 0
    await flushEach([...this.all()], parallel, async (queue) => {
      for (let i = 0; i < 3 && !(await queue.flushAsync(0)); i++);
    })
    if (checkpoint !== undefined && logicsMsgTimestamp > 0) checkpoint.logicsMsgTimestamp = logicsMsgTimestamp
  }

  shutdown(): void {
    for (const queue of this.all()) queue.shutdown()
  }
}

/**
 * Runs `flush` over `queues`, `parallel` at a time, taking no new queue once `shouldStop` says so.
 * Every queue is tried even after a failure; the first failure is thrown once all have ended.
 * Returns false when it stopped before the last queue.
 */
async function flushEach(
  queues: readonly ConsumeQueue[],
  parallel: number,
  flush: (queue: ConsumeQueue) => Promise<unknown>,
  shouldStop: () => boolean = () => false,
): Promise<boolean> {
  let next = 0
  let stopped = false
  let failure: unknown = null
  const worker = async (): Promise<void> => {
    while (next < queues.length) {
      if (shouldStop()) {
        stopped = true
        return
      }
      const queue = queues[next++]
      try {
        await flush(queue)
      } catch (error) {
        failure ??= error
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(parallel, queues.length) }, worker))
  if (failure !== null) throw failure
  return !stopped
}
