// A consume queue's file is faulted in ahead of the writer, off the JS thread: its first reserved
// part when the file is made, then each later chunk as it is reserved. The writer (dispatch, on the
// put path) then writes into pages that are already mapped.
import { afterEach, describe, expect, it } from 'vitest'

import { interposeNativeForTesting, type MapHandle } from '../../lib/native.js'
import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { CQ_RESERVE_CHUNK_BYTES } from '../../lib/store/queue/consume-queue.js'
import { wrapMapHandle } from '../helpers/map-handle.js'
import { tempDir } from '../helpers/tmp.js'

const QUEUE_FILE = 50_000 * 20
const OPTIONS: OpenOptions = {
  flushDiskType: 'ASYNC_FLUSH',
  mappedFileSizeCommitLog: 8 << 20,
  mappedFileSizeConsumeQueue: QUEUE_FILE,
  messageIndexEnable: false,
}

const restores: (() => void)[] = []
const stores: MessageStore[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
  for (const restore of restores.splice(0)) restore()
})

/** Merges [offset, offset + length) ranges into the covered prefix [0, end) (-1 at a gap from 0). */
function coveredPrefix(ranges: { offset: number; length: number }[]): number {
  let end = 0
  for (const { offset, length } of [...ranges].sort((a, b) => a.offset - b.offset)) {
    if (offset > end) break
    end = Math.max(end, offset + length)
  }
  return end
}

describe("a consume queue's pages are faulted in ahead of the writer", () => {
  it('the first part when the file is made, then every chunk as it is reserved, before dispatch writes there', async () => {
    const warmed: { offset: number; length: number }[] = []
    let writtenPastWarm = 0
    let unitsWritten = 0
    restores.push(
      interposeNativeForTesting((original) => {
        const recordWarmUps = (handle: MapHandle): MapHandle =>
          wrapMapHandle(handle, {
            warmAsync: (offset, bytes) => {
              warmed.push({ offset, length: bytes })
              return handle.warmAsync(offset, bytes)
            },
          })
        return {
          map: (fd, length, writable, expose) => {
            const handle = original.map(fd, length, writable, expose)
            return length !== QUEUE_FILE || !writable ? handle : recordWarmUps(handle)
          },
          // A new queue's file is made, mapped and its first part faulted in by one call.
          createMapped: async (path, size, reserve, warm, expose) => {
            const handle = await original.createMapped(path, size, reserve, warm, expose)
            if (size !== QUEUE_FILE) return handle
            warmed.push({ offset: 0, length: Math.min(warm, reserve) })
            return recordWarmUps(handle)
          },
        }
      }),
    )
    const store = await MessageStore.open(tempDir('mqstore-queue-warm-'), OPTIONS)
    stores.push(store)
    // 20,000 units of 20 bytes: about six chunks of the one queue's file.
    for (let done = 0; done < 20_000; done += 500) {
      const batch = Array.from({ length: 500 }, (_, n) => ({ topic: 'warm', queueId: 0, body: `m${done + n}` }))
      for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
      unitsWritten = done + 500
      // Every unit written so far lies in a range whose warm-up was asked for.
      if (coveredPrefix(warmed) < unitsWritten * 20) writtenPastWarm++
    }
    expect(store.getMaxOffsetInQueue('warm', 0)).toBe(20_000)
    expect(writtenPastWarm).toBe(0)
    expect(warmed.length).toBeGreaterThanOrEqual(Math.floor((20_000 * 20) / CQ_RESERVE_CHUNK_BYTES))
    // Nothing is warmed twice, and nothing beyond the file.
    const sorted = [...warmed].sort((a, b) => a.offset - b.offset)
    for (let i = 1; i < sorted.length; i++) expect(sorted[i].offset).toBeGreaterThanOrEqual(sorted[i - 1].offset + sorted[i - 1].length)
    expect(coveredPrefix(warmed)).toBeLessThanOrEqual(QUEUE_FILE)
  })
})
