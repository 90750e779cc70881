// The schedule service: delivery per level in order once due (fake clock, including one that jumps
// back and forward), what the delivered copy keeps, config/delayOffset.json (RocketMQ's bytes,
// quoted and unquoted keys, damage rebuilt as a repair), a store written by RocketMQ with messages
// pending, and retention that deleted a pending message (said in stats and the log).
import * as fs from 'node:fs'
import { join } from 'node:path'
import * as zlib from 'node:zlib'
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'

import { collectStoreMetrics } from '../../lib/metrics.js'

import { SCHEDULE_TOPIC } from '../../lib/store/commitlog/record.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { formatDelayOffsets, loadDelayOffsets, parseDelayOffsets } from '../../lib/store/schedule/delay-offsets.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, readAll, SMALL, scheduleOf, waitFor } from './helpers.js'

function bodies(store: MessageStore, topic: string, queueId = 0): string[] {
  return readAll(store, topic, queueId).map((m) => m.body.toString())
}

describe('delivery once due (fake clock)', () => {
  it('delivers each level in order at its due time, and keeps what RocketMQ keeps', async () => {
    const fake = new FakeClock()
    const lines: string[] = []
    const store = await MessageStore.open(tempDir('mqstore-schedule-'), {
      ...SMALL,
      clock: fake.clock,
      logger: (level: string, message: string) => lines.push(`${level} ${message}`),
    })
    try {
      // Frozen past every store time of the puts below, and before their due times (10 s, 30 s).
      fake.at = Date.now() + 2000
      const service = scheduleOf(store)
      const puts = []
      for (let i = 0; i < 5; i++) {
        puts.push(
          await store.putMessage({
            topic: 'reminders',
            queueId: 1,
            body: `one-${i}`,
            tags: 'T',
            keys: [`k${i}`],
            properties: { user: `u${i}` },
            delayTimeLevel: 3,
            flag: 9,
            bornTimestamp: 1234,
            bornHost: '10.1.2.3:4567',
            reconsumeTimes: 2,
          }),
        )
        puts.push(await store.putMessage({ topic: 'reminders', queueId: 1, body: `two-${i}`, delayTimeLevel: 4 }))
      }
      expect(puts[9].storeTimestamp).toBeLessThanOrEqual(fake.at)
      const firstDue = puts[0].storeTimestamp + 10_000
      const lastOne = puts[8].storeTimestamp + 10_000
      await service.deliverDue()
      expect(bodies(store, 'reminders', 1)).toEqual([])
      expect(store.stats().schedule).toMatchObject({ pending: 10, delivered: 0, lagMs: 0 })
      // One ms before the first is due: nothing.
      fake.at = firstDue - 1
      await service.deliverDue()
      expect(bodies(store, 'reminders', 1)).toEqual([])
      expect(store.stats().schedule.nextDueTime).toBe(firstDue)
      // The first level-3 message's time: it alone (unless the others were stored in the same ms).
      fake.at = firstDue
      await service.deliverDue()
      const sameMs = puts.filter((r, i) => i % 2 === 0 && r.storeTimestamp + 10_000 <= firstDue).length
      expect(bodies(store, 'reminders', 1)).toEqual(['one-0', 'one-1', 'one-2', 'one-3', 'one-4'].slice(0, sameMs))
      // All of level 3, none of level 4 (30 s).
      fake.at = lastOne
      await service.deliverDue()
      expect(bodies(store, 'reminders', 1)).toEqual(['one-0', 'one-1', 'one-2', 'one-3', 'one-4'])
      const stats = store.stats().schedule
      expect(stats.delivered).toBe(5)
      expect(stats.pending).toBe(5)
      expect(stats.levels.find((l) => l.level === 4)).toMatchObject({ pending: 5, offset: 0, nextDueTime: puts[1].storeTimestamp + 30_000 })
      expect(stats.levels.find((l) => l.level === 3)).toMatchObject({ pending: 0, offset: 5, nextDueTime: null })
      // Level 4 is due; stats say how late it is before it goes.
      fake.at = puts[9].storeTimestamp + 30_000 + 250
      expect(store.stats().schedule.lagMs).toBe(fake.at - (puts[1].storeTimestamp + 30_000))
      await service.deliverDue()
      expect(bodies(store, 'reminders', 1)).toEqual([
        'one-0',
        'one-1',
        'one-2',
        'one-3',
        'one-4',
        'two-0',
        'two-1',
        'two-2',
        'two-3',
        'two-4',
      ])
      expect(store.stats().schedule).toMatchObject({ pending: 0, delivered: 10, lagMs: 0, nextDueTime: null })
      const registry = new Registry()
      collectStoreMetrics(store, { register: registry })
      const scraped = await registry.metrics()
      expect(scraped).toContain('mqstore_schedule_delivered_total 10')
      expect(scraped).toContain('mqstore_schedule_pending{level="3"} 0')
      expect(scraped).toContain('mqstore_schedule_lag_seconds 0')

      const delivered = readAll(store, 'reminders', 1)
      const parked = readAll(store, SCHEDULE_TOPIC, 2)
      for (let i = 0; i < 5; i++) {
        const m = delivered[i]
        const p = parked[i]
        expect(m.topic).toBe('reminders')
        expect(m.queueId).toBe(1)
        expect(m.properties.DELAY).toBeUndefined()
        expect(m.properties).toMatchObject({ REAL_TOPIC: 'reminders', REAL_QID: '1', TAGS: 'T', KEYS: `k${i}`, user: `u${i}` })
        expect(m.properties.UNIQ_KEY).toBe(p.properties.UNIQ_KEY)
        expect(m.tags).toBe('T')
        expect(m.keys).toEqual([`k${i}`])
        expect(m.flag).toBe(9)
        expect(m.bornTimestamp).toBe(1234)
        expect(m.bornHost).toEqual({ address: '10.1.2.3', port: 4567 })
        expect(m.reconsumeTimes).toBe(2)
        expect(m.storeTimestamp).toBeGreaterThanOrEqual(p.storeTimestamp)
        expect(m.msgId).not.toBe(p.msgId)
      }
      // Keys are indexed again under the real topic.
      expect(store.queryMessage('reminders', 'k3', 4).messages.map((m) => m.body.toString())).toEqual(['one-3'])
      expect(store.queryMessage('reminders', delivered[2].properties.UNIQ_KEY, 4).messages).toHaveLength(1)
    } finally {
      await store.close()
    }
  })

  it('a clock set back delivers at once what is due further away than its level; one set forward delivers everything due', async () => {
    const fake = new FakeClock()
    const store = await MessageStore.open(tempDir('mqstore-schedule-'), { ...SMALL, clock: fake.clock })
    try {
      const service = scheduleOf(store)
      fake.at = Date.now() + 2000 // past the puts' store times, before their due times (10 s, 30 s)
      const a = await store.putMessage({ topic: 't', body: 'a', delayTimeLevel: 3 })
      await store.putMessage({ topic: 't', body: 'b', delayTimeLevel: 4 })
      await service.deliverDue()
      expect(bodies(store, 't')).toEqual([])
      // The clock goes back an hour: the due times are now further ahead than 10 s and 30 s, so
      // RocketMQ's correction delivers both at once instead of holding them an hour.
      fake.at = a.storeTimestamp - 3_600_000
      await service.deliverDue()
      expect(bodies(store, 't').sort()).toEqual(['a', 'b'])
      // Forward a day: every level due, each in its order.
      const more = []
      fake.at = Date.now() + 2000
      for (const level of [5, 3, 5, 4, 3])
        more.push(await store.putMessage({ topic: 'u', body: `l${level}-${more.length}`, delayTimeLevel: level }))
      await service.deliverDue()
      expect(bodies(store, 'u')).toEqual([])
      fake.at = Date.now() + 86_400_000
      await service.deliverDue()
      const got = bodies(store, 'u')
      expect([...got].sort()).toEqual(['l3-1', 'l3-4', 'l4-3', 'l5-0', 'l5-2'])
      expect(got.indexOf('l3-1')).toBeLessThan(got.indexOf('l3-4'))
      expect(got.indexOf('l5-0')).toBeLessThan(got.indexOf('l5-2'))
    } finally {
      await store.close()
    }
  })

  it('delivers more than a batch, and a level woken by a put while idle (real clock, level 1)', async () => {
    const fake = new FakeClock()
    const store = await MessageStore.open(tempDir('mqstore-schedule-'), { ...SMALL, clock: fake.clock })
    try {
      fake.at = Date.now() + 86_400_000
      const puts = await store.putMessages(Array.from({ length: 100 }, (_, i) => ({ topic: 'bulk', body: `m${i}`, delayTimeLevel: 5 })))
      expect(puts.every((r) => r.status === 'PUT_OK')).toBe(true)
      await waitFor(() => store.getMaxOffsetInQueue('bulk', 0) === 100, 'the 100 messages to be delivered')
      expect(bodies(store, 'bulk')).toEqual(Array.from({ length: 100 }, (_, i) => `m${i}`))
    } finally {
      await store.close()
    }
    // The real clock: a level-1 message arrives no earlier than its time.
    const real = await MessageStore.open(tempDir('mqstore-schedule-'), SMALL)
    try {
      const r = await real.putMessage({ topic: 'soon', body: 'x', delayTimeLevel: 1 })
      await waitFor(() => real.getMaxOffsetInQueue('soon', 0) === 1, 'the level-1 message')
      const [m] = readAll(real, 'soon', 0)
      expect(m.storeTimestamp).toBeGreaterThanOrEqual(r.storeTimestamp + 1000)
    } finally {
      await real.close()
    }
  })

  it('a refused delivery is retried, in order, once puts are accepted again', async () => {
    const fake = new FakeClock()
    const lines: string[] = []
    const store = await MessageStore.open(tempDir('mqstore-schedule-'), {
      ...SMALL,
      clock: fake.clock,
      logger: (level: string, message: string) => lines.push(`${level} ${message}`),
    })
    try {
      fake.at = Date.now() + 2000
      await store.putMessage({ topic: 't', body: 'a', delayTimeLevel: 3 })
      await store.putMessage({ topic: 't', body: 'b', delayTimeLevel: 3 })
      const e = (store as unknown as { e: { flags: { set(name: string, why: string): void; clear(name: string): void } } }).e
      e.flags.set('NOT_WRITEABLE', 'a test blocks puts')
      fake.at = Date.now() + 60_000
      await scheduleOf(store).deliverDue()
      expect(bodies(store, 't')).toEqual([])
      await waitFor(
        () => lines.some((l) => /delivery of delay level 3 refused with SERVICE_NOT_AVAILABLE/.test(l)),
        'the refusal to be said',
      )
      await new Promise((resolve) => setTimeout(resolve, 350))
      // Retried every 100 ms, said once.
      expect(lines.filter((l) => /refused with SERVICE_NOT_AVAILABLE/.test(l))).toHaveLength(1)
      e.flags.clear('NOT_WRITEABLE')
      await waitFor(() => store.getMaxOffsetInQueue('t', 0) === 2, 'the retried deliveries')
      expect(bodies(store, 't')).toEqual(['a', 'b'])
      await waitFor(() => lines.includes('info delivery of delay level 3 resumed'), 'the resumption to be said')
    } finally {
      await store.close()
    }
  })
})

