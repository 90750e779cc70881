// A few topics' values kept in front of a Map, found without a Map lookup. A put resolves each
// record's topic in several places (its bytes, its queues' next offsets, its index hash); a
// Map.get each time was a builtin call and a hash-table probe per place and record, where a put's
// records come from a handful of topics at a time.

/** Slots of a RecentTopics (a power of two): the topics a burst of puts writes to at once. */
export const RECENT_TOPIC_SLOTS = 16

/**
 * The slot of `topic`, from its length and three of its characters (the last two and the middle
 * one), so that names told apart by a number or a short suffix (Topic1, Topic12, orders-eu) do not
 * share one. Two topics that do share a slot take turns in it: the value is then looked up again.
 */
export function recentTopicSlot(topic: string): number {
  const n = topic.length
  const mix = n + 7 * topic.charCodeAt(n - 1) + 5 * topic.charCodeAt(n - 2) + 3 * topic.charCodeAt(n >> 1)
  // A one-character topic reads NaN past its start, which `| 0` makes 0.
  return (mix | 0) & (RECENT_TOPIC_SLOTS - 1)
}

/** The last value looked up for a topic of each slot. Holds the topic names only (short strings). */
export class RecentTopics<V> {
  private readonly topics: string[] = new Array<string>(RECENT_TOPIC_SLOTS).fill('')
  private readonly values: (V | undefined)[] = new Array<V | undefined>(RECENT_TOPIC_SLOTS).fill(undefined)

  /** The value kept for `topic`, or undefined when its slot holds another topic (or none). */
  find(topic: string): V | undefined {
    const slot = recentTopicSlot(topic)
    return this.topics[slot] === topic ? this.values[slot] : undefined
  }

  keep(topic: string, value: V): void {
    const slot = recentTopicSlot(topic)
    this.topics[slot] = topic
    this.values[slot] = value
  }

  clear(): void {
    this.topics.fill('')
    this.values.fill(undefined)
  }
}
