// A compacted queue's max offset is its compaction log's end, and the log keeps no record for some
// of the offsets its queue handed out (keyless records of a topic made compacted with `force`).
// Its files name only the offsets they hold; once commit-log retention took the records behind the
// rest, the consume queue's end is the only thing left that remembers them, and a reopen must not
// report a max offset below it.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { ManualClock, smallStoreOptions } from '../helpers/compaction.js'
import { settleLogFiles } from '../helpers/log-files.js'
import { tempDir } from '../helpers/tmp.js'

let dir: string
let clock: ManualClock
const stores: MessageStore[] = []

beforeEach(() => {
  dir = tempDir('mqstore-queue-end-')
  clock = new ManualClock(Date.now())
})
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

function options(): OpenOptions {
  return smallStoreOptions({ clock })
}

async function open(): Promise<MessageStore> {
  const store = await MessageStore.open(dir, options())
  stores.push(store)
  return store
}

async function close(store: MessageStore): Promise<void> {
  stores.splice(stores.indexOf(store), 1)
  await store.close()
}

it('a compacted queue whose last offsets went to keyless records keeps its max offset after retention and a reopen', async () => {
  let store = await open()
  expect((await store.putMessage({ topic: 'late', queueId: 0, body: 'a1', keys: 'a' })).queueOffset).toBe(0)
  await store.putMessage({ topic: 'late', queueId: 0, body: 'no key' })
  await store.putMessage({ topic: 'late', queueId: 0, body: 'no key either' })
  await store.setTopicConfig('late', { cleanupPolicy: 'compact', segmentBytes: 4096 }, { force: true })
  expect(store.getMaxOffsetInQueue('late', 0)).toBe(3)

  // Retention takes every commit-log file but the last: the three records go with the first.
  for (let i = 0; i < 800; i++) await store.putMessage({ topic: 'filler', queueId: 0, body: 'z'.repeat(300) })
  await settleLogFiles(store)
  const logDir = join(dir, 'commitlog')
  const withRecords = fs
    .readdirSync(logDir)
    .sort()
    .filter((name) => Number(name) < store.getMaxPhyOffset())
  expect(withRecords.length).toBeGreaterThan(2)
  const old = (clock.now() - 100 * 3_600_000) / 1000
  for (const name of withRecords.slice(0, -1)) fs.utimesSync(join(logDir, name), old, old)
  store.executeDeleteFilesManually()
  expect((await store.runCleanupPass()).commitLogFiles).toBe(withRecords.length - 1)
  expect(store.getMaxOffsetInQueue('late', 0)).toBe(3)

  await close(store)
  store = await open()
  expect(store.getMaxOffsetInQueue('late', 0)).toBe(3)
  expect(store.getMessage('g', 'late', 0, 0, 10).messages.map((m) => m.body.toString())).toEqual(['a1'])
  const next = await store.putMessage({ topic: 'late', queueId: 0, body: 'a2', keys: 'a' })
  expect(next.queueOffset).toBe(3)
  expect(store.getMaxOffsetInQueue('late', 0)).toBe(4)
})

it("a read-only opener takes the same end: the consume queue's, where the log's files name a lower one", async () => {
  const writer = await open()
  expect((await writer.putMessage({ topic: 'late', queueId: 0, body: 'a1', keys: 'a' })).queueOffset).toBe(0)
  await writer.putMessage({ topic: 'late', queueId: 0, body: 'no key' })
  await writer.putMessage({ topic: 'late', queueId: 0, body: 'no key either' })
  await writer.setTopicConfig('late', { cleanupPolicy: 'compact', segmentBytes: 4096 }, { force: true })
  expect(writer.getMaxOffsetInQueue('late', 0)).toBe(3)

  const reader = await MessageStore.open(dir, { readOnly: true })
  try {
    expect(reader.getMaxOffsetInQueue('late', 0)).toBe(3)
    const all = reader.getMessage('g', 'late', 0, 0, 10)
    expect(all.messages.map((m) => m.body.toString())).toEqual(['a1'])
    expect(all.maxOffset).toBe(3)
    // Past the last record, in the keyless tail: nothing to read, and a reader cannot tell it from
    // units whose records the writer is still copying into the log, so it asks again from there.
    const tail = reader.getMessage('g', 'late', 0, 1, 10)
    expect(tail.status).toBe('NO_MATCHED_MESSAGE')
    expect(tail.messages).toEqual([])
    expect(tail.nextBeginOffset).toBe(1)
    expect(reader.getMessage('g', 'late', 0, 2, 10).nextBeginOffset).toBe(2)
    expect(reader.getMessage('g', 'late', 0, 3, 10).status).toBe('OFFSET_OVERFLOW_ONE')

    // The next record with a key is read from there.
    expect((await writer.putMessage({ topic: 'late', queueId: 0, body: 'a2', keys: 'a' })).queueOffset).toBe(3)
    expect(reader.getMaxOffsetInQueue('late', 0)).toBe(4)
    const next = reader.getMessage('g', 'late', 0, 1, 10)
    expect(next.messages.map((m) => [m.queueOffset, m.body.toString()])).toEqual([[3, 'a2']])
    expect(next.nextBeginOffset).toBe(4)
  } finally {
    await reader.close()
  }
})

it('a read-only opener does not step over a unit whose record is not in the compaction log yet', async () => {
  const writer = await open()
  await writer.setTopicConfig('kv', { cleanupPolicy: 'compact', segmentBytes: 4096 })
  expect((await writer.putMessage({ topic: 'kv', queueId: 0, body: 'v0', keys: 'a' })).queueOffset).toBe(0)
  // The writer writes a record's unit, then copies the record into the log: a reader between the
  // two sees the unit alone. Taken back to that state by hiding the record (zeros where it lies).
  const logDir = join(dir, 'compaction', 'kv', '0')
  const file = join(logDir, fs.readdirSync(logDir).sort()[0])
  const record = fs.readFileSync(file).subarray(0, 4).readInt32BE(0)
  const saved = fs.readFileSync(file).subarray(0, record)
  fs.writeFileSync(file, Buffer.alloc(record), { flag: 'r+' })

  const reader = await MessageStore.open(dir, { readOnly: true })
  try {
    expect(reader.getMaxOffsetInQueue('kv', 0)).toBe(1)
    const early = reader.getMessage('g', 'kv', 0, 0, 10)
    expect(early.messages).toEqual([])
    expect(early.nextBeginOffset).toBe(0)
    // The record arrives: the same read finds it.
    fs.writeFileSync(file, saved, { flag: 'r+' })
    const late = reader.getMessage('g', 'kv', 0, 0, 10)
    expect(late.messages.map((m) => m.body.toString())).toEqual(['v0'])
    expect(late.nextBeginOffset).toBe(1)
  } finally {
    await reader.close()
  }
})
