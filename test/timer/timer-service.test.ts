// The timer service: delivery in order at RocketMQ 5's times (fake clock, including one that jumps
// back and forward), what the delivered copy keeps, cancel by msgId, stats, the files on disk,
// restarts without loss or repeats, and damaged files rebuilt as repairs.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { Registry } from 'prom-client'

import { verifyStore } from '../../lib/cli/verify/index.js'
import { collectStoreMetrics } from '../../lib/metrics.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { TIMER_CHECKPOINT_SIZE, loadTimerCheckpoint } from '../../lib/store/timer/timer-checkpoint.js'
import { TIMER_LOG_UNIT_SIZE } from '../../lib/store/timer/timer-log.js'
import { TIMER_TOPIC } from '../../lib/store/timer/timer-messages.js'
import { TIMER_WHEEL_FILE_SIZE, TIMER_WHEEL_SLOTS } from '../../lib/store/timer/timer-wheel.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, readAll, SMALL, timerOf, waitFor } from './helpers.js'

function bodies(store: MessageStore, topic: string, queueId = 0): string[] {
  return readAll(store, topic, queueId).map((m) => m.body.toString())
}

async function openWith(dir: string, fake: FakeClock, lines: string[] = [], extra: object = {}): Promise<MessageStore> {
  return MessageStore.open(dir, {
    ...SMALL,
    clock: fake.clock,
    logger: (level: string, message: string) => lines.push(`${level} ${message}`),
    ...extra,
  })
}

describe('delivery (fake clock)', () => {
  it('delivers at the first multiple of the precision at or after each time, in time order', async () => {
    const fake = new FakeClock()
    fake.at = Math.floor(Date.now() / 1000) * 1000 + 200
    const base = fake.at
    const store = await openWith(tempDir('mqstore-timer-'), fake)
    try {
      const timer = timerOf(store)
      // Put out of order; a and b share a slot.
      await store.putMessage({ topic: 'r', body: 'c', deliverAt: base + 5_000 } as never)
      await store.putMessage({ topic: 'r', body: 'a', deliverAt: base + 1_500 } as never)
      await store.putMessage({ topic: 'r', body: 'b', delayMs: 1_700 } as never)
      await store.putMessage({ topic: 'r', body: 'd', properties: { TIMER_DELAY_SEC: '60' } })
      await timer.deliverDue()
      expect(store.stats().timer).toMatchObject({ pending: 4, nextDueTime: base - 200 + 2_000, delivered: 0, lagMs: 0 })
      fake.at = base - 200 + 1_999
      await timer.deliverDue()
      expect(bodies(store, 'r')).toEqual([])
      fake.at = base - 200 + 2_000
      await timer.deliverDue()
      expect(bodies(store, 'r')).toEqual(['a', 'b'])
      // The clock goes back an hour: nothing more yet, and a put meanwhile keeps its own time.
      fake.at = base - 3_600_000
      await timer.deliverDue()
      await store.putMessage({ topic: 'r', body: 'e', delayMs: 2_000 } as never)
      fake.at += 2_799
      await timer.deliverDue()
      expect(bodies(store, 'r')).toEqual(['a', 'b'])
      fake.at += 1
      await timer.deliverDue()
      expect(bodies(store, 'r')).toEqual(['a', 'b', 'e'])
      // Forward again past c (not redelivering a and b), then a jump past d.
      fake.at = base + 5_799
      await timer.deliverDue()
      expect(bodies(store, 'r')).toEqual(['a', 'b', 'e'])
      fake.at = base + 5_800
      await timer.deliverDue()
      expect(bodies(store, 'r')).toEqual(['a', 'b', 'e', 'c'])
      expect(store.stats().timer).toMatchObject({ pending: 1, nextDueTime: base - 200 + 61_000 })
      fake.at = base + 3_600_000
      await timer.deliverDue()
      expect(bodies(store, 'r')).toEqual(['a', 'b', 'e', 'c', 'd'])
      expect(store.stats().timer).toMatchObject({ pending: 0, nextDueTime: null, delivered: 5 })
      const [copy] = readAll(store, 'r', 0)
      expect(copy.properties.TIMER_OUT_MS).toBeUndefined()
      expect(copy.properties.TIMER_DELIVER_MS).toBeUndefined()
      expect(copy.properties).toMatchObject({ REAL_TOPIC: 'r', REAL_QID: '0' })
      expect(copy.properties.UNIQ_KEY).toMatch(/^[0-9A-F]{32}$/)
    } finally {
      await store.close()
    }
  })

  it('keeps what RocketMQ keeps, and delivers within ~100 ms on an idle store (real clock)', async () => {
    const store = await MessageStore.open(tempDir('mqstore-timer-'), { ...SMALL, timerPrecisionMs: 100 })
    try {
      const put = await store.putMessage({
        topic: 'soon',
        queueId: 2,
        body: 'hello',
        keys: ['k1'],
        tags: 'T',
        properties: { user: 'u', UNIQ_KEY: '0A0B0C0D0E0F00000000000000000001' },
        flag: 7,
        bornTimestamp: 1234,
        bornHost: '10.1.2.3:4567',
        reconsumeTimes: 3,
        delayMs: 300,
      } as never)
      expect(put.status).toBe('PUT_OK')
      await waitFor(() => readAll(store, 'soon', 2).length === 1, 'the delivery')
      const [m] = readAll(store, 'soon', 2)
      expect(m.body.toString()).toBe('hello')
      expect(m).toMatchObject({ flag: 7, bornTimestamp: 1234, reconsumeTimes: 3, tags: 'T', keys: ['k1'] })
      expect(m.properties).toMatchObject({ user: 'u', UNIQ_KEY: '0A0B0C0D0E0F00000000000000000001' })
      expect(m.bornHost).toMatchObject({ address: '10.1.2.3', port: 4567 })
      expect(store.stats().timer.delivered).toBe(1)
    } finally {
      await store.close()
    }
  })
})

