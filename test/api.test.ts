// The API as a Node developer meets it: durable offsets, errors that explain, keys and lookups.
import * as fs from 'node:fs'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { distEntry, runNodeScript, tempDir } from './helpers/tmp.js'

const SMALL: OpenOptions = {
  mappedFileSizeCommitLog: 256 * 1024,
  mappedFileSizeConsumeQueue: 20 * 1000,
  maxHashSlotNum: 64,
  maxIndexNum: 256,
}

let dir: string
const open: MessageStore[] = []
beforeEach(() => {
  dir = tempDir('mqstore-api-')
})
afterEach(async () => {
  for (const store of open.splice(0)) await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function openStore(options: OpenOptions = SMALL): Promise<MessageStore> {
  const store = await MessageStore.open(dir, options)
  open.push(store)
  return store
}

describe('durable offset commits', () => {
  it('after a SIGKILL, durable commits are there and in-memory ones are not (child process)', () => {
    const result = runNodeScript(
      `
      import { MessageStore } from ${JSON.stringify(distEntry)}
      const store = await MessageStore.open(process.argv[2], { flushConsumerOffsetInterval: 3600000 })
      await store.putMessages(Array.from({ length: 500 }, (_, i) => ({ topic: 'orders', body: 'm' + i })))
      await store.commitOffset('sure', 'orders', 0, 500, { durable: true })
      const sub = store.consume({ group: 'reader', topic: 'orders', queueId: 0, from: 'earliest' })
      let seen = 0
      for await (const m of sub) if (++seen === 120) break
      await sub.commit()
      // Made after the last durable save: only the periodic save (never, here) would keep it.
      store.commitOffset('lazy', 'orders', 0, 500)
      process.kill(process.pid, 'SIGKILL')
      `,
      [dir],
    )
    expect(result.signal).toBe('SIGKILL')
    return (async () => {
      const store = await openStore({})
      expect(store.queryOffset('lazy', 'orders', 0)).toBe(-1)
      expect(store.queryOffset('sure', 'orders', 0)).toBe(500)
      expect(store.queryOffset('reader', 'orders', 0)).toBe(120)
    })()
  })

  it('durable commits made together share one write and each resolves once it is saved', async () => {
    const store = await openStore()
    await store.putMessage({ topic: 't', body: 'x' })
    const commits = Array.from({ length: 8 }, (_, q) => store.commitOffset('g', 't', q, q + 1, { durable: true }))
    await Promise.all(commits)
    const saved = JSON.parse(fs.readFileSync(`${dir}/config/consumerOffset.json`, 'utf8'))
    expect(saved.offsetTable['t@g']).toEqual({ 0: 1, 1: 2, 2: 3, 3: 4, 4: 5, 5: 6, 6: 7, 7: 8 })
    // Without options a commit is synchronous and returns nothing; durable: false resolves at once.
    expect(store.commitOffset('g', 't', 0, 9)).toBeUndefined()
    await expect(store.commitOffset('g', 't', 0, 10, { durable: false })).resolves.toBeUndefined()
    expect(() => store.commitOffset('g', 't', 0, 1, { durable: 'yes' as unknown as boolean })).toThrow(TypeError)
  })
})
