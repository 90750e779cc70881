// `mqstore inspect` and timers: the pending ones, read from the timer files without opening the
// store (count, next due time, the earliest with their destinations; delivered and cancelled
// ones left out), a store without timer files, and damaged files named (the open repairs them).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { formatInspect, inspectStore } from '../../lib/cli/inspect.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, SMALL, timerOf, waitFor } from './helpers.js'

describe('mqstore inspect and timers', () => {
  it('lists the pending timers: count, next due, the earliest first with their destinations', async () => {
    const dir = tempDir('mqstore-timer-inspect-')
    const fake = new FakeClock()
    fake.at = Math.floor(Date.now() / 1000) * 1000 + 300
    const base = fake.at
    const store = await MessageStore.open(dir, { ...SMALL, clock: fake.clock })
    const put = (topic: string, queueId: number, key: string, delayMs: number) =>
      store.putMessage({ topic, queueId, body: key, properties: { UNIQ_KEY: key }, delayMs } as never)
    await put('mail', 1, 'T-late', 3_600_000)
    await put('sms', 0, 'T-soon', 5_000)
    await put('mail', 2, 'T-gone', 1_000)
    await put('sms', 3, 'T-cancel', 5_000)
    for (let i = 0; i < 30; i++) await put('bulk', 0, `B${i}`, 7_200_000 + i * 1000)
    await timerOf(store).deliverDue()
    await waitFor(() => timerOf(store).stats().pending === 34, 'every timer enqueued')
    expect(await store.cancelTimer('T-cancel')).toBe(true)
    // The first is delivered; the cancel marker and the cancelled one stay in their slot until it is due.
    fake.at = base + 2_000
    await timerOf(store).deliverDue()
    await store.close()

    const r = inspectStore(dir).timer
    expect(r).toMatchObject({ present: true, damage: null, pending: 32, logFiles: 1, nextDueTime: base - 300 + 6_000 })
    expect(r.readTimeMs).toBeGreaterThanOrEqual(base - 300 + 1_000)
    expect(r.timers).toHaveLength(20)
    expect(r.timers[0]).toMatchObject({ dueTime: base - 300 + 6_000, topic: 'sms', queueId: 0, uniqKey: 'T-soon' })
    expect(r.timers[1]).toMatchObject({ dueTime: base - 300 + 3_601_000, topic: 'mail', queueId: 1, uniqKey: 'T-late' })
    expect(r.timers.slice(2).map((t) => t.uniqKey)).toEqual(Array.from({ length: 18 }, (_, i) => `B${i}`))
    expect(r.timers.every((t) => t.commitLogOffset >= 0)).toBe(true)
    const text = formatInspect(inspectStore(dir))
    expect(text).toMatch(/timers pending: 32, next due \d{4}-\S+, read position \d{4}-\S+ \(timerlog\/: 1 file\(s\)\)\n/)
    expect(text).toMatch(/ {4}due \S+ {2}-> sms\/0 {2}T-soon\n/)
    expect(text).not.toMatch(/T-cancel|T-gone/)

    // Damaged files are named; the report still counts what it can read.
    fs.writeFileSync(join(dir, 'config', 'timercheck'), 'x')
    const damaged = inspectStore(dir).timer
    expect(damaged.damage).toBe('config/timercheck: 1 bytes, not 4096')
    expect(damaged.readTimeMs).toBeNull()
    expect(formatInspect(inspectStore(dir))).toMatch(/read position - .*\(config\/timercheck: 1 bytes, not 4096; open repairs it\)/)
    fs.truncateSync(join(dir, 'timerwheel'), 10)
    expect(inspectStore(dir).timer).toMatchObject({ damage: 'timerwheel is 10 bytes, not 38707200', pending: 0 })
    fs.rmSync(join(dir, 'timerwheel'))
    expect(inspectStore(dir).timer).toMatchObject({ present: true, damage: 'timerwheel is missing' })
  })

  it('says so for a store without timer files', async () => {
    const dir = tempDir('mqstore-timer-inspect-')
    const store = await MessageStore.open(dir, SMALL)
    await store.putMessage({ topic: 't', body: 'x' })
    await store.close()
    const r = inspectStore(dir)
    expect(r.timer).toEqual({ present: false, readTimeMs: null, damage: null, pending: 0, nextDueTime: null, logFiles: 0, timers: [] })
    expect(formatInspect(r)).toContain('timers pending: 0 (no timer files)\n')
  })
})
