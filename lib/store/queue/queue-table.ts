// The consume-queue table: every (topic, queueId) queue of a store, loaded from consumequeue/ at
// open, created by dispatch on a queue's first message, flushed on the consume-queue schedule.
import * as fs from 'node:fs'

import { validateTopic } from '../commitlog/record.js'
import type { MessageStoreConfig } from '../config.js'
import type { StoreCheckpoint } from '../store-checkpoint.js'
import type { StorePaths } from '../store-paths.js'
import { ConsumeQueue, type CommitLogView } from './consume-queue.js'

/** A queue folder name: the decimal queue id. */
const QUEUE_DIR_PATTERN = /^\d{1,10}$/

export class ConsumeQueueTable {
  private readonly topics = new Map<string, Map<number, ConsumeQueue>>()
  private lastThoroughFlush: number

  constructor(
    private readonly paths: StorePaths,
    private readonly fileSize: number,
    private readonly commitLog: CommitLogView,
    now: number,
  ) {
    this.lastThoroughFlush = now
  }

  /**
   * Loads every queue found on disk. A queue that fails to load is handed to `onFailure` (which
   * discards it: dispatch rebuilds it); folders that are not a valid topic or queue id are ignored.
   */
  load(onFailure: (queue: ConsumeQueue, reason: string) => void): void {
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
        const queue = this.findOrCreate(topic, Number(name))
        try {
          queue.load()
        } catch (error) {
          onFailure(queue, (error as Error).message)
        }
      }
    }
  }

  find(topic: string, queueId: number): ConsumeQueue | null {
    return this.topics.get(topic)?.get(queueId) ?? null
  }

  findOrCreate(topic: string, queueId: number): ConsumeQueue {
    let queues = this.topics.get(topic)
    if (queues === undefined) {
      queues = new Map()
      this.topics.set(topic, queues)
    }
    let queue = queues.get(queueId)
    if (queue === undefined) {
      queue = new ConsumeQueue(topic, queueId, this.paths.consumeQueues, this.fileSize, this.commitLog)
      queues.set(queueId, queue)
    }
    return queue
  }

  /** Shuts a queue down, deletes its folder and forgets it. */
  discard(queue: ConsumeQueue): void {
    queue.shutdown()
    fs.rmSync(this.paths.consumeQueue(queue.topic, queue.queueId), { recursive: true, force: true })
    this.topics.get(queue.topic)?.delete(queue.queueId)
  }

  /** Destroys every queue (their files included). */
  destroyAll(): void {
    for (const queue of this.all()) queue.destroy()
    this.topics.clear()
  }

  /** The queues of one topic, by queue id. */
  queuesOf(topic: string): ConsumeQueue[] {
    return [...(this.topics.get(topic)?.values() ?? [])].sort((a, b) => a.queueId - b.queueId)
  }

  /** The queue ids a topic has, ascending. */
  queueIds(topic: string): number[] {
    return [...(this.topics.get(topic)?.keys() ?? [])].sort((a, b) => a - b)
  }

  /** The topics that have queues. */
  topicNames(): string[] {
    return [...this.topics.keys()]
  }

  *all(): Generator<ConsumeQueue> {
    for (const queues of this.topics.values()) yield* queues.values()
  }

  get topicCount(): number {
    return this.topics.size
  }

  /** Number of queues. */
  get size(): number {
    let count = 0
    for (const queues of this.topics.values()) count += queues.size
    return count
  }

  /** How many queues there are and how many units they hold in all (the shutdown record's figures). */
  summary(): { queueCount: number; queueUnitSum: number } {
    let queueCount = 0
    let queueUnitSum = 0
    for (const queue of this.all()) {
      queueCount++
      queueUnitSum += queue.getMaxOffsetInQueue()
    }
    return { queueCount, queueUnitSum }
  }

  /** The largest commit-log end any queue points at, -1 without units. */
  maxPhysicOffset(): number {
    let max = -1
    for (const queue of this.all()) max = Math.max(max, queue.getMaxPhysicOffset())
    return max
  }

  /** Raises each queue's min offset past units that point below the commit log's min offset. */
  correctMinOffset(minPhy: number): void {
    for (const queue of this.all()) queue.correctMinOffset(minPhy)
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
  ): Promise<void> {
    const thorough = now >= this.lastThoroughFlush + config.flushConsumeQueueThoroughInterval
    // The checkpoint may only claim the logics time the queues had before this flush began.
    const logicsMsgTimestamp = checkpoint.logicsDispatchedTimestamp
    if (thorough) this.lastThoroughFlush = now
    for (const queue of [...this.all()]) await queue.flushAsync(thorough ? 0 : config.flushConsumeQueueLeastPages)
    if (thorough) {
      if (logicsMsgTimestamp > 0) checkpoint.logicsMsgTimestamp = logicsMsgTimestamp
      checkpoint.flush()
    }
  }

  /** Flushes everything on the calling thread (close), retrying a queue up to three times. */
  flushAll(checkpoint?: StoreCheckpoint): void {
    const logicsMsgTimestamp = checkpoint?.logicsDispatchedTimestamp ?? 0
    for (const queue of this.all()) for (let i = 0; i < 3 && !queue.flush(0); i++);
    if (checkpoint !== undefined && logicsMsgTimestamp > 0) checkpoint.logicsMsgTimestamp = logicsMsgTimestamp
  }

  shutdown(): void {
    for (const queue of this.all()) queue.shutdown()
  }
}
