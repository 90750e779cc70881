// A new queue's folders and first file are made off the JS thread: the put that creates a queue
// appends and returns to the event loop, dispatch waits for the file, and the put resolves once its
// record is dispatched (so the next read sees it). When that fails, the put path makes the file
// itself and reports why it cannot, as before.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'

const OPTIONS: OpenOptions = { mappedFileSizeCommitLog: 1024 * 1024, mappedFileSizeConsumeQueue: 20 * 1000, flushDiskType: 'ASYNC_FLUSH' }
const text = (body: Uint8Array) => Buffer.from(body).toString()

describe("a new queue's first file", () => {
  it('is made after the put returns to the event loop; the awaited put is readable at once, and the queue survives a reopen', async () => {
    const dir = tempDir('mqstore-first-file-')
    let store = await MessageStore.open(dir, OPTIONS)
    try {
      const queueDir = join(dir, 'consumequeue', 'fresh', '3')
      const put = store.putMessage({ topic: 'fresh', queueId: 3, body: 'first' })
      // The put's synchronous part appended the record; the queue's folder does not exist yet (the
      // topic's may: its mkdir runs on the pool meanwhile, and the queue's follows it).
      expect(fs.existsSync(queueDir)).toBe(false)
      const result = await put
      expect(result.status).toBe('PUT_OK')
      expect(fs.existsSync(join(queueDir, '00000000000000000000'))).toBe(true)
      expect(store.getMessage('g', 'fresh', 3, 0, 8).messages.map((m) => text(m.body))).toEqual(['first'])
      expect((await store.putMessage({ topic: 'fresh', queueId: 3, body: 'second' })).queueOffset).toBe(1)
    } finally {
      await store.close()
    }
    store = await MessageStore.open(dir, OPTIONS)
    try {
      expect(store.getMessage('g', 'fresh', 3, 0, 8).messages.map((m) => text(m.body))).toEqual(['first', 'second'])
    } finally {
      await store.close()
    }
  })

  it('a batch over 200 new queues makes them side by side; every message reads back in order, and existing queues keep their place', async () => {
    const dir = tempDir('mqstore-first-file-')
    const store = await MessageStore.open(dir, OPTIONS)
    try {
      expect((await store.putMessage({ topic: 'old', queueId: 0, body: 'o0' })).status).toBe('PUT_OK')
      const batch = Array.from({ length: 400 }, (_, i) => ({ topic: `t${i % 20}`, queueId: Math.floor(i / 20) % 10, body: `m${i}` }))
      batch.splice(100, 0, { topic: 'old', queueId: 0, body: 'o1' })
      const results = await store.putMessages(batch)
      expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
      // Read at once, without waiting: every record was dispatched before the put resolved.
      for (let t = 0; t < 20; t++) {
        for (let q = 0; q < 10; q++) {
          const want = [0, 1].map((k) => `m${k * 200 + q * 20 + t}`)
          expect(store.getMessage('g', `t${t}`, q, 0, 8).messages.map((m) => text(m.body))).toEqual(want)
        }
      }
      expect(store.getMessage('g', 'old', 0, 0, 8).messages.map((m) => text(m.body))).toEqual(['o0', 'o1'])
      expect(store.stats().dispatchStuck).toBe(false)
    } finally {
      await store.close()
    }
  })

  it('close while a new queue is being made waits for it: the record is dispatched and a clean reopen serves it', async () => {
    const dir = tempDir('mqstore-first-file-')
    let store = await MessageStore.open(dir, OPTIONS)
    const put = store.putMessages([
      { topic: 'late', queueId: 0, body: 'a' },
      { topic: 'late', queueId: 1, body: 'b' },
    ])
    await store.close()
    expect((await put).map((r) => r.status)).toEqual(['PUT_OK', 'PUT_OK'])
    store = await MessageStore.open(dir, OPTIONS)
    try {
      expect(store.stats().lastExitOK).toBe(true)
      expect(store.getMessage('g', 'late', 0, 0, 8).messages.map((m) => text(m.body))).toEqual(['a'])
      expect(store.getMessage('g', 'late', 1, 0, 8).messages.map((m) => text(m.body))).toEqual(['b'])
    } finally {
      await store.close()
    }
  })

  it('when the file cannot be made (its name is taken by a folder), dispatch stops with the reason and puts are refused, as when the put path makes it', async () => {
    const dir = tempDir('mqstore-first-file-')
    const store = await MessageStore.open(dir, OPTIONS)
    try {
      fs.mkdirSync(join(dir, 'consumequeue', 'blocked', '0', '00000000000000000000'), { recursive: true })
      expect((await store.putMessage({ topic: 'blocked', queueId: 0, body: 'x' })).status).toBe('PUT_OK')
      expect(store.stats().dispatchStuck).toBe(true)
      const refused = await store.putMessage({ topic: 'other', queueId: 0, body: 'y' })
      expect(refused.status).toBe('SERVICE_NOT_AVAILABLE')
      expect(refused.reason).toMatch(/consume queue blocked\/0/)
    } finally {
      await store.close()
    }
  })
})
