// Which queue a put without a queueId goes to, as Kafka's default partitioner picks a partition:
// a message with keys goes to murmur2(keys) mod the topic's write queues, so one key always lands
// in one queue (and keeps its order there); a message without keys goes round robin. A topic the
// table does not know has one queue, queue 0 (create it to spread its messages).
import { Buffer } from 'node:buffer'
import type { Message } from '../types.js'
import type { TopicTable } from './topic-table.js'

const MURMUR_SEED = 0x9747b28c
const MURMUR_M = 0x5bd1e995
const MURMUR_R = 24

/**
 * MurmurHash2, 32-bit, as Kafka's partitioner computes it over the key's bytes (so a key lands in
 * the queue whose number Kafka would give its partition, for the same count).
 */
export function murmur2(data: Uint8Array): number {
  const length = data.length
  let h = MURMUR_SEED ^ length
  const whole = length & ~3
  for (let i = 0; i < whole; i += 4) {
    let k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
    k = Math.imul(k, MURMUR_M)
    k ^= k >>> MURMUR_R
    k = Math.imul(k, MURMUR_M)
    h = Math.imul(h, MURMUR_M) ^ k
  }
  // The 1 to 3 bytes past the last whole word (Kafka's switch falls through from 3 to 1).
  const tail = length & 3
  if (tail === 3) h ^= data[whole + 2] << 16
  if (tail >= 2) h ^= data[whole + 1] << 8
  if (tail >= 1) {
    h ^= data[whole]
    h = Math.imul(h, MURMUR_M)
  }
  h ^= h >>> 13
  h = Math.imul(h, MURMUR_M)
  h ^= h >>> 15
  return h | 0
}

/** The queue of `key` among `queues`: Kafka's toPositive(murmur2(key)) % queues. */
export function queueForKey(key: string, queues: number): number {
  return (murmur2(Buffer.from(key, 'utf8')) & 0x7fffffff) % queues
}

export class TopicRouter {
  /** Next round-robin queue per topic, for messages without keys. */
  private readonly next = new Map<string, number>()

  constructor(private readonly table: TopicTable) {}

  /** The message with its queueId chosen when it has none (a copy; the caller's object is left alone). */
  route(message: Message): Message {
    if (message === null || typeof message !== 'object' || message.queueId !== undefined || typeof message.topic !== 'string')
      return message
    const entry = this.table.entry(message.topic)
    if (entry === undefined || entry.writeQueueNums <= 1) return message
    const queues = entry.writeQueueNums
    const keys = message.keys === undefined ? undefined : Array.isArray(message.keys) ? message.keys.join(' ') : message.keys
    let queueId: number
    if (typeof keys === 'string' && keys !== '') {
      queueId = queueForKey(keys, queues)
    } else {
      queueId = (this.next.get(message.topic) ?? 0) % queues
      this.next.set(message.topic, queueId + 1)
    }
    return { ...message, queueId }
  }
}