describe('a message its real topic refuses for good', () => {
  it('is skipped and said (a compacted topic takes no message without a key), and the level goes on', async () => {
    const fake = new FakeClock()
    const lines: string[] = []
    const store = await MessageStore.open(tempDir('mqstore-schedule-'), {
      ...SMALL,
      clock: fake.clock,
      topics: { kv: { cleanupPolicy: 'compact' } },
      logger: (level: string, message: string) => lines.push(`${level} ${message}`),
    })
    try {
      fake.at = Date.now() + 2000
      expect((await store.putMessage({ topic: 'kv', body: 'no key', delayTimeLevel: 3 })).status).toBe('PUT_OK')
      expect((await store.putMessage({ topic: 'kv', keys: ['k'], body: 'keyed', delayTimeLevel: 3 })).status).toBe('PUT_OK')
      fake.at += 60_000
      await scheduleOf(store).deliverDue()
      expect(store.stats().schedule).toMatchObject({ delivered: 1, skipped: 1, pending: 0 })
      expect(lines).toContainEqual(
        expect.stringMatching(/^error delay level 3, offset 0: its real topic refuses it \(MESSAGE_ILLEGAL: .*\); skipped/),
      )
      expect(store.getLatestByKey('kv', 'k')?.body.toString()).toBe('keyed')
    } finally {
      await store.close()
    }
  })
})

