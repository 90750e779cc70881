// Old timer-log files go once every entry in them is delivered or cancelled (the log would grow
// for ever otherwise), on real files of 4096 bytes (78 entries each): the files before the oldest
// pending entry are deleted, that one and the last are kept, and the store reopens on what is left
// (after a close and after a crash) and delivers the pending timers.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { verifyStore } from '../../lib/cli/verify/index.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, readAll, SMALL, timerOf, waitFor } from './helpers.js'

const OPTIONS = { ...SMALL, mappedFileSizeTimerLog: 4096 }
const PER_FILE = Math.floor((4096 - 16) / 52)

function logFiles(dir: string): string[] {
  return fs.readdirSync(join(dir, 'timerlog')).sort()
}

describe('timer-log trimming', () => {
  it('deletes the files whose entries are all delivered or cancelled, keeps the one a pending timer needs', async () => {
    const dir = tempDir('mqstore-timer-trim-')
    const fake = new FakeClock()
    const lines: string[] = []
    const open = () =>
      MessageStore.open(dir, { ...OPTIONS, clock: fake.clock, logger: (level, message) => lines.push(`${level} ${message}`) })
    let store = await open()
    const soon = 2 * PER_FILE + 20
    for (let i = 0; i < soon; i += 20) {
      const batch = Array.from({ length: Math.min(20, soon - i) }, (_, j) => ({ topic: 'soon', body: `s${i + j}`, delayMs: 1000 + i + j }))
      expect((await store.putMessages(batch as never)).every((r) => r.status === 'PUT_OK')).toBe(true)
    }
    const far: string[] = []
    for (let i = 0; i < 3; i++) {
      const r = await store.putMessage({ topic: 'far', body: `f${i}`, delayMs: 86_400_000 } as never)
      far.push(r.msgId as string)
    }
    await timerOf(store).deliverDue()
    await waitFor(() => timerOf(store).stats().pending === soon + 3, 'every timer enqueued')
    expect(await store.cancelTimer(far[1])).toBe(true)
    expect(logFiles(dir)).toEqual(['00000000000000000000', '00000000000000004096', '00000000000000008192'])
    fake.at += 60_000
    await timerOf(store).deliverDue()
    expect(readAll(store, 'soon', 0)).toHaveLength(soon)
    await store.close()

    // Reopened (its checkpoint now past the deliveries): the first two files go, the third holds the far ones.
    store = await open()
    try {
      expect(timerOf(store).trimLog()).toBe(2)
      expect(logFiles(dir)).toEqual(['00000000000000008192'])
      expect(store.stats().timer).toMatchObject({ logFilesDeleted: 2, pending: 2 })
      expect(lines).toContainEqual('info deleted 2 timer-log files: every entry in them is delivered or cancelled')
      // Nothing more can go: the last file is never deleted.
      expect(timerOf(store).trimLog()).toBe(0)
    } finally {
      await store.close()
    }
    expect((await verifyStore(dir)).notes.filter((n) => n.includes('timer'))).toEqual([])

    // A crash after the trim: the open recovers from what is left and delivers the far timers.
    store = await open()
    await store.close()
    fs.writeFileSync(join(dir, 'abort'), '')
    store = await open()
    try {
      expect(store.stats().lastExitOK).toBe(false)
      expect(store.stats().repairs).toEqual([])
      fake.at += 2 * 86_400_000
      await timerOf(store).deliverDue()
      expect(readAll(store, 'far', 0).map((m) => m.body.toString())).toEqual(['f0', 'f2'])
      expect(store.stats().timer).toMatchObject({ pending: 0, cancelled: 1 })
    } finally {
      await store.close()
    }
  })

  it('refuses a timer-log file size under 4096 bytes', async () => {
    await expect(MessageStore.open(tempDir('mqstore-timer-trim-'), { ...SMALL, mappedFileSizeTimerLog: 1024 })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
      message: expect.stringMatching(/mappedFileSizeTimerLog must be at least 4096 bytes/),
    })
  })

  it('trims by itself after a save once the log has a new file', async () => {
    const dir = tempDir('mqstore-timer-trim-')
    const fake = new FakeClock()
    const store = await MessageStore.open(dir, { ...OPTIONS, clock: fake.clock, timerPrecisionMs: 100 })
    try {
      for (let round = 0; round < 3; round++) {
        const batch = Array.from({ length: PER_FILE }, (_, j) => ({ topic: 'soon', body: `r${round}-${j}`, delayMs: 500 }))
        expect((await store.putMessages(batch as never)).every((r) => r.status === 'PUT_OK')).toBe(true)
        await timerOf(store).deliverDue()
        fake.at += 1000
        await timerOf(store).deliverDue()
      }
      expect(readAll(store, 'soon', 0)).toHaveLength(3 * PER_FILE)
      // The periodic save (every second, once the copies are flushed) trims when the file count changed.
      await waitFor(() => logFiles(dir).length === 1, 'the delivered files trimmed', 60_000)
      expect(store.stats().timer.logFilesDeleted).toBeGreaterThanOrEqual(2)
    } finally {
      await store.close()
    }
  })
})
