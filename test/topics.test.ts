// Topics with queues: createTopic/listTopics, puts without a queueId (key hash or round robin), and
// consume() over every queue of a topic with an offset per queue.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MessageStore, MQStoreError, type MessageExt, type OpenOptions } from '../lib/index.js'
import { murmur2, queueForKey } from '../lib/store/topics/topic-router.js'
import { tempDir } from './helpers/tmp.js'

const open: MessageStore[] = []
afterEach(async () => {
  for (const store of open.splice(0)) await store.close()
})

const SMALL: OpenOptions = {
  mappedFileSizeCommitLog: 1 << 20,
  mappedFileSizeConsumeQueue: 20 * 1000,
  maxHashSlotNum: 100,
  maxIndexNum: 400,
}

async function openStore(dir: string): Promise<MessageStore> {
  const store = await MessageStore.open(dir, SMALL)
  open.push(store)
  return store
}

async function closeStore(store: MessageStore): Promise<void> {
  open.splice(open.indexOf(store), 1)
  await store.close()
}

describe('queue choice', () => {
  it("murmur2 gives the values Kafka's partitioner computes", () => {
    const cases: [string, number][] = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['a-little-bit-longer-string', -1486304829],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
      ['abc', 479470107],
    ]
    for (const [key, hash] of cases) expect(murmur2(Buffer.from(key)), key).toBe(hash)
    expect(queueForKey('foobar', 8)).toBe((-790332482 & 0x7fffffff) % 8)
  })
})