describe('config/delayOffset.json', () => {
  it("is written as RocketMQ's fastjson writes it, and read quoted, unquoted, pretty or compact", () => {
    expect(
      formatDelayOffsets(
        new Map([
          [3, 57],
          [1, 120],
          [2, 0],
        ]),
      ),
    ).toBe('{\n\t"offsetTable":{1:120,2:0,3:57\n\t}\n}')
    expect(formatDelayOffsets(new Map())).toBe('{\n\t"offsetTable":{}\n}')
    const expected = new Map([
      [1, 120],
      [2, 0],
      [3, 57],
    ])
    expect(parseDelayOffsets('{\n\t"offsetTable":{1:120,2:0,3:57\n\t}\n}')).toEqual(expected)
    expect(parseDelayOffsets('{"offsetTable":{1:120,2:0,3:57}}')).toEqual(expected)
    expect(parseDelayOffsets('{"offsetTable":{"1":120,"2":0,"3":57}}')).toEqual(expected)
    expect(parseDelayOffsets('{"dataVersion":{"counter":3},"offsetTable":{"1":120,2:0,"3":57}}')).toEqual(expected)
    expect(parseDelayOffsets('{"offsetTable":{1:120,2:0,3:')).toMatch(/not JSON/)
    expect(parseDelayOffsets('{"other":{}}')).toMatch(/no "offsetTable"/)
    expect(parseDelayOffsets('{"offsetTable":{0:1}}')).toMatch(/not a positive integer/)
    expect(parseDelayOffsets('{"offsetTable":{1:-1}}')).toMatch(/not a non-negative integer/)
    expect(parseDelayOffsets('{"offsetTable":{1:"5"}}')).toMatch(/not a non-negative integer/)
  })

  it('falls back to .bak, and says so', () => {
    const dir = tempDir('mqstore-delayoffset-')
    const path = join(dir, 'delayOffset.json')
    expect(loadDelayOffsets(path)).toEqual({ table: new Map(), damage: null, fromBackup: false })
    fs.writeFileSync(`${path}.bak`, '{"offsetTable":{2:7}}')
    expect(loadDelayOffsets(path)).toMatchObject({ table: new Map([[2, 7]]), fromBackup: true })
    fs.writeFileSync(path, '{"offsetTable":{2:')
    expect(loadDelayOffsets(path)).toMatchObject({ table: new Map([[2, 7]]), fromBackup: true, damage: expect.stringMatching(/not JSON/) })
    fs.writeFileSync(`${path}.bak`, 'garbage')
    expect(loadDelayOffsets(path)).toMatchObject({ table: new Map(), fromBackup: false, damage: expect.stringMatching(/not JSON/) })
  })

  it('a periodic save never counts a delivery whose copy is not flushed yet (a power cut could lose it)', async () => {
    const dir = tempDir('mqstore-schedule-')
    const fake = new FakeClock()
    const path = join(dir, 'config', 'delayOffset.json')
    const store = await MessageStore.open(dir, { ...SMALL, clock: fake.clock, flushDelayOffsetInterval: 20 })
    try {
      fake.at = Date.now() + 2000
      for (let i = 0; i < 4; i++) await store.putMessage({ topic: 't', body: `m${i}`, delayTimeLevel: 3 })
      fake.at += 60_000
      await scheduleOf(store).deliverDue()
      const copies = readAll(store, 't', 0)
      expect(copies).toHaveLength(4)
      // For a while: whatever the file says, the copies it counts are flushed.
      for (let i = 0; i < 25; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20))
        if (!fs.existsSync(path)) continue
        const saved = parseDelayOffsets(fs.readFileSync(path, 'utf8'))
        if (typeof saved === 'string') throw new Error(saved)
        const counted = saved.get(3) ?? 0
        if (counted > 0) {
          const copy = copies[counted - 1]
          expect(store.stats().commitLogFlushedOffset).toBeGreaterThanOrEqual(copy.commitLogOffset + copy.storeSize)
        }
      }
    } finally {
      await store.close()
    }
    expect(fs.readFileSync(path, 'utf8')).toBe('{\n\t"offsetTable":{3:4\n\t}\n}')
  })

  it('is saved at close and periodically, covering only flushed deliveries; a damaged one is rebuilt as a repair (at least once)', async () => {
    const dir = tempDir('mqstore-schedule-')
    const fake = new FakeClock()
    const options = { ...SMALL, clock: fake.clock, flushDelayOffsetInterval: 50, flushCommitLogThoroughInterval: 100 }
    const path = join(dir, 'config', 'delayOffset.json')
    let store = await MessageStore.open(dir, options)
    fake.at = Date.now() + 2000
    for (let i = 0; i < 4; i++) await store.putMessage({ topic: 't', body: `m${i}`, delayTimeLevel: 3 })
    await store.putMessage({ topic: 't', body: 'later', delayTimeLevel: 18 })
    fake.at = Date.now() + 60_000
    await scheduleOf(store).deliverDue()
    expect(bodies(store, 't')).toEqual(['m0', 'm1', 'm2', 'm3'])
    // The periodic save writes the progress once the flusher has the copies on disk.
    await waitFor(() => fs.existsSync(path) && fs.readFileSync(path, 'utf8').includes('3:4'), 'the periodic save')
    await store.close()
    expect(fs.readFileSync(path, 'utf8')).toBe('{\n\t"offsetTable":{3:4,18:0\n\t}\n}')

    // Reopened: nothing delivered twice, the level-18 message still pending.
    store = await MessageStore.open(dir, options)
    await scheduleOf(store).deliverDue()
    expect(bodies(store, 't')).toEqual(['m0', 'm1', 'm2', 'm3'])
    expect(store.stats().schedule.pending).toBe(1)
    await store.close()

    // Damaged file and backup, no progress note: rebuilt from the queues' min offsets, a repair in
    // stats and the log.
    fs.writeFileSync(path, '{\n\t"offsetTable":{3:4,18')
    fs.writeFileSync(`${path}.bak`, '')
    fs.rmSync(join(dir, 'config', 'delayProgress.json'))
    const lines: string[] = []
    store = await MessageStore.open(dir, { ...options, logger: (level: string, message: string) => lines.push(`${level} ${message}`) })
    try {
      expect(store.stats().repairs).toContainEqual({
        action: 'rebuilt config/delayOffset.json from the schedule queues',
        reason: expect.stringMatching(/config\/delayOffset.json: not JSON/),
      })
      expect(lines.some((l) => l.startsWith('warn rebuilt config/delayOffset.json'))).toBe(true)
      await scheduleOf(store).deliverDue()
      // At least once: the four are delivered again, with the same client ids.
      const all = readAll(store, 't', 0)
      expect(all.map((m) => m.body.toString())).toEqual(['m0', 'm1', 'm2', 'm3', 'm0', 'm1', 'm2', 'm3'])
      for (let i = 0; i < 4; i++) expect(all[i + 4].properties.UNIQ_KEY).toBe(all[i].properties.UNIQ_KEY)
    } finally {
      await store.close()
    }
    expect(fs.readFileSync(path, 'utf8')).toBe('{\n\t"offsetTable":{3:4,18:0\n\t}\n}')
  })
})