describe('rolls (100 ms precision: the wheel spans 33.6 hours)', () => {
  it('delivers a timer 6 days ahead on time after rolling, and one cancelled while rolling not at all', async () => {
    const fake = new FakeClock()
    fake.at = Math.floor(Date.now() / 1000) * 1000
    const start = fake.at
    const store = await openWith(tempDir('mqstore-timer-'), fake, [], { timerPrecisionMs: 100 })
    try {
      const timer = timerOf(store)
      const far = start + 6 * 86_400_000 + 50
      await store.putMessage({ topic: 'far', body: 'six days', deliverAt: far } as never)
      const gone = await store.putMessage({ topic: 'far', body: 'cancelled', deliverAt: far + 1000 } as never)
      await timer.deliverDue()
      expect(store.stats().timer).toMatchObject({ pending: 2, nextDueTime: start + 16.8 * 3_600_000 })
      for (let hours = 10; hours < 6 * 24; hours += 10) {
        fake.at = start + hours * 3_600_000
        await timer.deliverDue()
        if (hours === 40) expect(await store.cancelTimer(gone.msgId)).toBe(true)
        expect(bodies(store, 'far'), `after ${hours} h`).toEqual([])
      }
      fake.at = far + 49
      await timer.deliverDue()
      expect(bodies(store, 'far')).toEqual([])
      fake.at = far + 50
      await timer.deliverDue()
      expect(bodies(store, 'far')).toEqual(['six days'])
      fake.at = far + 5000
      await timer.deliverDue()
      expect(bodies(store, 'far')).toEqual(['six days'])
      expect(store.stats().timer).toMatchObject({ pending: 0, delivered: 1, cancelled: 1 })
    } finally {
      await store.close()
    }
  })
})

describe('cancel', () => {
  it('cancels a pending timer by the put msgId or its UNIQ_KEY; a delivered or unknown one is not', async () => {
    const fake = new FakeClock()
    const store = await openWith(tempDir('mqstore-timer-'), fake)
    try {
      const timer = timerOf(store)
      const one = await store.putMessage({ topic: 'c', body: 'one', delayMs: 10_000 } as never)
      await store.putMessage({
        topic: 'c',
        body: 'two',
        delayMs: 10_000,
        properties: { UNIQ_KEY: 'FEEDFACE000000000000000000000002' },
      } as never)
      await store.putMessage({ topic: 'c', body: 'three', delayMs: 10_000 } as never)
      expect(await store.cancelTimer(one.msgId)).toBe(true)
      expect(await store.cancelTimer('FEEDFACE000000000000000000000002')).toBe(true)
      expect(await store.cancelTimer('00000000000000000000000000000000')).toBe(false)
      await expect(store.cancelTimer('')).rejects.toThrow(TypeError)
      fake.at += 11_000
      await timer.deliverDue()
      expect(bodies(store, 'c')).toEqual(['three'])
      expect(store.stats().timer).toMatchObject({ delivered: 1, cancelled: 2 })
      expect(await store.cancelTimer(one.msgId)).toBe(false)
    } finally {
      await store.close()
    }
  })
})

