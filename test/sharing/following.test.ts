// A reader following a writer (in the same process here; test/sharing/processes.test.ts runs them
// apart) while the writer rolls files, runs retention, compacts, and is reopened.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MessageStore, type MessageStoreReader, type OpenOptions } from '../../lib/store/message-store.js'
import { isTempSegmentName } from '../../lib/store/mapped/segment-name.js'
import { tempDir } from '../helpers/tmp.js'
import { waitFor } from '../helpers/wait.js'

const FILE = 4096
const opened: { close(): Promise<void>; isClosed: boolean }[] = []
afterEach(async () => {
  for (const store of opened.splice(0).reverse()) if (!store.isClosed) await store.close()
})

function options(over: OpenOptions = {}): OpenOptions {
  return {
    mappedFileSizeCommitLog: FILE,
    mappedFileSizeConsumeQueue: 20 * 8,
    maxHashSlotNum: 16,
    maxIndexNum: 64,
    cleanResourceInterval: 3_600_000,
    deleteCommitLogFilesInterval: 0,
    deleteConsumeQueueFilesInterval: 0,
    ...over,
  }
}

async function writer(dir: string, over: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, options(over))
  opened.push(store)
  return store
}

async function reader(dir: string): Promise<MessageStoreReader> {
  const store = await MessageStore.open(dir, { readOnly: true, followIntervalMs: 2 })
  opened.push(store)
  return store
}

async function produce(store: MessageStore, topic: string, from: number, count: number, key = (n: number) => `k${n}`): Promise<void> {
  for (let n = from; n < from + count; n++) {
    const body = Buffer.alloc(900, n & 0xff)
    body.writeUInt32BE(n, 0)
    const r = await store.putMessage({ topic, queueId: 0, body, keys: [key(n)] })
    expect(r.status).toBe('PUT_OK')
  }
}

/** Every message of a queue from `from` on, through getMessage, as body numbers. */
function drain(store: MessageStore | MessageStoreReader, topic: string, from: number): number[] {
  const ns: number[] = []
  const max = store.getMaxOffsetInQueue(topic, 0)
  for (let offset = from; offset < max; ) {
    const got = store.getMessage('g', topic, 0, offset, 32)
    for (const m of got.messages) ns.push(m.body.readUInt32BE(0))
    if (got.nextBeginOffset === offset) break
    offset = got.nextBeginOffset
  }
  return ns
}

function ageCommitLog(dir: string, keep: number): void {
  const names = fs
    .readdirSync(join(dir, 'commitlog'))
    .filter((name) => !isTempSegmentName(name))
    .sort()
  const old = (Date.now() - 100 * 3_600_000) / 1000
  for (const name of names.slice(0, names.length - keep)) fs.utimesSync(join(dir, 'commitlog', name), old, old)
}