/** A v1 commit-log record built field by field from the spec (§2.1), IPv4 hosts. */
function rocketmqRecord(fields: {
  physicalOffset: number
  queueId: number
  queueOffset: number
  topic: string
  body: Buffer
  properties: string
  storeTimestamp: number
  bornTimestamp: number
  flag: number
  reconsumeTimes: number
}): Buffer {
  const topic = Buffer.from(fields.topic)
  const props = Buffer.from(fields.properties)
  const total = 91 + fields.body.length + topic.length + props.length
  const b = Buffer.alloc(total)
  let p = 0
  p = b.writeInt32BE(total, p)
  p = b.writeInt32BE(-626843481, p) // MAGICCODE 0xDAA320A7
  p = b.writeInt32BE(zlib.crc32(fields.body) & 0x7fffffff, p)
  p = b.writeInt32BE(fields.queueId, p)
  p = b.writeInt32BE(fields.flag, p)
  p = b.writeBigInt64BE(BigInt(fields.queueOffset), p)
  p = b.writeBigInt64BE(BigInt(fields.physicalOffset), p)
  p = b.writeInt32BE(0, p) // SYSFLAG
  p = b.writeBigInt64BE(BigInt(fields.bornTimestamp), p)
  p += Buffer.from([10, 0, 0, 9]).copy(b, p)
  p = b.writeInt32BE(5555, p)
  p = b.writeBigInt64BE(BigInt(fields.storeTimestamp), p)
  p += Buffer.from([127, 0, 0, 1]).copy(b, p)
  p = b.writeInt32BE(10911, p)
  p = b.writeInt32BE(fields.reconsumeTimes, p)
  p = b.writeBigInt64BE(0n, p) // PREPAREDTRANSACTIONOFFSET
  p = b.writeInt32BE(fields.body.length, p)
  p += fields.body.copy(b, p)
  p = b.writeInt8(topic.length, p)
  p += topic.copy(b, p)
  p = b.writeInt16BE(props.length, p)
  p += props.copy(b, p)
  expect(p).toBe(total)
  return b
}

