// Delay levels on put: the rewrite into SCHEDULE_TOPIC_XXXX (queue level − 1, REAL_TOPIC, REAL_QID,
// DELAY clamped), the due time in the unit's tagsCode, the messageDelayLevel option, bad input.
import { describe, expect, it } from 'vitest'

import { MQStoreError } from '../../lib/errors.js'
import { SCHEDULE_TOPIC } from '../../lib/store/commitlog/record.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { ConsumeQueue } from '../../lib/store/queue/consume-queue.js'
import { DelayLevels, newUniqKey, parseMessageDelayLevel } from '../../lib/store/schedule/delay-levels.js'
import type { StoreEngine } from '../../lib/store/store-engine.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, readAll, scheduleOf, SMALL } from './helpers.js'

/** The tagsCode of a schedule-queue unit, as written by dispatch. */
function unitTagsCode(store: MessageStore, level: number, offset: number): number {
  const e = (store as unknown as { e: StoreEngine }).e
  const queue = e.queues.find(SCHEDULE_TOPIC, level - 1)
  if (queue === null) throw new Error(`no schedule queue for level ${level}`)
  const units = queue.getIndexBuffer(offset)
  if (units === null) throw new Error('no unit')
  try {
    return ConsumeQueue.readTagsCode(units.buffer, 0)
  } finally {
    units.release()
  }
}

async function openStore(options = {}): Promise<MessageStore> {
  // These tests look at the schedule topic: delivery is stopped, so nothing leaves it while they
  // do (a put that makes a new queue's file lets the timers run).
  const fake = new FakeClock()
  fake.at = 1_000_000
  const store = await MessageStore.open(tempDir('mqstore-delay-'), { ...SMALL, clock: fake.clock, ...options })
  await scheduleOf(store).stop()
  return store
}

describe('messageDelayLevel', () => {
  it("parses RocketMQ's default string and units", () => {
    const levels = new DelayLevels()
    expect(levels.maxLevel).toBe(18)
    expect(levels.isDefault).toBe(true)
    expect(levels.table.slice(0, 6)).toEqual([1000, 5000, 10_000, 30_000, 60_000, 120_000])
    expect(levels.delayOf(17)).toBe(3_600_000)
    expect(levels.delayOf(18)).toBe(7_200_000)
    expect(levels.delayOf(19)).toBe(1000) // outside the table: RocketMQ's 1 s
    expect(parseMessageDelayLevel('2d 3h')).toEqual([2 * 86_400_000, 3 * 3_600_000])
  })

  it('refuses a bad string with INVALID_OPTION', async () => {
    for (const bad of ['1s  5s', '1x', 's', '1S', '', '1.5s', ' 1s']) {
      expect(() => parseMessageDelayLevel(bad), bad).toThrow(MQStoreError)
      await expect(MessageStore.open(tempDir('mqstore-delay-'), { ...SMALL, messageDelayLevel: bad })).rejects.toMatchObject({
        code: 'INVALID_OPTION',
      })
    }
    await expect(MessageStore.open(tempDir('mqstore-delay-'), { ...SMALL, flushDelayOffsetInterval: 0 })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    })
  })

  it('client ids are 32 upper-case hex digits and never repeat in a process', () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newUniqKey()))
    expect(ids.size).toBe(1000)
    for (const id of ids) expect(id).toMatch(/^[0-9A-F]{32}$/)
  })
})