describe('a reader follows the writer', () => {
  it('across rolled files and retention: reads below the new minimum answer OFFSET_TOO_SMALL, as in the writer', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    const r = await reader(dir)
    await produce(w, 't', 0, 40)
    expect(drain(r, 't', 0)).toEqual(Array.from({ length: 40 }, (_, n) => n))
    ageCommitLog(dir, 3)
    w.executeDeleteFilesManually()
    const pass = await w.runCleanupPass()
    expect(pass.commitLogFiles).toBeGreaterThan(0)
    expect(r.getMinPhyOffset()).toBe(w.getMinPhyOffset())
    const min = w.getMinOffsetInQueue('t', 0)
    expect(min).toBeGreaterThan(0)
    expect(r.getMinOffsetInQueue('t', 0)).toBe(min)
    const below = r.getMessage('g', 't', 0, 0, 8)
    expect(below).toMatchObject({ status: 'OFFSET_TOO_SMALL', nextBeginOffset: min, minOffset: min })
    expect(drain(r, 't', min)).toEqual(drain(w, 't', min))
    expect(r.queryMessage('t', 'k0', 4).messages).toEqual([])
    expect(r.getLatestByKey('t', 'k39')?.body.readUInt32BE(0)).toBe(39)
    // More puts roll new files after the deletion; the reader keeps up.
    await produce(w, 't', 40, 20)
    expect(drain(r, 't', min)).toEqual(drain(w, 't', min))
  })

  it('through a consume() that waits, woken within a few ticks of each put', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    const r = await reader(dir)
    const seen: number[] = []
    const stop = new AbortController()
    const consuming = (async () => {
      for await (const m of r.consume({ group: 'g', topic: 't', from: 'earliest', signal: stop.signal })) {
        seen.push(m.body.readUInt32BE(0))
        if (seen.length === 30) stop.abort()
      }
    })()
    for (let n = 0; n < 30; n++) {
      await produce(w, 't', n, 1)
      // The reader sees each message before the next put (no batching by the test).
      while (seen.length <= n) await new Promise((resolve) => setTimeout(resolve, 1))
    }
    await consuming
    expect(seen).toEqual(Array.from({ length: 30 }, (_, n) => n))
    expect(r.stats().waitingQueues).toBe(0)
  })

  it('across a writer closed and reopened: nothing served is contradicted, offsets continue', async () => {
    const dir = tempDir()
    let w = await writer(dir)
    const r = await reader(dir)
    await produce(w, 't', 0, 10)
    const before = drain(r, 't', 0)
    await w.close()
    expect(r.stats().writerRunning === true).toBe(false)
    expect(drain(r, 't', 0)).toEqual(before)
    w = await writer(dir)
    await produce(w, 't', 10, 10)
    expect(drain(r, 't', 0)).toEqual(Array.from({ length: 20 }, (_, n) => n))
  })

  it('a consumer ahead of a queue that the writer rebuilds waits at its offset instead of moving back', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    await produce(w, 't', 0, 6)
    await w.close()
    const r = await reader(dir)
    const seen: number[] = []
    const stop = new AbortController()
    const consuming = (async () => {
      for await (const m of r.consume({ group: 'g', topic: 't', queueId: 0, from: 4, signal: stop.signal })) {
        seen.push(m.queueOffset)
        if (seen.length === 3) stop.abort()
      }
    })()
    await waitFor(() => r.stats().waitingQueues === 1, 'the reader to wait on one queue')
    // What a reader sees while a writer's recovery rebuilds a queue: fewer units than before.
    const queueDir = join(dir, 'consumequeue', 't', '0')
    const saved = new Map(fs.readdirSync(queueDir).map((name) => [name, fs.readFileSync(join(queueDir, name))]))
    fs.rmSync(queueDir, { recursive: true })
    fs.mkdirSync(queueDir)
    const [first] = [...saved.keys()].sort()
    fs.writeFileSync(
      join(queueDir, first),
      Buffer.concat([saved.get(first)!.subarray(0, 2 * 20), Buffer.alloc(saved.get(first)!.length - 40)]),
    )
    await new Promise((resolve) => setTimeout(resolve, 150))
    expect(seen).toEqual([4, 5])
    expect(r.getMaxOffsetInQueue('t', 0)).toBe(2)
    const again = await writer(dir)
    await produce(again, 't', 6, 1)
    await consuming
    expect(seen).toEqual([4, 5, 6])
  })

  it('serves a compacted topic from its compaction logs, as the writer, also after the cleaner swapped them', async () => {
    const dir = tempDir()
    const w = await writer(dir, {
      topics: { kv: { cleanupPolicy: 'compact', segmentBytes: 4096, minCleanableDirtyRatio: 0 } },
      compaction: { enabled: false, fileDeleteDelayMs: 0 },
    })
    const r = await reader(dir)
    await produce(w, 'kv', 0, 30, (n) => `key-${n % 5}`)
    const get = (s: MessageStore | MessageStoreReader, offset = 0) => s.getMessage('g', 'kv', 0, offset, 64)
    expect(get(r).messages.map((m) => m.queueOffset)).toEqual(get(w).messages.map((m) => m.queueOffset))
    const inodes = () =>
      fs.readdirSync(join(dir, 'compaction', 'kv', '0')).map((n) => fs.statSync(join(dir, 'compaction', 'kv', '0', n)).ino)
    const beforeSwap = inodes()
    await w.compact('kv')
    expect(inodes()).not.toEqual(beforeSwap)
    const fromWriter = get(w)
    const fromReader = get(r)
    expect(fromReader.status).toBe('FOUND')
    expect(fromReader.messages.map((m) => m.queueOffset)).toEqual(fromWriter.messages.map((m) => m.queueOffset))
    expect(fromReader.nextBeginOffset).toBe(fromWriter.nextBeginOffset)
    expect(r.getMinOffsetInQueue('kv', 0)).toBe(w.getMinOffsetInQueue('kv', 0))
    expect(r.getMaxOffsetInQueue('kv', 0)).toBe(w.getMaxOffsetInQueue('kv', 0))
    const some = fromWriter.messages[1]
    expect(r.getMessageStoreTimeStamp('kv', 0, some.queueOffset)).toBe(w.getMessageStoreTimeStamp('kv', 0, some.queueOffset))
    expect(r.getOffsetInQueueByTime('kv', 0, some.storeTimestamp)).toBe(w.getOffsetInQueueByTime('kv', 0, some.storeTimestamp))
    expect(r.getEarliestMessageTime('kv', 0)).toBe(w.getEarliestMessageTime('kv', 0))
    expect(get(r, 30).status).toBe('OFFSET_OVERFLOW_ONE')
    expect(get(r, 31)).toMatchObject({ status: 'OFFSET_OVERFLOW_BADLY', nextBeginOffset: 30 })
    expect(r.getMessage('g', 'kv', 0, 0, 64, ['nope']).status).toBe('NO_MATCHED_MESSAGE')

    // A consumer of the compacted queue is woken by appends to its compaction log.
    const seen: number[] = []
    const stop = new AbortController()
    const consuming = (async () => {
      for await (const m of r.consume({ group: 'g', topic: 'kv', queueId: 0, from: 'latest', signal: stop.signal })) {
        seen.push(m.queueOffset)
        if (seen.length === 3) stop.abort()
      }
    })()
    await new Promise((resolve) => setTimeout(resolve, 10))
    await produce(w, 'kv', 30, 3, (n) => `key-${n}`)
    await consuming
    expect(seen).toEqual([30, 31, 32])
  })
})
