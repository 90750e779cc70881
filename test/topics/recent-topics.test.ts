// Values kept per topic in front of a Map (topics/recent-topics.ts), and the structures that use
// them: what they answer must not depend on which topics happen to share a slot.
import { describe, expect, it } from 'vitest'

import { QueueOffsetTable } from '../../lib/store/commitlog/queue-offset-table.js'
import { indexKeyHashesInto } from '../../lib/store/index/index-keys.js'
import { indexKeyHash } from '../../lib/store/index/index-layout.js'
import { RECENT_TOPIC_SLOTS, RecentTopics, recentTopicSlot } from '../../lib/store/topics/recent-topics.js'

/** Topics that all fall into one slot. */
function sameSlotTopics(count: number): string[] {
  const slot = recentTopicSlot('t0')
  const found: string[] = []
  for (let i = 0; found.length < count; i++) if (recentTopicSlot(`t${i}`) === slot) found.push(`t${i}`)
  return found
}

describe('recentTopicSlot', () => {
  it('is a slot for every name, the empty and one-character ones too', () => {
    for (const topic of ['', 'a', 'ab', 'orders', 'SCHEDULE_TOPIC_XXXX', '%RETRY%group', 'x'.repeat(127)]) {
      const slot = recentTopicSlot(topic)
      expect(Number.isInteger(slot) && slot >= 0 && slot < RECENT_TOPIC_SLOTS).toBe(true)
    }
  })

  it('sets apart names told apart by a trailing number', () => {
    const slots = new Set(['Topic0', 'Topic1', 'Topic2', 'Topic3'].map(recentTopicSlot))
    expect(slots.size).toBe(4)
  })
})

describe('RecentTopics', () => {
  it('answers the value kept for a topic, by the name rather than the string object', () => {
    const recent = new RecentTopics<number>()
    expect(recent.find('orders')).toBeUndefined()
    recent.keep('orders', 7)
    expect(recent.find(['ord', 'ers'].join(''))).toBe(7)
    expect(recent.find('orders2')).toBeUndefined()
  })

  it('topics of one slot take turns: the other one is not found, never answered wrongly', () => {
    const [a, b] = sameSlotTopics(2)
    const recent = new RecentTopics<string>()
    recent.keep(a, 'A')
    recent.keep(b, 'B')
    expect(recent.find(a)).toBeUndefined()
    expect(recent.find(b)).toBe('B')
  })

  it('forgets everything on clear', () => {
    const recent = new RecentTopics<number>()
    recent.keep('orders', 1)
    recent.clear()
    expect(recent.find('orders')).toBeUndefined()
  })
})

describe('QueueOffsetTable', () => {
  it('keeps each queue its own offset, however its topics share the recent slots', () => {
    const table = new QueueOffsetTable()
    const model = new Map<string, number>()
    const topics = [...sameSlotTopics(5), ...Array.from({ length: 40 }, (_, i) => `topic-${i}`)]
    let seed = 12345
    const next = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
      return seed
    }
    for (let n = 0; n < 20_000; n++) {
      const topic = topics[next() % topics.length]
      const queueId = next() % 4
      const key = `${topic}/${queueId}`
      const offset = table.get(topic, queueId)
      expect(offset).toBe(model.get(key) ?? 0)
      table.set(topic, queueId, offset + 1)
      model.set(key, offset + 1)
    }
  })

  it('asks `missing` for a queue it does not know, also after clear', () => {
    const table = new QueueOffsetTable()
    table.missing = (topic, queueId) => (topic === 'orders' ? 100 + queueId : 0)
    table.set('orders', 0, 5)
    expect(table.get('orders', 0)).toBe(5)
    expect(table.get('orders', 1)).toBe(101)
    table.clear()
    expect(table.get('orders', 0)).toBe(100)
  })
})

describe('index key hashes of recent topics', () => {
  it('are the hashes of topic#key whichever topics came before', () => {
    const out = new Int32Array(4)
    const topics = [...sameSlotTopics(3), 'orders', 'Orders', 'orders']
    for (const topic of [...topics, ...topics.reverse()]) {
      const count = indexKeyHashesInto({ topic, sysFlag: 0, uniqKey: undefined, keys: 'k1 k2' }, out)
      expect(count).toBe(2)
      expect([out[0], out[1]]).toEqual([indexKeyHash(`${topic}#k1`), indexKeyHash(`${topic}#k2`)])
    }
  })
})
