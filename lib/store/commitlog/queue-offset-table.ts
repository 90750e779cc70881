// The next queue offset per (topic, queueId): RocketMQ's topicQueueTable, which the append path
// reads and advances for every record it writes.
import { RecentTopics } from '../topics/recent-topics.js'

/**
 * Arrays indexed by queue id under a per-topic map, so the append path builds no `topic-queueId`
 * key string; the arrays of recent topics are found without the map (RecentTopics).
 */
export class QueueOffsetTable {
  private readonly topics = new Map<string, number[]>()
  private readonly recent = new RecentTopics<number[]>()
  /**
   * Asked for a queue the table does not know: a queue whose consume queue a clean reopen left
   * closed answers with its end (opening it); an unknown queue starts at 0.
   */
  missing: ((topic: string, queueId: number) => number) | null = null

  get(topic: string, queueId: number): number {
    const queues = this.queuesOf(topic)
    const known = queues === undefined ? undefined : queues[queueId]
    return known ?? this.missing?.(topic, queueId) ?? 0
  }

  set(topic: string, queueId: number, nextOffset: number): void {
    let queues = this.queuesOf(topic)
    if (queues === undefined) {
      queues = []
      this.topics.set(topic, queues)
      this.recent.keep(topic, queues)
    }
    queues[queueId] = nextOffset
  }

  clear(): void {
    this.topics.clear()
    this.recent.clear()
  }

  private queuesOf(topic: string): number[] | undefined {
    let queues = this.recent.find(topic)
    if (queues !== undefined) return queues
    queues = this.topics.get(topic)
    if (queues !== undefined) this.recent.keep(topic, queues)
    return queues
  }
}
