// Close after a burst that filled several commit-log files syncs them all at once: each file has its
// own write-back error state, so parallel syncs of different files still report every error, and
// close waits for the slowest of them rather than for their sum.
import { afterEach, describe, expect, it } from 'vitest'

import { interposeNativeForTesting } from '../../lib/native.js'
import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { wrapMapHandle } from '../helpers/map-handle.js'
import { tempDir } from '../helpers/tmp.js'

const LOG_FILE = 1 << 20
const OPTIONS: OpenOptions = {
  flushDiskType: 'ASYNC_FLUSH',
  mappedFileSizeCommitLog: LOG_FILE,
  messageIndexEnable: false,
  // No flush before close: the burst's files are all left for it.
  flushCommitLogTimed: true,
  flushIntervalCommitLog: 60_000,
  flushCommitLogThoroughInterval: 60_000,
}
const BODY = 1000
const COUNT = 4000

const restores: (() => void)[] = []
afterEach(() => {
  for (const restore of restores.splice(0)) restore()
})

describe('close after a burst over several commit-log files', () => {
  it('syncs the files at once, and every message is there after a reopen', async () => {
    const dir = tempDir('mqstore-close-sync-')
    let closing = false
    let inFlight = 0
    let mostInFlight = 0
    const synced = new Set<number>()
    let nextId = 0
    restores.push(
      interposeNativeForTesting((original) => ({
        map: (fd, length, writable) => {
          const handle = original.map(fd, length, writable)
          if (length !== LOG_FILE || !writable) return handle
          const id = nextId++
          return wrapMapHandle(handle, {
            syncAsync: (offset, bytes) => {
              const done = handle.syncAsync(offset, bytes)
              if (!closing) return done
              synced.add(id)
              inFlight++
              mostInFlight = Math.max(mostInFlight, inFlight)
              return done.finally(() => {
                inFlight--
              })
            },
          })
        },
      })),
    )
    const store = await MessageStore.open(dir, OPTIONS)
    for (let done = 0; done < COUNT; done += 500) {
      const batch = Array.from({ length: 500 }, (_, n) => ({ topic: 'burst', queueId: 0, body: Buffer.alloc(BODY, (done + n) & 0xff) }))
      for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
    }
    const files = store.stats().commitLogMaxOffset / LOG_FILE
    expect(files).toBeGreaterThan(3)
    closing = true
    await store.close()
    // Every file the burst wrote was synced by close, and more than one at a time.
    expect(synced.size).toBeGreaterThanOrEqual(Math.floor(files))
    expect(mostInFlight).toBeGreaterThan(1)

    const reopened = await MessageStore.open(dir, OPTIONS)
    try {
      expect(reopened.getMaxOffsetInQueue('burst', 0)).toBe(COUNT)
      const last = reopened.getMessage('g', 'burst', 0, COUNT - 1, 1)
      expect(last.status).toBe('FOUND')
      expect(last.messages[0].body[0]).toBe((COUNT - 1) & 0xff)
    } finally {
      await reopened.close()
    }
  })
})
