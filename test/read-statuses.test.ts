// The read statuses and limits that only show in passing: MESSAGE_WAS_REMOVING (a unit whose
// commit-log file is gone while the queue's min offset is not yet corrected), OFFSET_FOUND_NULL
// (the queue's file for an offset within [min, max] is gone), and the on-disk transfer limits.
// The first two are states a cleanup pass goes through: the test reads from inside the logger
// callback that the pass calls synchronously at each deletion, so nothing races.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import type { DiskUsageSource } from '../lib/store/environment.js'
import { MessageStore, type OpenOptions, type PutMessageResult } from '../lib/store/message-store.js'
import type { GetMessageResult } from '../lib/store/types.js'
import { tempDir } from './helpers/tmp.js'

const HOUR = 3_600_000
const FILE = 4096
/** Four units per consume-queue file. */
const CQ_UNITS = 4
const AT_10 = new Date(2026, 0, 15, 10, 30).getTime()
const disk: DiskUsageSource = { usage: () => ({ totalBytes: 1_000_000, availableBytes: 700_000, usedRatio: 0.3 }) }

let dir: string
const stores: MessageStore[] = []
beforeEach(() => {
  dir = tempDir('mqstore-read-statuses-')
})
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function open(options: OpenOptions): Promise<MessageStore> {
  const store = await MessageStore.open(dir, options)
  stores.push(store)
  return store
}

/** What a read answered, without its messages' bodies. */
const answer = (got: GetMessageResult) => ({
  status: got.status,
  nextBeginOffset: got.nextBeginOffset,
  queueOffsets: got.messages.map((m) => m.queueOffset),
})

describe('reads while a cleanup pass deletes files', () => {
  // Reads are made at the exact moment a deletion is logged; the logger swallows what it throws,
  // so the answers are kept and checked afterwards.
  const seen = new Map<string, ReturnType<typeof answer>[]>()
  let store: MessageStore
  let puts: PutMessageResult[]

  beforeEach(async () => {
    seen.clear()
    const readAt = (moment: string, offsets: number[]) => {
      if (seen.has(moment)) return
      seen.set(
        moment,
        offsets.map((offset) => answer(store.getMessage('g', 't', 0, offset, 32))),
      )
    }
    store = await open({
      mappedFileSizeCommitLog: FILE,
      mappedFileSizeConsumeQueue: 20 * CQ_UNITS,
      maxHashSlotNum: 16,
      maxIndexNum: 16,
      cleanResourceInterval: HOUR,
      deleteCommitLogFilesInterval: 0,
      deleteConsumeQueueFilesInterval: 0,
      clock: { now: () => AT_10 },
      diskUsage: disk,
      logger: (_level, message) => {
        // The first commit-log file is gone; the queue's min offset still says 0.
        if (message.includes('deleted commit-log file 00000000000000000000')) readAt('commit log', [0, 2, CQ_UNITS])
        // The queue's first file is gone; its min offset is corrected only after the deletion.
        if (message.includes('deleted consume-queue file t/0/00000000000000000000')) readAt('queue', [0, 3])
      },
    })
    // 800-byte bodies: four records to a 4 KiB commit-log file, so the queue's first file (units
    // 0-3) points into the first commit-log file only.
    puts = []
    for (let n = 0; n < 12; n++) puts.push(await store.putMessage({ topic: 't', queueId: 0, body: Buffer.alloc(800, n) }))
    expect(puts.slice(0, CQ_UNITS).every((r) => r.wroteOffset + r.wroteBytes <= FILE)).toBe(true)
    expect(puts[CQ_UNITS].wroteOffset).toBe(FILE)
    const names = fs.readdirSync(join(dir, 'commitlog')).sort()
    expect(names.length).toBeGreaterThanOrEqual(3)
    // Only the first file is old enough to go.
    const old = (AT_10 - 100 * HOUR) / 1000
    fs.utimesSync(join(dir, 'commitlog', names[0]), old, old)
  })

  it('a unit whose commit-log file is gone answers MESSAGE_WAS_REMOVING; next is past every unit of that file', async () => {
    store.executeDeleteFilesManually()
    const pass = await store.runCleanupPass()
    expect(pass.commitLogFiles).toBe(1)
    const [fromZero, fromTwo, fromNextFile] = seen.get('commit log') ?? []
    // Units 0-3 all point into the deleted file: nothing is served, and the reader is sent past
    // them (RocketMQ skips to the commit log's next file, counting the units it skipped).
    expect(fromZero).toEqual({ status: 'MESSAGE_WAS_REMOVING', nextBeginOffset: CQ_UNITS, queueOffsets: [] })
    expect(fromTwo).toEqual({ status: 'MESSAGE_WAS_REMOVING', nextBeginOffset: CQ_UNITS, queueOffsets: [] })
    // Where it sends the reader, the messages are there.
    expect(fromNextFile.status).toBe('FOUND')
    expect(fromNextFile.queueOffsets[0]).toBe(CQ_UNITS)
    // Once the pass has corrected the queue, the same read is OFFSET_TOO_SMALL.
    expect(answer(store.getMessage('g', 't', 0, 0, 32))).toEqual({
      status: 'OFFSET_TOO_SMALL',
      nextBeginOffset: CQ_UNITS,
      queueOffsets: [],
    })
  })

  it('an offset within [min, max] whose consume-queue file is gone answers OFFSET_FOUND_NULL; next is the first offset of the next file', async () => {
    store.executeDeleteFilesManually()
    const pass = await store.runCleanupPass()
    expect(pass.consumeQueueFiles).toBe(1)
    const [fromZero, fromThree] = seen.get('queue') ?? []
    expect(fromZero).toEqual({ status: 'OFFSET_FOUND_NULL', nextBeginOffset: CQ_UNITS, queueOffsets: [] })
    expect(fromThree).toEqual({ status: 'OFFSET_FOUND_NULL', nextBeginOffset: CQ_UNITS, queueOffsets: [] })
    expect(store.getMinOffsetInQueue('t', 0)).toBe(CQ_UNITS)
    expect(answer(store.getMessage('g', 't', 0, CQ_UNITS, 1))).toEqual({
      status: 'FOUND',
      nextBeginOffset: CQ_UNITS + 1,
      queueOffsets: [CQ_UNITS],
    })
  })
})

