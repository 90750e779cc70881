// The commit-log flusher with small files: one flush covers one file (RocketMQ's rule), so a
// burst that filled several files must be flushed file after file in the same pass. Before, a
// SYNC_FLUSH batch over more than four files answered FLUSH_DISK_TIMEOUT for every message, and
// the periodic flush moved one file per interval, leaving the rest unsynced for seconds.
import { afterEach, describe, expect, it, vi } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'

const LOG_FILE = 64 * 1024
const BASE: OpenOptions = {
  mappedFileSizeCommitLog: LOG_FILE,
  mappedFileSizeConsumeQueue: 1000 * 20,
  maxHashSlotNum: 1000,
  maxIndexNum: 4000,
}

/** About 60 records of 1000 B fill a 64 KiB file. */
function batch(files: number): { topic: string; queueId: number; body: Buffer }[] {
  return Array.from({ length: files * 60 }, (_, n) => ({ topic: 't', queueId: 0, body: Buffer.alloc(1000, n & 0xff) }))
}

describe('flushing a burst that spans many small commit-log files', () => {
  const stores: MessageStore[] = []
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close()
  })

  it('a SYNC_FLUSH batch over twelve files is acknowledged PUT_OK, every message flushed', async () => {
    const store = await MessageStore.open(tempDir('mqstore-flusher-'), { ...BASE, flushDiskType: 'SYNC_FLUSH' })
    stores.push(store)
    const results = await store.putMessages(batch(12))
    expect(results.filter((r) => r.status !== 'PUT_OK')).toEqual([])
    const stats = store.stats()
    expect(stats.commitLogMaxOffset).toBeGreaterThan(11 * LOG_FILE)
    expect(stats.commitLogFlushedOffset).toBe(stats.commitLogMaxOffset)
  })

  it('SYNC_FLUSH also flushes what no put waits for (WAIT=false), as an idle group commit does', async () => {
    const store = await MessageStore.open(tempDir('mqstore-flusher-'), { ...BASE, flushDiskType: 'SYNC_FLUSH' })
    stores.push(store)
    const results = await store.putMessages(batch(3).map((m) => ({ ...m, properties: { WAIT: 'false' } })))
    expect(results.filter((r) => r.status !== 'PUT_OK')).toEqual([])
    await vi.waitFor(
      () => {
        const stats = store.stats()
        expect(stats.commitLogFlushedOffset).toBe(stats.commitLogMaxOffset)
      },
      { timeout: 10_000, interval: 20 },
    )
    expect(store.stats().commitLogMaxOffset).toBeGreaterThan(2 * LOG_FILE)
  })

  it('one ASYNC_FLUSH pass, woken by the put, flushes every file the burst filled (the next pass is a minute away)', async () => {
    const store = await MessageStore.open(tempDir('mqstore-flusher-'), {
      ...BASE,
      flushDiskType: 'ASYNC_FLUSH',
      flushIntervalCommitLog: 60_000,
      flushCommitLogTimed: false,
    })
    stores.push(store)
    for (const r of await store.putMessages(batch(20))) expect(r.status).toBe('PUT_OK')
    const max = store.stats().commitLogMaxOffset
    expect(max).toBeGreaterThan(19 * LOG_FILE)
    // The pass the put woke must reach the end; one file per pass would take 20 minutes.
    await vi.waitFor(() => expect(store.stats().commitLogFlushedOffset).toBe(max), { timeout: 15_000, interval: 20 })
  })
})