describe('files and restarts', () => {
  it('writes timerlog/, timerwheel and config/timercheck, and resumes after a close without repeats', async () => {
    const dir = tempDir('mqstore-timer-')
    const fake = new FakeClock()
    let store = await openWith(dir, fake)
    for (let i = 0; i < 6; i++) await store.putMessage({ topic: 'p', body: `m${i}`, delayMs: 1000 * (i + 1) * 10 } as never)
    fake.at += 31_000
    await timerOf(store).deliverDue()
    await waitFor(() => timerOf(store).stats().pending === 3, 'enqueue')
    expect(bodies(store, 'p')).toEqual(['m0', 'm1', 'm2'])
    await store.close()
    expect(fs.statSync(join(dir, 'timerwheel')).size).toBe(TIMER_WHEEL_FILE_SIZE)
    expect(fs.readdirSync(join(dir, 'timerlog'))).toEqual(['00000000000000000000'])
    expect(fs.statSync(join(dir, 'config', 'timercheck')).size).toBe(TIMER_CHECKPOINT_SIZE)
    const checkpoint = loadTimerCheckpoint(join(dir, 'config', 'timercheck'))
    expect(checkpoint).toMatchObject({ lastTimerLogFlushPos: 6 * TIMER_LOG_UNIT_SIZE, lastTimerQueueOffset: 6 })
    store = await openWith(dir, fake)
    try {
      expect(store.stats().timer.pending).toBe(3)
      fake.at += 60_000
      await timerOf(store).deliverDue()
      expect(bodies(store, 'p')).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5'])
      expect(readAll(store, TIMER_TOPIC, 0)).toHaveLength(6)
    } finally {
      await store.close()
    }
  })

  it('rebuilds a damaged or missing wheel, a damaged checkpoint and a damaged log, logged as repairs', async () => {
    const dir = tempDir('mqstore-timer-')
    const fake = new FakeClock()
    let store = await openWith(dir, fake)
    for (let i = 0; i < 4; i++) await store.putMessage({ topic: 'd', body: `m${i}`, delayMs: 10_000 + i * 1000 } as never)
    await timerOf(store).deliverDue()
    const slotTimes = readAll(store, TIMER_TOPIC, 0).map((m) => Number(m.properties.TIMER_OUT_MS))
    await store.close()
    const damage: [string, () => void, RegExp][] = [
      ['wheel cut short', () => fs.truncateSync(join(dir, 'timerwheel'), 1000), /timerwheel was 1000 bytes/],
      ['wheel missing', () => fs.rmSync(join(dir, 'timerwheel')), /timerwheel was missing/],
      ['checkpoint damaged', () => fs.writeFileSync(join(dir, 'config', 'timercheck'), 'junk'), /timercheck: 4 bytes/],
      [
        'slots pointing past the log',
        () => {
          const fd = fs.openSync(join(dir, 'timerwheel'), 'r+')
          const far = Buffer.from([0, 0, 0, 1, 0, 0, 0, 0])
          for (const time of slotTimes) fs.writeSync(fd, far, 0, 8, ((time / 1000) % TIMER_WHEEL_SLOTS) * 32 + 16)
          fs.closeSync(fd)
        },
        /points at/,
      ],
      [
        'log unit damaged',
        () => {
          const fd = fs.openSync(join(dir, 'timerlog', '00000000000000000000'), 'r+')
          fs.writeSync(fd, Buffer.from([0, 0, 0, 9]), 0, 4, 2 * TIMER_LOG_UNIT_SIZE)
          fs.closeSync(fd)
        },
        /cut the timer log/,
      ],
    ]
    for (const [what, harm, said] of damage) {
      harm()
      const lines: string[] = []
      store = await openWith(dir, fake, lines)
      try {
        // A cut log gets the timer topic's records past its end enqueued again by the loop.
        await waitFor(() => store.stats().timer.pending === 4, `${what}: 4 pending`)
        expect(lines.join('\n'), what).toMatch(said)
        expect(
          store
            .stats()
            .repairs.map((r) => `${r.action}: ${r.reason}`)
            .join('\n'),
          what,
        ).toMatch(said)
        await timerOf(store).deliverDue()
      } finally {
        await store.close()
      }
    }
    store = await openWith(dir, fake)
    try {
      fake.at += 20_000
      await timerOf(store).deliverDue()
      expect(bodies(store, 'd').sort()).toEqual(['m0', 'm1', 'm2', 'm3'])
    } finally {
      await store.close()
    }
  })
})

