// What a store's topics are: those in the topic table (created, or configured for compaction) with
// their queue counts, and those that only have consume queues (puts named their queue ids).
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import type { TopicInfo } from '../types.js'
import type { TopicTable } from './topic-table.js'

/** The queues consume() without a queueId reads: the created count, else the queues there are (at least queue 0). */
export function topicQueueIds(topic: string, table: TopicTable, queues: ConsumeQueueTable): number[] {
  const entry = table.entry(topic)
  if (entry !== undefined) return Array.from({ length: entry.readQueueNums }, (_, i) => i)
  const ids = queues.queueIds(topic)
  return ids.length === 0 ? [0] : ids
}

export function listTopicInfos(table: TopicTable, queues: ConsumeQueueTable): TopicInfo[] {
  const infos = new Map<string, TopicInfo>()
  for (const topic of table.topics()) {
    const entry = table.entry(topic)!
    infos.set(topic, { topic, readQueueNums: entry.readQueueNums, writeQueueNums: entry.writeQueueNums, created: true })
  }
  for (const topic of queues.topicNames()) {
    if (infos.has(topic)) continue
    const ids = queues.queueIds(topic)
    const count = ids.length === 0 ? 0 : ids[ids.length - 1] + 1
    infos.set(topic, { topic, readQueueNums: count, writeQueueNums: count, created: false })
  }
  return [...infos.values()].sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : 0))
}