describe('interchange with RocketMQ', () => {
  it('delivers what a RocketMQ broker left pending (its records, its unquoted delayOffset.json)', async () => {
    const dir = tempDir('mqstore-schedule-')
    const size = SMALL.mappedFileSizeCommitLog as number
    fs.mkdirSync(join(dir, 'commitlog'), { recursive: true })
    fs.mkdirSync(join(dir, 'config'), { recursive: true })
    const stored = Date.now() - 120_000
    const props = (delay: number, uniq: string): string =>
      [
        `DELAY\u0001${delay}`,
        'REAL_TOPIC\u0001orders',
        'REAL_QID\u00011',
        `UNIQ_KEY\u0001${uniq}`,
        'KEYS\u0001o-1',
        'TAGS\u0001TagA',
        'WAIT\u0001true',
      ].join('\u0002')
    const first = rocketmqRecord({
      physicalOffset: 0,
      queueId: 0,
      queueOffset: 0,
      topic: SCHEDULE_TOPIC,
      body: Buffer.from('from a broker'),
      properties: props(1, 'C0A8000100002A9F0000000000000001'),
      storeTimestamp: stored,
      bornTimestamp: stored - 5,
      flag: 7,
      reconsumeTimes: 2,
    })
    const second = rocketmqRecord({
      physicalOffset: first.length,
      queueId: 17,
      queueOffset: 0,
      topic: SCHEDULE_TOPIC,
      body: Buffer.from('two hours'),
      properties: props(18, 'C0A8000100002A9F0000000000000002'),
      storeTimestamp: stored,
      bornTimestamp: stored,
      flag: 0,
      reconsumeTimes: 0,
    })
    // A level-1 record without REAL_TOPIC / REAL_QID: nowhere to deliver it; skipped and said.
    const third = rocketmqRecord({
      physicalOffset: first.length + second.length,
      queueId: 0,
      queueOffset: 1,
      topic: SCHEDULE_TOPIC,
      body: Buffer.from('lost'),
      properties: 'DELAY\u00011',
      storeTimestamp: stored,
      bornTimestamp: stored,
      flag: 0,
      reconsumeTimes: 0,
    })
    // One bound for the transaction half topic: RocketMQ never delivers there either.
    const fourth = rocketmqRecord({
      physicalOffset: first.length + second.length + third.length,
      queueId: 0,
      queueOffset: 2,
      topic: SCHEDULE_TOPIC,
      body: Buffer.from('half'),
      properties: 'DELAY\u00011\u0002REAL_TOPIC\u0001RMQ_SYS_TRANS_HALF_TOPIC\u0002REAL_QID\u00010',
      storeTimestamp: stored,
      bornTimestamp: stored,
      flag: 0,
      reconsumeTimes: 0,
    })
    const log = Buffer.alloc(size)
    first.copy(log, 0)
    second.copy(log, first.length)
    third.copy(log, first.length + second.length)
    fourth.copy(log, first.length + second.length + third.length)
    fs.writeFileSync(join(dir, 'commitlog', '00000000000000000000'), log)
    // fastjson's shape: unquoted keys, no line break before them; level 1 has delivered nothing yet.
    fs.writeFileSync(join(dir, 'config', 'delayOffset.json'), '{\n\t"offsetTable":{1:0,18:0\n\t}\n}')
    const lines: string[] = []
    const store = await MessageStore.open(dir, { ...SMALL, logger: (level: string, message: string) => lines.push(`${level} ${message}`) })
    try {
      await waitFor(() => store.getMaxOffsetInQueue('orders', 1) === 1, 'the pending level-1 message')
      await waitFor(() => store.stats().schedule.skipped === 2, 'the records without a destination to be skipped')
      expect(lines).toContainEqual(expect.stringMatching(/^error delay level 1, offset 2 .*REAL_TOPIC is RMQ_SYS_TRANS_HALF_TOPIC/))
      expect(store.getMaxOffsetInQueue('RMQ_SYS_TRANS_HALF_TOPIC', 0)).toBe(0)
      expect(lines).toContainEqual(expect.stringMatching(/^error delay level 1, offset 1 .*no valid REAL_TOPIC \/ REAL_QID; skipped/))
      const [m] = readAll(store, 'orders', 1)
      expect(m.body.toString()).toBe('from a broker')
      expect(m.properties).toEqual({
        REAL_TOPIC: 'orders',
        REAL_QID: '1',
        UNIQ_KEY: 'C0A8000100002A9F0000000000000001',
        KEYS: 'o-1',
        TAGS: 'TagA',
        WAIT: 'true',
      })
      expect(m).toMatchObject({ flag: 7, reconsumeTimes: 2, bornTimestamp: stored - 5, bornHost: { address: '10.0.0.9', port: 5555 } })
      expect(store.stats().schedule).toMatchObject({ pending: 1, delivered: 1, nextDueTime: stored + 7_200_000 })
    } finally {
      await store.close()
    }
  })

  it('writes schedule records and units a RocketMQ broker reads: fields at the spec offsets, tagsCode the due time', async () => {
    const dir = tempDir('mqstore-schedule-')
    const fake = new FakeClock()
    fake.at = Date.now() + 2000
    const store = await MessageStore.open(dir, { ...SMALL, clock: fake.clock })
    const r = await store.putMessage({ topic: 'orders', queueId: 5, body: 'hello', properties: { UNIQ_KEY: 'U1' }, delayTimeLevel: 4 })
    await scheduleOf(store).deliverDue()
    await store.close()
    const log = fs.readFileSync(join(dir, 'commitlog', '00000000000000000000'))
    const at = r.wroteOffset
    expect(log.readInt32BE(at + 4)).toBe(-626843481)
    expect(log.readInt32BE(at + 12)).toBe(3) // QUEUEID = level - 1
    const bodyLength = log.readInt32BE(at + 84)
    expect(log.subarray(at + 88, at + 88 + bodyLength).toString()).toBe('hello')
    const topicAt = at + 88 + bodyLength
    expect(log.subarray(topicAt + 1, topicAt + 1 + log.readInt8(topicAt)).toString()).toBe(SCHEDULE_TOPIC)
    const propsAt = topicAt + 1 + log.readInt8(topicAt)
    const text = log.subarray(propsAt + 2, propsAt + 2 + log.readInt16BE(propsAt)).toString()
    const pairs = Object.fromEntries(text.split('\u0002').map((pair) => pair.split('\u0001')))
    expect(pairs).toEqual({ UNIQ_KEY: 'U1', DELAY: '4', REAL_TOPIC: 'orders', REAL_QID: '5' })
    const unit = fs.readFileSync(join(dir, 'consumequeue', SCHEDULE_TOPIC, '3', '00000000000000000000'))
    expect(Number(unit.readBigInt64BE(0))).toBe(at)
    expect(unit.readInt32BE(8)).toBe(r.wroteBytes)
    expect(Number(unit.readBigInt64BE(12))).toBe(r.storeTimestamp + 30_000)
    expect(fs.readFileSync(join(dir, 'config', 'delayOffset.json'), 'utf8')).toBe('{\n\t"offsetTable":{4:0\n\t}\n}')
  })
})