describe('tools', () => {
  it('mqstore verify notes damaged timer files; metrics show the timer', async () => {
    const dir = tempDir('mqstore-timer-')
    const fake = new FakeClock()
    const store = await openWith(dir, fake)
    await store.putMessage({ topic: 'v', body: 'x', delayMs: 60_000 } as never)
    await waitFor(() => timerOf(store).stats().pending === 1, 'enqueue')
    const registry = new Registry()
    collectStoreMetrics(store, { register: registry })
    const text = await registry.metrics()
    expect(text).toMatch(/timer_pending 1/)
    expect(text).toMatch(/timer_delivered_total 0/)
    await store.close()
    expect((await verifyStore(dir)).notes.filter((n) => /timer/.test(n))).toEqual([])
    fs.truncateSync(join(dir, 'timerwheel'), 10)
    fs.writeFileSync(join(dir, 'config', 'timercheck'), 'x')
    const fd = fs.openSync(join(dir, 'timerlog', '00000000000000000000'), 'r+')
    fs.writeSync(fd, Buffer.from([7]), 0, 1, 200)
    fs.closeSync(fd)
    const notes = (await verifyStore(dir)).notes.join('\n')
    expect(notes).toMatch(/timerwheel is 10 bytes/)
    expect(notes).toMatch(/timercheck: 1 bytes/)
    expect(notes).toMatch(/a damaged unit at 52/)
  })
})

describe('retention', () => {
  it('says when retention deletes the records of pending timers: stats and a warning when the files go', async () => {
    const dir = tempDir('mqstore-timer-')
    const fake = new FakeClock()
    const lines: string[] = []
    const store = await openWith(dir, fake, lines, {
      mappedFileSizeCommitLog: 4096,
      fileReservedTime: 1,
      deleteWhen: '00;01;02;03;04;05;06;07;08;09;10;11;12;13;14;15;16;17;18;19;20;21;22;23',
    })
    try {
      const due = fake.at + 2 * 86_400_000
      for (let i = 0; i < 2; i++) await store.putMessage({ topic: 'r', body: 'x'.repeat(1000), deliverAt: due } as never)
      for (let i = 0; i < 12; i++) await store.putMessage({ topic: 'filler', body: 'y'.repeat(1000) })
      await store.putMessage({ topic: 'r', body: 'kept', deliverAt: due } as never)
      await timerOf(store).deliverDue()
      expect(store.stats().timer).toMatchObject({ pending: 3, retentionDeletedPending: 0 })
      fake.at += 90 * 60_000
      await store.runCleanupPass()
      expect(store.getMinPhyOffset()).toBeGreaterThan(0)
      await timerOf(store).deliverDue()
      expect(store.stats().timer).toMatchObject({ pending: 3, retentionDeletedPending: 2, lostToRetention: 0 })
      expect(lines).toContainEqual(expect.stringMatching(/^warn retention deleted the records of 2 pending timers/))
      fake.at = due + 60_000
      await timerOf(store).deliverDue()
      expect(store.stats().timer).toMatchObject({ pending: 0, retentionDeletedPending: 2, lostToRetention: 2, delivered: 1 })
      expect(bodies(store, 'r')).toEqual(['kept'])
    } finally {
      await store.close()
    }
  })
})
