// The tools and delayed messages: `mqstore inspect` shows those still pending (per level from the
// saved progress, with their due times and where they go); `mqstore verify` checks the progress file.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { formatInspect, inspectStore } from '../../lib/cli/inspect.js'
import { verifyStore } from '../../lib/cli/verify/index.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, SMALL, scheduleOf } from './helpers.js'

describe('mqstore inspect and delayed messages', () => {
  it('lists pending delayed messages per level, from the saved progress', async () => {
    const dir = tempDir('mqstore-schedule-inspect-')
    const fake = new FakeClock()
    fake.at = Date.now() + 2000
    const store = await MessageStore.open(dir, { ...SMALL, clock: fake.clock })
    const puts = []
    for (let i = 0; i < 3; i++)
      puts.push(await store.putMessage({ topic: 'mail', queueId: 2, body: `m${i}`, properties: { UNIQ_KEY: `U${i}` }, delayTimeLevel: 3 }))
    puts.push(await store.putMessage({ topic: 'sms', body: 'x', properties: { UNIQ_KEY: 'U9' }, delayTimeLevel: 18 }))
    // The first level-3 message is delivered; the rest stay pending.
    fake.at = puts[0].storeTimestamp + 10_000
    await scheduleOf(store).deliverDue()
    await store.close()

    const r = inspectStore(dir)
    expect(r.schedule.progressDamage).toBeNull()
    const deliveredNow = puts.slice(0, 3).filter((p) => p.storeTimestamp + 10_000 <= fake.at).length
    expect(deliveredNow).toBeGreaterThanOrEqual(1)
    expect(r.schedule.pending).toBe(3 - deliveredNow + 1)
    const level3 = r.schedule.levels.find((l) => l.level === 3)
    expect(level3).toMatchObject({ maxOffset: 3 })
    expect(r.schedule.levels.find((l) => l.level === 18)).toEqual({
      level: 18,
      deliveredTo: 0,
      maxOffset: 1,
      pending: 1,
      nextDueTime: puts[3].storeTimestamp + 7_200_000,
    })
    expect(r.schedule.messages.at(-1)).toEqual({
      level: 18,
      queueOffset: 0,
      commitLogOffset: puts[3].wroteOffset,
      dueTime: puts[3].storeTimestamp + 7_200_000,
      topic: 'sms',
      queueId: 0,
      uniqKey: 'U9',
    })
    expect(r.schedule.messages.filter((m) => m.level === 3).every((m) => m.topic === 'mail' && m.queueId === 2)).toBe(true)
    const text = formatInspect(r)
    expect(text).toContain(`delayed messages pending: ${r.schedule.pending}`)
    expect(text).toMatch(/level 18: 1 pending \(delivered to 0 of 1\), next due \d{4}-/)
    expect(text).toMatch(/level 18 {2}-> sms\/0 {2}U9/)

    fs.writeFileSync(join(dir, 'config', 'delayOffset.json'), '{"offsetTable":')
    fs.rmSync(join(dir, 'config', 'delayOffset.json.bak'), { force: true })
    const damaged = inspectStore(dir)
    expect(damaged.schedule.progressDamage).toMatch(/not JSON/)
    expect(formatInspect(damaged)).toMatch(/delayed messages pending: 4 \(config\/delayOffset.json: not JSON/)

    // verify: a damaged progress file is a note (open rebuilds it), the store's files are fine.
    const checked = await verifyStore(dir)
    expect(checked.ok).toBe(true)
    expect(checked.notes).toContainEqual(
      expect.stringMatching(/^config\/delayOffset.json: not JSON.*open rebuilds it from the schedule queues/),
    )
    fs.writeFileSync(join(dir, 'config', 'delayOffset.json'), '{"offsetTable":{3:1,7:5}}')
    expect((await verifyStore(dir)).notes).toContainEqual('config/delayOffset.json: level 7 has progress 5 but no schedule queue')
  })
})
