// Consumer retries and the dead-letter queue on topic subscriptions: nack → %RETRY%<group> through
// the schedule topic (level 3 + reconsumeTimes) → handed out again under the original topic with
// the count one higher → after maxReconsumeTimes, %DLQ%<group>; commit() covers the topic and the
// retry queue, after the nacks are flushed.
import { describe, expect, it } from 'vitest'

import { SCHEDULE_TOPIC } from '../../lib/store/commitlog/record.js'
import { MessageStore, type MessageExt, type TopicSubscription } from '../../lib/store/message-store.js'
import { dlqTopicOf, retryTopicOf, sendBackMessage } from '../../lib/store/retry/retry-topics.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, readAll, SMALL, scheduleOf } from '../schedule/helpers.js'

async function setup(options = {}) {
  const fake = new FakeClock()
  fake.at = Date.now() + 2000
  const store = await MessageStore.open(tempDir('mqstore-retry-'), { ...SMALL, clock: fake.clock, ...options })
  return { store, fake }
}

/** Moves the clock past every retry delay and lets the schedule service deliver. */
async function deliverRetries(store: MessageStore, fake: FakeClock): Promise<void> {
  fake.at += 3 * 3_600_000
  await scheduleOf(store).deliverDue()
}

async function next(iterator: AsyncIterator<MessageExt>): Promise<MessageExt> {
  const r = await iterator.next()
  if (r.done === true) throw new Error('the subscription ended')
  return r.value
}

