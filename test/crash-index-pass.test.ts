// After a crash, the recovery scan gives the records it walks to the index in the same pass only
// when the index already holds every record before the scan's first one (the index only grows in
// commit-log order and skips what lies below its end). Otherwise the index catches up from its
// own end after the scan. Both ways every key must be found after the crash open; open's replay
// says which way was taken.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { CQ_STORE_UNIT_SIZE } from '../lib/store/queue/consume-queue.js'
import { tempDir } from './helpers/tmp.js'

const OPTIONS: OpenOptions = {
  mappedFileSizeCommitLog: 64 * 1024,
  mappedFileSizeConsumeQueue: 100 * CQ_STORE_UNIT_SIZE,
  maxHashSlotNum: 1000,
  maxIndexNum: 8000,
  flushDiskType: 'ASYNC_FLUSH',
}
const COUNT = 600

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

/** Writes COUNT keyed messages of 600 B (about six 64 KiB files) and closes cleanly. */
async function writeKeyed(): Promise<string> {
  const dir = tempDir('mqstore-crashindex-')
  dirs.push(dir)
  const store = await MessageStore.open(dir, OPTIONS)
  try {
    for (let n = 0; n < COUNT; n += 50) {
      const batch = Array.from({ length: 50 }, (_, k) => ({
        topic: 't',
        queueId: (n + k) % 2,
        body: Buffer.alloc(600, n + k),
        keys: [`k${n + k}`],
      }))
      for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
    }
  } finally {
    await store.close()
  }
  return dir
}

/** Opens after a simulated crash (the abort file is back); returns the store and open's replay. */
async function openAfterCrash(dir: string): Promise<{ store: MessageStore; replayed: number; from: number }> {
  fs.writeFileSync(join(dir, 'abort'), '')
  let replayed = -1
  let from = -1
  const store = await MessageStore.open(dir, {
    ...OPTIONS,
    logger: (_level, message) => {
      const m = /open dispatched (\d+) records from commit-log offset (\d+)/.exec(message)
      if (m !== null) {
        replayed = Number(m[1])
        from = Number(m[2])
      }
    },
  })
  return { store, replayed, from }
}

function expectEveryKey(store: MessageStore): void {
  for (let n = 0; n < COUNT; n++) {
    const found = store.queryMessage('t', `k${n}`, 4).messages
    expect(found.map((m) => m.body[0])).toEqual([n & 0xff])
  }
}

describe('the index after a crash', () => {
  it('catches up from its own end when the scan starts past it, and finds every key', async () => {
    const dir = await writeKeyed()
    // The checkpoint's commit-log and queue times (its first two longs) say everything was
    // flushed, so the scan starts in the last file; its index time (the third) says nothing was,
    // so the index (one file, newer than that) is deleted and starts again from the first record.
    const checkpoint = fs.readFileSync(join(dir, 'checkpoint'))
    checkpoint.writeBigInt64BE(BigInt(Date.now() + 3_600_000), 0)
    checkpoint.writeBigInt64BE(BigInt(Date.now() + 3_600_000), 8)
    checkpoint.writeBigInt64BE(0n, 16)
    fs.writeFileSync(join(dir, 'checkpoint'), checkpoint)
    const { store, replayed, from } = await openAfterCrash(dir)
    try {
      const { recovery, commitLogMaxOffset } = store.stats()
      expect(recovery?.scannedBytes).toBeGreaterThan(0)
      expect(recovery?.scannedBytes).toBeLessThan(commitLogMaxOffset)
      expect(from).toBe(0)
      expect(replayed).toBe(COUNT)
      expectEveryKey(store)
    } finally {
      await store.close()
    }
  })

  it('is built in the scan pass when the scan starts where the index ends, and finds every key', async () => {
    const dir = await writeKeyed()
    // No checkpoint: the scan starts at the first file (K1); no index file: the index starts there too.
    fs.rmSync(join(dir, 'checkpoint'))
    for (const name of fs.readdirSync(join(dir, 'index'))) fs.rmSync(join(dir, 'index', name))
    const { store, replayed } = await openAfterCrash(dir)
    try {
      const { recovery, commitLogMaxOffset } = store.stats()
      expect(recovery?.scannedBytes).toBe(commitLogMaxOffset)
      // Only the index's last record is read again (a no-op), not the log.
      expect(replayed).toBeLessThanOrEqual(1)
      expectEveryKey(store)
    } finally {
      await store.close()
    }
  })
})