describe('retention and pending messages', () => {
  it('a pending message whose record retention deleted is counted and logged, never silently dropped', async () => {
    const dir = tempDir('mqstore-schedule-')
    const fake = new FakeClock()
    const lines: string[] = []
    const options = {
      ...SMALL,
      mappedFileSizeCommitLog: 4096,
      clock: fake.clock,
      fileReservedTime: 1,
      deleteWhen: '00;01;02;03;04;05;06;07;08;09;10;11;12;13;14;15;16;17;18;19;20;21;22;23',
      logger: (level: string, message: string) => lines.push(`${level} ${message}`),
    }
    const store = await MessageStore.open(dir, options)
    try {
      fake.at = Date.now() + 2000
      await store.putMessage({ topic: 't', body: 'x'.repeat(1000), delayTimeLevel: 18 })
      for (let i = 0; i < 12; i++) await store.putMessage({ topic: 'filler', body: 'y'.repeat(1000) })
      await scheduleOf(store).deliverDue()
      expect(store.stats().schedule).toMatchObject({ pending: 1, oldestPendingCommitLogOffset: 0 })
      // Three hours later (past fileReservedTime), retention deletes the old files at once.
      fake.at = Date.now() + 3 * 3_600_000
      await store.runCleanupPass()
      expect(store.getMinPhyOffset()).toBeGreaterThan(0)
      await scheduleOf(store).deliverDue()
      expect(store.stats().schedule).toMatchObject({ lostToRetention: 1, pending: 0 })
      expect(lines.some((l) => /^error delay level 18.*retention deleted .* before (its|their) delivery/.test(l))).toBe(true)
      expect(store.getMaxOffsetInQueue('t', 0)).toBe(0)
    } finally {
      await store.close()
    }
  })
  it('retention that deletes the records of pending messages says so when the files go: stats and a warning', async () => {
    const dir = tempDir('mqstore-schedule-')
    const fake = new FakeClock()
    const lines: string[] = []
    const store = await MessageStore.open(dir, {
      ...SMALL,
      mappedFileSizeCommitLog: 4096,
      clock: fake.clock,
      fileReservedTime: 1,
      deleteWhen: '00;01;02;03;04;05;06;07;08;09;10;11;12;13;14;15;16;17;18;19;20;21;22;23',
      logger: (level: string, message: string) => lines.push(`${level} ${message}`),
    })
    try {
      fake.at = Date.now() + 2000
      // Two level-18 (2 h) messages in the first files, one level-17 (1 h) put after the fillers.
      for (let i = 0; i < 2; i++) await store.putMessage({ topic: 't', body: 'x'.repeat(1000), delayTimeLevel: 18 })
      for (let i = 0; i < 12; i++) await store.putMessage({ topic: 'filler', body: 'y'.repeat(1000) })
      await store.putMessage({ topic: 't', body: 'z', delayTimeLevel: 17 })
      await scheduleOf(store).deliverDue()
      expect(store.stats().schedule).toMatchObject({ pending: 3, retentionDeletedPending: 0 })
      // 90 minutes on: the old files are past fileReservedTime, the level-18 messages not due yet.
      fake.at = Date.now() + 90 * 60_000
      await store.runCleanupPass()
      expect(store.getMinPhyOffset()).toBeGreaterThan(0)
      expect(store.stats().schedule).toMatchObject({ retentionDeletedPending: 2, lostToRetention: 0 })
      expect(lines).toContainEqual(
        expect.stringMatching(/^warn retention deleted the records of 2 pending delayed messages \(level 18: 2;/),
      )
      // Counted once, however often stats() looks; skipped (and counted again there) when due.
      expect(store.stats().schedule.retentionDeletedPending).toBe(2)
      fake.at = Date.now() + 3 * 3_600_000
      await scheduleOf(store).deliverDue()
      await scheduleOf(store).deliverDue()
      expect(store.stats().schedule).toMatchObject({ retentionDeletedPending: 2, lostToRetention: 2, pending: 0 })
    } finally {
      await store.close()
    }
  })
})