describe('nack → retry → DLQ', () => {
  it('retries with growing levels and reconsume counts, then parks the message in the DLQ', async () => {
    const { store, fake } = await setup()
    try {
      const put = await store.putMessage({
        topic: 'jobs',
        body: 'work',
        tags: 'T',
        keys: ['job-1'],
        properties: { UNIQ_KEY: 'UNIQ-1', tenant: 'a' },
        bornHost: '10.0.0.5:7000',
        flag: 3,
      })
      const sub: TopicSubscription = store.consume({ group: 'workers', topic: 'jobs', maxReconsumeTimes: 3 })
      const it = sub[Symbol.asyncIterator]()
      let m = await next(it)
      expect(m).toMatchObject({ topic: 'jobs', reconsumeTimes: 0 })
      const levels: string[] = []
      for (let n = 0; n < 3; n++) {
        const r = await sub.nack(m)
        expect(r.status).toBe('PUT_OK')
        // Parked in the schedule topic at level 3 + n, bound for the retry topic.
        const parked = store.lookMessageByOffset(r.wroteOffset)
        expect(parked).toMatchObject({ topic: SCHEDULE_TOPIC, queueId: 2 + n, reconsumeTimes: n + 1 })
        levels.push(parked?.properties.DELAY as string)
        expect(parked?.properties).toMatchObject({
          REAL_TOPIC: retryTopicOf('workers'),
          REAL_QID: '0',
          RETRY_TOPIC: 'jobs',
          ORIGIN_MESSAGE_ID: put.msgId,
          WAIT: 'false',
          UNIQ_KEY: 'UNIQ-1',
          KEYS: 'job-1',
          TAGS: 'T',
          tenant: 'a',
        })
        await deliverRetries(store, fake)
        m = await next(it)
        // Handed out again under the original topic, from the retry queue, the count one higher.
        expect(m).toMatchObject({ topic: 'jobs', queueId: 0, queueOffset: n, reconsumeTimes: n + 1, flag: 3 })
        expect(m.body.toString()).toBe('work')
        expect(m.bornHost).toEqual({ address: '10.0.0.5', port: 7000 })
        expect(m.properties).toMatchObject({ RETRY_TOPIC: 'jobs', ORIGIN_MESSAGE_ID: put.msgId, UNIQ_KEY: 'UNIQ-1' })
      }
      expect(levels).toEqual(['3', '4', '5'])
      // The fourth failure: reconsumeTimes 3 reached maxReconsumeTimes 3, so the DLQ, stored directly.
      const dead = await sub.nack(m)
      const parked = store.lookMessageByOffset(dead.wroteOffset)
      expect(parked).toMatchObject({ topic: dlqTopicOf('workers'), queueId: 0, reconsumeTimes: 4 })
      expect(parked?.properties).toMatchObject({ DELAY: '0', RETRY_TOPIC: 'jobs', ORIGIN_MESSAGE_ID: put.msgId, UNIQ_KEY: 'UNIQ-1' })
      // The DLQ is an ordinary topic.
      const dlq = store.consume({ group: 'ops', topic: dlqTopicOf('workers'), queueId: 0, from: 'earliest' })
      const [fromDlq] = await (async () => {
        for await (const d of dlq) return [d]
        return []
      })()
      expect(fromDlq?.body.toString()).toBe('work')
      expect(store.stats().retry.groups).toEqual({ workers: { retried: 3, deadLettered: 1 } })
      // commit() covers the topic's queue and the retry queue.
      await sub.commit()
      expect(store.queryOffset('workers', 'jobs', 0)).toBe(1)
      expect(store.queryOffset('workers', retryTopicOf('workers'), 0)).toBe(3)
      expect([...sub.positions]).toEqual([[0, 1]])
      expect(store.stats().commitLogFlushedOffset).toBeGreaterThanOrEqual(dead.wroteOffset + dead.wroteBytes)
      await it.return?.()
    } finally {
      await store.close()
    }
  })

  it('RocketMQ defaults: 16 retries at levels 3..18, the 17th failure goes to the DLQ', () => {
    const record = {
      topic: 'jobs',
      reconsumeTimes: 0,
      properties: { UNIQ_KEY: 'U' },
      storeHost: { address: '127.0.0.1', port: 10911 },
      commitLogOffset: 0x1234,
      body: Buffer.from('b'),
      flag: 0,
      sysFlag: 0,
      bornTimestamp: 5,
      bornHost: { address: '::1', port: 9 },
    } as unknown as MessageExt
    const delays: string[] = []
    for (let n = 0; n < 16; n++) {
      const m = sendBackMessage({ ...record, reconsumeTimes: n }, 'g', 16, 0)
      expect(m.topic).toBe('%RETRY%g')
      expect(m.reconsumeTimes).toBe(n + 1)
      delays.push(m.properties?.DELAY as string)
    }
    expect(delays).toEqual(Array.from({ length: 16 }, (_, n) => String(3 + n)))
    const dead = sendBackMessage({ ...record, reconsumeTimes: 16 }, 'g', 16, 0)
    expect(dead).toMatchObject({ topic: '%DLQ%g', queueId: 0, reconsumeTimes: 17, bornHost: '[::1]:9' })
    expect(dead.properties).toMatchObject({ DELAY: '0', ORIGIN_MESSAGE_ID: '7F00000100002A9F0000000000001234', RETRY_TOPIC: 'jobs' })
    // An explicit level, and a negative one (straight to the DLQ).
    expect(sendBackMessage(record, 'g', 16, 1).properties?.DELAY).toBe('1')
    expect(sendBackMessage(record, 'g', 16, -1).topic).toBe('%DLQ%g')
    // A retried record keeps its first RETRY_TOPIC and ORIGIN_MESSAGE_ID.
    const again = sendBackMessage({ ...record, topic: '%RETRY%g', properties: { RETRY_TOPIC: 'jobs', ORIGIN_MESSAGE_ID: 'X' } }, 'g', 16, 0)
    expect(again.properties).toMatchObject({ RETRY_TOPIC: 'jobs', ORIGIN_MESSAGE_ID: 'X' })
  })

  it('delayLevel chooses the retry level; a negative one goes to the DLQ; autoCommit covers the retry queue', async () => {
    const { store, fake } = await setup()
    try {
      await store.putMessages([
        { topic: 'jobs', body: 'a' },
        { topic: 'jobs', body: 'b' },
      ])
      const sub = store.consume({ group: 'g', topic: 'jobs', autoCommit: true })
      const it = sub[Symbol.asyncIterator]()
      const a = await next(it)
      const b = await next(it)
      const ra = await sub.nack(a, { delayLevel: 1 })
      expect(store.lookMessageByOffset(ra.wroteOffset)?.properties.DELAY).toBe('1')
      const rb = await sub.nack(b, { delayLevel: -1 })
      expect(store.lookMessageByOffset(rb.wroteOffset)?.topic).toBe('%DLQ%g')
      await deliverRetries(store, fake)
      const again = await next(it)
      expect(again).toMatchObject({ topic: 'jobs', reconsumeTimes: 1 })
      expect(again.body.toString()).toBe('a')
      expect(store.queryOffset('g', 'jobs', 0)).toBe(2)
      expect(store.queryOffset('g', '%RETRY%g', 0)).toBe(1)
      await it.return?.()
      // A subscription that never read a retry commits no retry offset.
      const other = store.consume({ group: 'h', topic: 'jobs', from: 'earliest' })
      const ot = other[Symbol.asyncIterator]()
      await next(ot)
      await other.commit()
      expect(store.queryOffset('h', 'jobs', 0)).toBe(1)
      expect(store.queryOffset('h', '%RETRY%h', 0)).toBe(-1)
      await ot.return?.()
    } finally {
      await store.close()
    }
  })

  it('bad input: a nack without a message, a delayLevel not an integer, a bad maxReconsumeTimes', async () => {
    const { store } = await setup()
    try {
      await store.putMessage({ topic: 'jobs', body: 'a' })
      const sub = store.consume({ group: 'g', topic: 'jobs' })
      const it = sub[Symbol.asyncIterator]()
      const m = await next(it)
      await expect(sub.nack(null as unknown as MessageExt)).rejects.toThrow(TypeError)
      await expect(sub.nack(m, { delayLevel: 1.5 })).rejects.toThrow(RangeError)
      await expect(sub.nack({ ...m, commitLogOffset: 999_999 })).rejects.toMatchObject({ code: 'CORRUPTION' })
      expect(() => store.consume({ group: 'g', topic: 'jobs', maxReconsumeTimes: -1 })).toThrow(RangeError)
      await it.return?.()
      await store.close()
      await expect(sub.nack(m)).rejects.toMatchObject({ code: 'STORE_CLOSED' })
    } finally {
      await store.close()
    }
  })

  it('the retry topic itself is read once, and retried messages are counted per group in its queue', async () => {
    const { store, fake } = await setup()
    try {
      await store.putMessage({ topic: 'jobs', body: 'a' })
      const sub = store.consume({ group: 'g', topic: 'jobs' })
      const it = sub[Symbol.asyncIterator]()
      await sub.nack(await next(it))
      await deliverRetries(store, fake)
      expect(readAll(store, '%RETRY%g', 0).map((m) => m.reconsumeTimes)).toEqual([1])
      // Consuming the retry topic by name does not add it a second time.
      const direct = store.consume({ group: 'g', topic: '%RETRY%g', from: 'earliest' })
      const dt = direct[Symbol.asyncIterator]()
      expect((await next(dt)).reconsumeTimes).toBe(1)
      await dt.return?.()
      await it.return?.()
    } finally {
      await store.close()
    }
  })
})
