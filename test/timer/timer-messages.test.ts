// The put rewrite of a timed message (deliverAt / delayMs / RocketMQ 5's TIMER_* properties) into
// rmq_sys_wheel_timer, RocketMQ 5's rounding, the horizon, a time in the past, bad input.
import { describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { TIMER_TOPIC, timedMessage, timerSlotTime } from '../../lib/store/timer/timer-messages.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, readAll, SMALL } from './helpers.js'

describe('timerSlotTime (RocketMQ 5 rounding)', () => {
  it('floors to the precision, and lowers an exact multiple by one step', () => {
    expect(timerSlotTime(10_500, 1000)).toBe(10_000)
    expect(timerSlotTime(10_000, 1000)).toBe(9000)
    expect(timerSlotTime(10_050, 100)).toBe(10_000)
    expect(timerSlotTime(10_100, 100)).toBe(10_000)
  })
})

describe('timedMessage', () => {
  const uniq = () => 'AAAABBBBCCCCDDDDEEEEFFFF00001111'
  it('follows RocketMQ 5 property precedence: DELAY_SEC, then DELAY_MS, then DELIVER_MS', () => {
    const now = 1_000_000
    const m = timedMessage(
      {
        topic: 't',
        queueId: 2,
        body: 'x',
        properties: { TIMER_DELIVER_MS: String(now + 90_000), TIMER_DELAY_MS: '5000', TIMER_DELAY_SEC: '3' },
      },
      now,
      1000,
      uniq,
    )
    expect(m).toMatchObject({ topic: TIMER_TOPIC, queueId: 0 })
    expect((m as { properties: Record<string, string> }).properties).toMatchObject({
      TIMER_OUT_MS: String(now + 2000),
      REAL_TOPIC: 't',
      REAL_QID: '2',
      UNIQ_KEY: uniq(),
    })
    const ms = timedMessage(
      { topic: 't', body: 'x', properties: { TIMER_DELIVER_MS: String(now + 90_000), TIMER_DELAY_MS: '5500' } },
      now,
      1000,
      uniq,
    )
    expect((ms as { properties: Record<string, string> }).properties.TIMER_OUT_MS).toBe(String(now + 5000))
  })

  it('refuses bad properties and times beyond the 7-day horizon with a reason', () => {
    expect(timedMessage({ topic: 't', body: 'x', properties: { TIMER_DELAY_SEC: 'soon' } }, 0, 1000, uniq)).toEqual({
      reason: 'the TIMER_DELAY_SEC property must be an integer, got "soon"',
    })
    const far = timedMessage({ topic: 't', body: 'x', deliverAt: 8 * 86_400_000 } as never, 0, 1000, uniq)
    expect((far as { reason: string }).reason).toMatch(/7 days/)
    expect(timedMessage({ topic: 't', body: 'x', deliverAt: 1, delayMs: 1 } as never, 0, 1000, uniq)).toEqual({
      reason: 'a message takes deliverAt or delayMs, not both',
    })
    // Exactly 7 days ahead is within the horizon.
    expect(timedMessage({ topic: 't', body: 'x', delayMs: 7 * 86_400_000 } as never, 0, 1000, uniq)).toMatchObject({ topic: TIMER_TOPIC })
  })

  it('stores a time in the past, or a transaction half, on its own topic as sent', () => {
    expect(timedMessage({ topic: 't', body: 'x', delayMs: -5 } as never, 1000, 1000, uniq)).toEqual({ topic: 't', body: 'x' })
    expect(timedMessage({ topic: 't', body: 'x', deliverAt: 5000, sysFlag: 4 } as never, 1000, 1000, uniq)).toEqual({
      topic: 't',
      body: 'x',
      sysFlag: 4,
    })
  })
})

describe('put', () => {
  it('parks a timed message in rmq_sys_wheel_timer with REAL_TOPIC / REAL_QID; a past one goes at once', async () => {
    const fake = new FakeClock()
    const store = await MessageStore.open(tempDir('mqstore-timer-'), { ...SMALL, clock: fake.clock })
    try {
      const put = await store.putMessage({ topic: 'later', queueId: 1, body: 'a', delayMs: 60_000 } as never)
      expect(put.status).toBe('PUT_OK')
      const parked = readAll(store, TIMER_TOPIC, 0)
      expect(parked).toHaveLength(1)
      expect(parked[0].properties).toMatchObject({
        REAL_TOPIC: 'later',
        REAL_QID: '1',
        TIMER_DELAY_MS: '60000',
        TIMER_OUT_MS: String(timerSlotTime(fake.at + 60_000, 1000)),
      })
      expect(parked[0].properties.UNIQ_KEY).toMatch(/^[0-9A-F]{32}$/)
      expect((await store.putMessage({ topic: 'later', queueId: 1, body: 'b', deliverAt: fake.at - 1 } as never)).status).toBe('PUT_OK')
      expect(readAll(store, 'later', 1).map((m) => m.body.toString())).toEqual(['b'])
      expect(store.stats().timer.pending).toBeGreaterThanOrEqual(0)
    } finally {
      await store.close()
    }
  })

  it('refuses bad input with MESSAGE_ILLEGAL and the reason', async () => {
    const store = await MessageStore.open(tempDir('mqstore-timer-'), SMALL)
    try {
      const cases: [object, RegExp][] = [
        [{ deliverAt: Date.now() + 8 * 86_400_000 }, /7 days/],
        [{ delayMs: 1000, delayTimeLevel: 2 }, /not both/],
        [{ properties: { TIMER_DELAY_MS: '1000', DELAY: '2' } }, /not both/],
        [{ properties: { TIMER_DELIVER_MS: '12.5' } }, /must be an integer/],
        [{ deliverAt: Number.NaN }, /finite number/],
      ]
      for (const [fields, reason] of cases) {
        const result = await store.putMessage({ topic: 't', body: 'x', ...fields } as never)
        expect(result.status).toBe('MESSAGE_ILLEGAL')
        expect(result.reason).toMatch(reason)
      }
      const bound = await store.putMessage({ topic: TIMER_TOPIC, body: 'x', delayMs: 1000 } as never)
      expect(bound).toMatchObject({ status: 'MESSAGE_ILLEGAL' })
    } finally {
      await store.close()
    }
  })

  it('takes timerPrecisionMs 1000 or 100, nothing else', async () => {
    await expect(MessageStore.open(tempDir('mqstore-timer-'), { ...SMALL, timerPrecisionMs: 500 })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    })
    const store = await MessageStore.open(tempDir('mqstore-timer-'), { ...SMALL, timerPrecisionMs: 100 })
    await store.close()
    expect(store.stats().timer.precisionMs).toBe(100)
  })
})
