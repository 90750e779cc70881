// The first key of an index file is dated by the file's begin time. A rolled file starts with the
// previous file's end time as its begin, and the first key's difference is taken against that
// before the begin becomes the key's own (RocketMQ's putKey, whose bytes the store keeps): read as
// begin + difference, a key put after a quiet spell would date from that long after its message,
// and a query ending now would not find it.
import * as fs from 'node:fs'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'

// Three keys fill an index file (a file holds maxIndexNum - 1 entries).
const OPTIONS: OpenOptions = { messageIndexEnable: true, maxHashSlotNum: 8, maxIndexNum: 4 }
const HOUR = 3_600_000

let dir: string
const stores: MessageStore[] = []
beforeEach(() => {
  dir = tempDir('mqstore-index-quiet-')
})
afterEach(async () => {
  vi.useRealTimers()
  for (const store of stores.splice(0)) await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

describe('an index file rolled after a quiet spell', () => {
  it('finds its first key with a query that ends now, and dates it by its own message', async () => {
    const start = Date.now() - 3 * HOUR
    vi.useFakeTimers({ toFake: ['Date'], now: start })
    const store = await MessageStore.open(dir, OPTIONS)
    stores.push(store)
    for (let i = 0; i < 3; i++)
      expect((await store.putMessage({ topic: 't', queueId: 0, body: 'early', keys: `early${i}` })).status).toBe('PUT_OK')
    // Two hours later the next key rolls a new file, whose begin is the full file's end until then.
    vi.setSystemTime(start + 2 * HOUR)
    const late = await store.putMessage({ topic: 't', queueId: 0, body: 'late', keys: 'late' })
    expect(late.status).toBe('PUT_OK')
    expect(store.stats().indexFileCount).toBe(2)
    vi.useRealTimers()

    expect(store.queryMessage('t', 'late', 4).messages.map((m) => m.commitLogOffset)).toEqual([late.wroteOffset])
    const stored = late.storeTimestamp
    expect(store.queryMessage('t', 'late', 4, stored - 1000, stored + 1000).messages.length).toBe(1)
    // Not two hours later, where begin + difference would put it.
    expect(store.queryMessage('t', 'late', 4, stored + HOUR, Date.now()).messages.length).toBe(0)
    for (let i = 0; i < 3; i++) expect(store.queryMessage('t', `early${i}`, 4).messages.length).toBe(1)
  })
})