describe('a put with a delay level', () => {
  it('is stored in SCHEDULE_TOPIC_XXXX queue level - 1 with REAL_TOPIC, REAL_QID and DELAY, due at store time + delay', async () => {
    const store = await openStore()
    try {
      const r = await store.putMessage({
        topic: 'orders',
        queueId: 3,
        body: 'later',
        tags: 'TagA',
        keys: ['k1'],
        properties: { region: 'eu' },
        delayTimeLevel: 3,
      })
      expect(r.status).toBe('PUT_OK')
      expect(store.getMaxOffsetInQueue('orders', 3)).toBe(0)
      const [parked] = readAll(store, SCHEDULE_TOPIC, 2)
      expect(parked.topic).toBe(SCHEDULE_TOPIC)
      expect(parked.queueId).toBe(2)
      expect(parked.msgId).toBe(r.msgId)
      expect(parked.properties).toMatchObject({ DELAY: '3', REAL_TOPIC: 'orders', REAL_QID: '3', TAGS: 'TagA', KEYS: 'k1', region: 'eu' })
      expect(parked.properties.UNIQ_KEY).toMatch(/^[0-9A-F]{32}$/)
      expect(unitTagsCode(store, 3, 0)).toBe(r.storeTimestamp + 10_000)
      // A key lookup on the schedule topic finds it (RocketMQ indexes it there too).
      expect(store.queryMessage(SCHEDULE_TOPIC, 'k1', 4).messages.map((m) => m.commitLogOffset)).toEqual([r.wroteOffset])
    } finally {
      await store.close()
    }
  })

  it('takes the DELAY property as RocketMQ clients send it, keeps a given UNIQ_KEY, clamps to the last level', async () => {
    const store = await openStore()
    try {
      const a = await store.putMessage({ topic: 't', body: 'a', properties: { DELAY: '1', UNIQ_KEY: 'AC110001000018B4AAC2' } })
      const b = await store.putMessage({ topic: 't', body: 'b', delayTimeLevel: 99 })
      const c = await store.putMessage({ topic: 't', body: 'c', properties: { DELAY: '40' } })
      // The field wins over the property, as tags and keys do.
      const d = await store.putMessage({ topic: 't', body: 'd', delayTimeLevel: 2, properties: { DELAY: '7' } })
      expect([a, b, c, d].map((r) => r.status)).toEqual(['PUT_OK', 'PUT_OK', 'PUT_OK', 'PUT_OK'])
      const [pa] = readAll(store, SCHEDULE_TOPIC, 0)
      expect(pa.properties).toMatchObject({ DELAY: '1', UNIQ_KEY: 'AC110001000018B4AAC2', REAL_TOPIC: 't', REAL_QID: '0' })
      const last = readAll(store, SCHEDULE_TOPIC, 17)
      expect(last.map((m) => m.properties.DELAY)).toEqual(['18', '18'])
      expect(last.map((m) => m.body.toString())).toEqual(['b', 'c'])
      expect(unitTagsCode(store, 18, 0)).toBe(b.storeTimestamp + 7_200_000)
      expect(readAll(store, SCHEDULE_TOPIC, 1).map((m) => m.properties.DELAY)).toEqual(['2'])
      expect(store.getMaxOffsetInQueue('t', 0)).toBe(0)
    } finally {
      await store.close()
    }
  })

  it('level 0 and transaction halves are stored as sent; a routed put keeps its routed queue in REAL_QID', async () => {
    const store = await openStore()
    try {
      store.createTopic('spread', { queues: 4 })
      expect((await store.putMessage({ topic: 't', body: 'now', delayTimeLevel: 0 })).status).toBe('PUT_OK')
      expect((await store.putMessage({ topic: 't', body: 'p0', properties: { DELAY: '0' } })).status).toBe('PUT_OK')
      expect(readAll(store, 't', 0).map((m) => m.body.toString())).toEqual(['now', 'p0'])
      // A prepared half (sysFlag 0x4) is never delayed, and gets no consume-queue unit.
      const prepared = await store.putMessage({ topic: 't', body: 'half', sysFlag: 0x4, delayTimeLevel: 2 })
      expect(prepared.status).toBe('PUT_OK')
      expect(store.lookMessageByOffset(prepared.wroteOffset)?.topic).toBe('t')
      // A committed one is.
      await store.putMessage({ topic: 't', body: 'commit', sysFlag: 0x8, delayTimeLevel: 2 })
      expect(readAll(store, SCHEDULE_TOPIC, 1).map((m) => m.body.toString())).toEqual(['commit'])
      await store.putMessage({ topic: 'spread', keys: 'user-7', body: 'x', delayTimeLevel: 1 })
      const [routed] = readAll(store, SCHEDULE_TOPIC, 0)
      expect(Number(routed.properties.REAL_QID)).toBeGreaterThanOrEqual(0)
      expect(Number(routed.properties.REAL_QID)).toBeLessThan(4)
    } finally {
      await store.close()
    }
  })

  it('bad input is MESSAGE_ILLEGAL with the reason, and fails alone in a batch', async () => {
    const store = await openStore()
    try {
      const bad: [Record<string, unknown>, RegExp][] = [
        [{ delayTimeLevel: -1 }, /delayTimeLevel must be a non-negative integer/],
        [{ delayTimeLevel: 1.5 }, /delayTimeLevel must be a non-negative integer/],
        [{ delayTimeLevel: '2' }, /delayTimeLevel must be a non-negative integer/],
        [{ properties: { DELAY: 'soon' } }, /DELAY property must be a delay level/],
        [{ properties: { DELAY: '-3' } }, /must not be negative/],
        [{ deliverAt: Number.NaN }, /deliverAt must be a finite number/],
        [{ deliverAt: Number.POSITIVE_INFINITY }, /deliverAt must be a finite number/],
        [{ delayMs: 'x' }, /delayMs must be a finite number/],
        [{ deliverAt: Date.now() + 1000, delayTimeLevel: 2 }, /not both/],
        [{ delayMs: 500, properties: { DELAY: '1' } }, /not both/],
        [{ deliverAt: Date.now() + 8 * 86_400_000 }, /7 days/],
      ]
      const results = await store.putMessages([
        { topic: 'ok', body: 'first' },
        ...bad.map(([fields]) => ({ topic: 't', body: 'x', ...fields })),
        { topic: 'ok', body: 'last' },
      ])
      expect(results[0].status).toBe('PUT_OK')
      expect(results[results.length - 1].status).toBe('PUT_OK')
      bad.forEach(([, reason], i) => {
        expect(results[i + 1].status).toBe('MESSAGE_ILLEGAL')
        expect(results[i + 1].reason).toMatch(reason)
      })
      expect(readAll(store, 'ok', 0).map((m) => m.body.toString())).toEqual(['first', 'last'])
      expect(store.getMaxOffsetInQueue('t', 0)).toBe(0)
      expect((await store.putMessage({ topic: 'bad topic', body: 'x', delayTimeLevel: 1 })).status).toBe('MESSAGE_ILLEGAL')
      const loop = await store.putMessage({ topic: SCHEDULE_TOPIC, body: 'x', delayTimeLevel: 1 })
      expect(loop).toMatchObject({ status: 'MESSAGE_ILLEGAL', reason: expect.stringMatching(/cannot be bound for the schedule topic/) })
      // Misuse stays a TypeError, as for any put.
      await expect(store.putMessage({ topic: 5 as unknown as string, body: 'x', delayTimeLevel: 1 })).rejects.toThrow(TypeError)
      await expect(store.putMessage({ topic: 't', queueId: -1, body: 'x', delayTimeLevel: 1 })).rejects.toThrow(RangeError)
    } finally {
      await store.close()
    }
  })

  it('a custom messageDelayLevel sets the levels, their clamp and the due times', async () => {
    const store = await openStore({ messageDelayLevel: '2s 1m 3h' })
    try {
      const a = await store.putMessage({ topic: 't', body: 'a', delayTimeLevel: 2 })
      const b = await store.putMessage({ topic: 't', body: 'b', delayTimeLevel: 9 })
      expect(unitTagsCode(store, 2, 0)).toBe(a.storeTimestamp + 60_000)
      expect(readAll(store, SCHEDULE_TOPIC, 2)[0].properties.DELAY).toBe('3')
      expect(unitTagsCode(store, 3, 0)).toBe(b.storeTimestamp + 3 * 3_600_000)
    } finally {
      await store.close()
    }
  })
})