describe('transfer limits: in memory and on disk', () => {
  const LIMITS: OpenOptions = {
    mappedFileSizeCommitLog: 64 * 1024,
    maxHashSlotNum: 16,
    maxIndexNum: 64,
    maxTransferCountOnMessageInMemory: 5,
    maxTransferBytesOnMessageInMemory: 256 * 1024,
    maxTransferCountOnMessageInDisk: 3,
    maxTransferBytesOnMessageInDisk: 2500,
  }

  async function fill(options: OpenOptions, bodySize: number): Promise<MessageStore> {
    const store = await open({ ...LIMITS, ...options })
    await store.putMessages(Array.from({ length: 10 }, (_, i) => ({ topic: 't', queueId: 0, body: Buffer.alloc(bodySize, i) })))
    return store
  }

  it('messages near the end of the log are read with the in-memory limits', async () => {
    // The default ratio (40 % of physical memory) puts this whole log in memory.
    const store = await fill({}, 100)
    const got = store.getMessage('g', 't', 0, 0, 32)
    expect(got.messages).toHaveLength(5)
    expect(got.nextBeginOffset).toBe(5)
    expect(got.suggestPullingFromSlave).toBe(false)
  })

  it('accessMessageInMemoryMaxRatio 0 makes every read a disk read: the on-disk count limit applies', async () => {
    const store = await fill({ accessMessageInMemoryMaxRatio: 0 }, 100)
    const got = store.getMessage('g', 't', 0, 0, 32)
    expect(got.messages.map((m) => m.queueOffset)).toEqual([0, 1, 2])
    expect(got.nextBeginOffset).toBe(3)
    expect(got.suggestPullingFromSlave).toBe(true)
    // maxMsgNums below the limit still wins.
    expect(store.getMessage('g', 't', 0, 3, 2).messages).toHaveLength(2)
  })

  it('accessMessageInMemoryMaxRatio 0: the on-disk byte limit applies, not the in-memory one', async () => {
    const store = await fill({ accessMessageInMemoryMaxRatio: 0 }, 1000)
    const got = store.getMessage('g', 't', 0, 0, 32)
    const size = got.messages[0].storeSize
    expect(got.messages).toHaveLength(Math.floor(2500 / size))
    expect(got.bufferTotalSize).toBeLessThanOrEqual(2500)
    expect(got.nextBeginOffset).toBe(got.messages.length)
    // A first message larger than the limit is still served, alone (RocketMQ).
    stores.splice(stores.indexOf(store), 1)
    await store.close()
    const small = await open({ ...LIMITS, accessMessageInMemoryMaxRatio: 0, maxTransferBytesOnMessageInDisk: 10 })
    expect(small.getMessage('g', 't', 0, 0, 32).messages.map((m) => m.queueOffset)).toEqual([0])
  })
})