describe('topics', () => {
  it("createTopic is kept in config/topics.json in RocketMQ's shape and listTopics lists created and queue-only topics", async () => {
    const dir = tempDir()
    let store = await openStore(dir)
    expect(store.createTopic('orders', { queues: 4 })).toEqual({ topic: 'orders', readQueueNums: 4, writeQueueNums: 4, created: true })
    await store.putMessage({ topic: 'legacy', queueId: 2, body: 'x' })
    const file = JSON.parse(fs.readFileSync(join(dir, 'config', 'topics.json'), 'utf8'))
    expect(file.topicConfigTable.orders).toMatchObject({ topicName: 'orders', readQueueNums: 4, writeQueueNums: 4, perm: 6 })
    await closeStore(store)
    store = await openStore(dir)
    expect(store.listTopics()).toEqual([
      { topic: 'legacy', readQueueNums: 3, writeQueueNums: 3, created: false },
      { topic: 'orders', readQueueNums: 4, writeQueueNums: 4, created: true },
    ])
  })

  it('refuses a bad queue count or topic name with INVALID_OPTION', async () => {
    const store = await openStore(tempDir())
    for (const queues of [0, -1, 1.5, 70_000]) {
      expect(() => store.createTopic('t', { queues })).toThrow(MQStoreError)
    }
    expect(() => store.createTopic('../x', { queues: 2 })).toThrow(/bad topic name/)
  })

  it('a smaller queue count never hides queues that hold messages', async () => {
    const store = await openStore(tempDir())
    store.createTopic('t', { queues: 4 })
    await store.putMessage({ topic: 't', queueId: 3, body: 'in queue 3' })
    expect(store.createTopic('t', { queues: 2 })).toMatchObject({ readQueueNums: 4, writeQueueNums: 2 })
  })

  it('puts without a queueId: one key always lands in one queue (its hash), keyless messages go round robin, an unknown topic uses queue 0', async () => {
    const store = await openStore(tempDir())
    store.createTopic('orders', { queues: 4 })
    const keyed = await store.putMessages(
      Array.from({ length: 20 }, (_, i) => ({ topic: 'orders', body: `m${i}`, keys: `order-${i % 5}` })),
    )
    for (let i = 0; i < 20; i++) {
      expect(keyed[i].status).toBe('PUT_OK')
      const message = store.lookMessageByOffset(keyed[i].wroteOffset)!
      expect(message.queueId).toBe(queueForKey(`order-${i % 5}`, 4))
    }
    const keyless = await store.putMessages(Array.from({ length: 8 }, (_, i) => ({ topic: 'orders', body: `r${i}` })))
    expect(keyless.map((r) => store.lookMessageByOffset(r.wroteOffset)!.queueId)).toEqual([0, 1, 2, 3, 0, 1, 2, 3])
    const plain = await store.putMessage({ topic: 'unknown', body: 'x', keys: 'k' })
    expect(store.lookMessageByOffset(plain.wroteOffset)!.queueId).toBe(0)
    const explicit = await store.putMessage({ topic: 'orders', queueId: 3, body: 'x', keys: 'order-1' })
    expect(store.lookMessageByOffset(explicit.wroteOffset)!.queueId).toBe(3)
  })

  it("never writes into the caller's array: routed and delayed messages are the put's own copies, a batch that needs neither is read in place", async () => {
    const store = await openStore(tempDir())
    store.createTopic('orders', { queues: 4 })
    // A frozen array throws (TypeError, strict mode) on any write into it.
    const delayed = Object.freeze([
      Object.freeze({ topic: 'fixed', queueId: 1, body: 'a' }),
      Object.freeze({ topic: 'fixed', queueId: 2, body: 'c', delayTimeLevel: 1 }),
    ])
    const first = await store.putMessages(delayed)
    expect(first.map((r) => r.status)).toEqual(['PUT_OK', 'PUT_OK'])
    // The delayed one waits in the schedule topic, its own topic and queue in its properties.
    const parked = store.lookMessageByOffset(first[1].wroteOffset)!
    expect(parked.topic).toBe('SCHEDULE_TOPIC_XXXX')
    expect(parked.properties.REAL_TOPIC).toBe('fixed')
    const routed = Object.freeze([Object.freeze({ topic: 'orders', body: 'b', keys: 'order-7' })])
    const [put] = await store.putMessages(routed)
    expect(routed[0]).toEqual({ topic: 'orders', body: 'b', keys: 'order-7' })
    expect(store.lookMessageByOffset(put.wroteOffset)!.queueId).toBe(queueForKey('order-7', 4))
    const plain = Object.freeze([
      Object.freeze({ topic: 'fixed', queueId: 0, body: 'd' }),
      Object.freeze({ topic: 'fixed', queueId: 0, body: 'e' }),
    ])
    const second = await store.putMessages(plain)
    expect(second.map((r) => store.lookMessageByOffset(r.wroteOffset)!.body.toString())).toEqual(['d', 'e'])
    expect(second.map((r) => r.queueOffset)).toEqual([0, 1])
  })

  it('consume() without a queueId reads every queue in per-queue order, commits an offset per queue, and resumes there after reopen', async () => {
    const dir = tempDir()
    let store = await openStore(dir)
    store.createTopic('orders', { queues: 3 })
    await store.putMessages(Array.from({ length: 30 }, (_, i) => ({ topic: 'orders', body: `m${i}` })))
    const controller = new AbortController()
    const sub = store.consume({ group: 'billing', topic: 'orders', from: 'earliest', signal: controller.signal })
    const seen: MessageExt[] = []
    for await (const message of sub) {
      seen.push(message)
      if (seen.length === 20) break
    }
    const perQueue = new Map<number, number[]>()
    for (const m of seen) perQueue.set(m.queueId, [...(perQueue.get(m.queueId) ?? []), m.queueOffset])
    for (const offsets of perQueue.values()) expect(offsets).toEqual(offsets.map((_, i) => offsets[0] + i))
    expect(perQueue.size).toBe(3)
    for (const [queueId, offsets] of perQueue) expect(sub.positions.get(queueId)).toBe(offsets[offsets.length - 1] + 1)
    await sub.commit()
    for (const [queueId, position] of sub.positions) expect(store.queryOffset('billing', 'orders', queueId)).toBe(position)
    await closeStore(store)

    store = await openStore(dir)
    const rest: MessageExt[] = []
    const again = store.consume({ group: 'billing', topic: 'orders' })
    for await (const message of again) {
      rest.push(message)
      if (rest.length === 10) break
    }
    const bodies = [...seen, ...rest].map((m) => m.body.toString()).sort()
    expect(bodies).toEqual(Array.from({ length: 30 }, (_, i) => `m${i}`).sort())
  })

  it('a topic subscription waits for new messages on any queue and ends when its signal aborts', async () => {
    const store = await openStore(tempDir())
    store.createTopic('live', { queues: 2 })
    const controller = new AbortController()
    const sub = store.consume({ group: 'g', topic: 'live', from: 'latest', signal: controller.signal, autoCommit: true })
    const got: string[] = []
    const reading = (async () => {
      for await (const message of sub) {
        got.push(message.body.toString())
        if (got.length === 2) controller.abort()
      }
    })()
    await store.putMessage({ topic: 'live', queueId: 1, body: 'one' })
    await store.putMessage({ topic: 'live', queueId: 0, body: 'zero' })
    await reading
    expect(got.sort()).toEqual(['one', 'zero'])
    expect(store.queryOffset('g', 'live', 0)).toBe(1)
    expect(store.queryOffset('g', 'live', 1)).toBe(1)
  })

  it('refuses a numeric start offset without a queueId', async () => {
    const store = await openStore(tempDir())
    expect(() => store.consume({ group: 'g', topic: 't', from: 5 } as never)).toThrow(TypeError)
  })
})
