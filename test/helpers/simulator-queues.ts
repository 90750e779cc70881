// The plain topics of the simulator (test/helpers/simulator.ts): random reads with tag filters,
// and the walk of every queue after a reopen. Every queue is gap-free from its minimum (which
// retention moves) with increasing commit-log offsets at or above the commit log's minimum, every
// message is found by its offset and its key, and nothing is served twice or changed.
import type { ModelMessage, SimHost } from './simulator-model.js'

export const TOPICS = ['sim-a', 'sim-b']
export const QUEUES = 3
export const TAGS = ['red', 'green', 'blue']

/** A message of a plain topic: a unique key (sometimes with a shared one), tags, properties, a body. */
export function newPlainMessage(host: SimHost, key: string): ModelMessage {
  const topic = TOPICS[host.int(TOPICS.length)]
  const keys = host.int(4) === 0 ? [key, `shared-${host.int(3)}`] : [key]
  const properties: Record<string, string> = {}
  for (let i = host.int(3); i > 0; i--) properties[`p${host.int(5)}`] = `v${host.int(1000)}`
  const length = host.int(8) === 0 ? 1500 + host.int(2500) : host.int(400)
  const body = Buffer.alloc(length)
  for (let i = 0; i < length; i++) body[i] = host.int(256)
  return {
    key,
    topic,
    queueId: host.int(QUEUES),
    tags: TAGS[host.int(TAGS.length)],
    keys,
    properties,
    body,
    wroteOffset: -1,
    wroteBytes: 0,
    queueOffset: -1,
    durable: false,
    acked: false,
    present: true,
    putMs: Date.now(),
  }
}

/** One read from a random offset (sometimes below the minimum, sometimes past the end). */
export function readQueue(host: SimHost): void {
  const store = host.store!
  const topic = TOPICS[host.int(TOPICS.length)]
  const queueId = host.int(QUEUES)
  const min = store.getMinOffsetInQueue(topic, queueId)
  const max = store.getMaxOffsetInQueue(topic, queueId)
  const offset = host.int(max + 2)
  const filter = host.int(3) === 0 ? [TAGS[host.int(TAGS.length)]] : undefined
  const got = store.getMessage('reader', topic, queueId, offset, 1 + host.int(16), filter === undefined ? undefined : { tags: filter })
  let previous = offset - 1
  for (const found of got.messages) {
    const m = host.matchServed(found)
    host.check(
      m.topic === topic && m.queueId === queueId,
      () => `getMessage(${topic}/${queueId}) served ${m.key} of ${m.topic}/${m.queueId}`,
    )
    host.check(
      found.queueOffset > previous,
      () => `getMessage(${topic}/${queueId}, ${offset}) served queue offset ${found.queueOffset} after ${previous}`,
    )
    if (filter !== undefined) host.check(filter.includes(m.tags), () => `getMessage with tags ${filter} served tag ${m.tags}`)
    else if (!host.damaged)
      host.check(
        found.queueOffset === previous + 1,
        () => `getMessage(${topic}/${queueId}, ${offset}) skipped to ${found.queueOffset} after ${previous}`,
      )
    previous = found.queueOffset
  }
  if (offset < min && !host.damaged)
    // Below what retention left: nothing, and where to go on from.
    host.check(
      got.status === 'OFFSET_TOO_SMALL' && got.nextBeginOffset === min && got.messages.length === 0,
      () => `getMessage(${topic}/${queueId}, ${offset}) below min ${min}: ${got.status}, next ${got.nextBeginOffset}`,
    )
  else if (filter === undefined && offset < max && !host.damaged)
    host.check(
      got.status === 'FOUND' && got.messages.length > 0,
      () => `getMessage(${topic}/${queueId}, ${offset}) below max ${max}: ${got.status}`,
    )
}

/** Walks every queue from its minimum; returns the keys of the messages served. */
export function walkQueues(host: SimHost, minPhy: number): Set<string> {
  const store = host.store!
  const served = new Set<string>()
  for (const topic of TOPICS) {
    for (let queueId = 0; queueId < QUEUES; queueId++) {
      const min = store.getMinOffsetInQueue(topic, queueId)
      const max = store.getMaxOffsetInQueue(topic, queueId)
      let expected = min
      let lastPhy = -1
      while (expected < max) {
        const got = store.getMessage('checker', topic, queueId, expected, 32)
        if (host.damaged && got.messages.length === 0) {
          // A damaged unit: the read skips it (a dropped record, allowed after damage).
          expected = Math.max(expected + 1, got.nextBeginOffset)
          continue
        }
        host.check(
          got.status === 'FOUND' && got.messages.length > 0,
          () => `${topic}/${queueId} read at ${expected} below max ${max}: ${got.status}`,
        )
        for (const found of got.messages) {
          // After damage a repair may drop records (a damaged unit is skipped), never reorder them.
          if (host.damaged && found.queueOffset > expected) expected = found.queueOffset
          if (host.damaged && found.queueOffset < expected)
            host.check(false, () => `${topic}/${queueId}: queue offset ${found.queueOffset} handed out again after damage (at ${expected})`)
          host.check(
            found.queueOffset === expected,
            () => `${topic}/${queueId}: gap, expected queue offset ${expected}, found ${found.queueOffset}`,
          )
          host.check(found.commitLogOffset > lastPhy, () => `${topic}/${queueId}: commit-log offsets not increasing at ${expected}`)
          host.check(
            found.commitLogOffset >= minPhy,
            () => `${topic}/${queueId}: served ${found.commitLogOffset} below the min offset ${minPhy}`,
          )
          lastPhy = found.commitLogOffset
          const m = host.matchServed(found)
          host.check(!served.has(m.key), () => `${m.key} served twice`)
          served.add(m.key)
          const byOffset = store.lookMessageByOffset(m.wroteOffset)
          host.check(byOffset !== null && byOffset.keys[0] === m.key, () => `${m.key} not found by its commit-log offset ${m.wroteOffset}`)
          const hits = store.queryMessage(topic, m.key, 8, 0, Date.now() + 3_600_000).messages
          // Damage to an index entry drops the key (allowed after damage); a hit is always right.
          host.check(host.damaged || hits.some((h) => h.commitLogOffset === m.wroteOffset), () => `${m.key} not found by key`)
          for (const hit of hits) host.check(hit.keys.includes(m.key), () => `index hit for ${m.key} is a record with keys ${hit.keys}`)
          expected++
        }
      }
    }
  }
  return served
}
