// SYNC_FLUSH's write stage: the commit log's records are encoded into a buffer and written into the
// file by the group commit (one positional write, then fdatasync), not through the mapping. What
// a put acknowledges is in the file and readable; what is staged is neither until its commit; a
// stage that fills mid-batch, a record larger than the stage and a roll to the next file keep
// every record whole (CRCs checked on read and by a reopen).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

import { interposeNativeForTesting } from '../../lib/native.js'
import { MessageStore, type OpenOptions, type PutMessageResult } from '../../lib/store/message-store.js'
import { WRITE_STAGE_BYTES } from '../../lib/store/mapped/write-stage.js'
import { interposeFdatasync, sizeOfFd } from '../helpers/fdatasync.js'
import { countParsedRecords } from '../helpers/parsed-records.js'
import { wrapMapHandle } from '../helpers/map-handle.js'
import { isTempSegmentName } from '../../lib/store/mapped/segment-name.js'
import { tempDir } from '../helpers/tmp.js'

const LOG_FILE = 4 << 20
const BASE: OpenOptions = {
  flushDiskType: 'SYNC_FLUSH',
  mappedFileSizeCommitLog: LOG_FILE,
  mappedFileSizeConsumeQueue: 1000 * 20,
  maxHashSlotNum: 1000,
  maxIndexNum: 4000,
  checkCRCOnRead: true,
}

/** The commit-log files' bytes, end to end. */
function logBytes(dir: string): Buffer {
  const logDir = join(dir, 'commitlog')
  return Buffer.concat(
    fs
      .readdirSync(logDir)
      .filter((name) => !isTempSegmentName(name))
      .sort()
      .map((name) => fs.readFileSync(join(logDir, name))),
  )
}

function bodyOf(n: number, length: number): Buffer {
  const body = Buffer.alloc(length, n & 0xff)
  body.writeUInt32BE(n, 0)
  return body
}

describe('the SYNC_FLUSH write stage', () => {
  const cleanups: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })

  async function open(dir: string, options: OpenOptions = {}): Promise<MessageStore> {
    const store = await MessageStore.open(dir, { ...BASE, ...options })
    cleanups.push(() => store.close())
    return store
  }

  it('writes no commit-log byte through the mapping: no msync of it, every acknowledged record in the file', async () => {
    const msyncs: number[] = []
    cleanups.push(
      interposeNativeForTesting((original) => ({
        map: (fd, length, writable, expose) => {
          const handle = original.map(fd, length, writable, expose)
          if (length !== LOG_FILE) return handle
          return wrapMapHandle(handle, {
            sync: (offset, len) => {
              msyncs.push(len)
              handle.sync(offset, len)
            },
            syncAsync: (offset, len) => {
              msyncs.push(len)
              return handle.syncAsync(offset, len)
            },
          })
        },
      })),
    )
    const dir = tempDir('mqstore-stage-')
    const store = await open(dir)
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, n) => store.putMessage({ topic: 't', queueId: n % 4, body: bodyOf(n, 300) })),
    )
    expect(results.map((r) => r.status)).toEqual(results.map(() => 'PUT_OK'))
    expect(msyncs).toEqual([])
    const file = logBytes(dir)
    for (const [n, r] of results.entries()) {
      // The record's body ends the record (no properties): it is in the file, byte for byte.
      const record = file.subarray(r.wroteOffset, r.wroteOffset + r.wroteBytes)
      expect(record.includes(bodyOf(n, 300))).toBe(true)
    }
    const stats = store.stats()
    expect(stats.commitLogFlushedOffset).toBe(stats.commitLogMaxOffset)
    // Each put resolved once dispatched (four new queues, each waiting for its first file).
    for (let q = 0; q < 4; q++) {
      const first = store.getMessage('g', 't', q, 0, 32)
      const rest = store.getMessage('g', 't', q, first.nextBeginOffset, 32)
      expect(first.messages.length + rest.messages.length).toBe(50)
    }
  })

  it("starts each group's write-back as its records are written, before the pool syncs them", async () => {
    const writeBacks: { fd: number; offset: number; length: number }[] = []
    const order: string[] = []
    cleanups.push(
      interposeNativeForTesting((original) => ({
        writeBackNow: (fd, offset, length) => {
          if (sizeOfFd(fd) === LOG_FILE) {
            writeBacks.push({ fd, offset, length })
            order.push('write-back')
          }
          return original.writeBackNow(fd, offset, length)
        },
      })),
    )
    cleanups.push(
      interposeFdatasync({
        async: (fd, callback, original) => {
          if (sizeOfFd(fd) === LOG_FILE) order.push('sync')
          original(fd, callback)
        },
      }),
    )
    const dir = tempDir('mqstore-stage-')
    const store = await open(dir)
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, n) => store.putMessage({ topic: 't', queueId: 0, body: bodyOf(n, 300) })),
    )
    expect(results.map((r) => r.status)).toEqual(results.map(() => 'PUT_OK'))
    // Every acknowledged byte went through a write-back that started right after its write: the
    // ranges are contiguous from the first record to the last.
    const first = Math.min(...results.map((r) => r.wroteOffset))
    const end = Math.max(...results.map((r) => r.wroteOffset + r.wroteBytes))
    expect(writeBacks.length).toBeGreaterThan(0)
    let at = first
    for (const w of writeBacks) {
      expect(w.offset).toBe(at)
      at += w.length
    }
    expect(at).toBe(end)
    // One write-back per group commit at most (a commit with nothing new writes nothing), and the
    // last group's sync comes after its write-back: the puts were acknowledged by it.
    expect(writeBacks.length).toBeLessThanOrEqual(store.stats().groupCommitTimesTotal)
    expect(order.at(-1)).toBe('sync')

    // ASYNC_FLUSH puts (no write stage) never call it.
    writeBacks.length = 0
    const asyncStore = await open(tempDir('mqstore-stage-'), { flushDiskType: 'ASYNC_FLUSH' })
    await asyncStore.putMessages(Array.from({ length: 64 }, (_, n) => ({ topic: 't', queueId: 0, body: bodyOf(n, 300) })))
    expect(writeBacks).toEqual([])
  })

  it('a record staged while a sync runs is neither in the file nor readable until the next group commit writes it', async () => {
    let holding = false
    const held: (() => void)[] = []
    cleanups.push(
      interposeFdatasync({
        async: (fd, callback, original) => {
          if (!holding || sizeOfFd(fd) !== LOG_FILE) return original(fd, callback)
          held.push(() => original(fd, callback))
        },
      }),
    )
    cleanups.push(() => {
      holding = false
      for (const release of held.splice(0)) release()
    })
    const dir = tempDir('mqstore-stage-')
    const store = await open(dir)
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'first' })).status).toBe('PUT_OK')
    holding = true
    let a: PutMessageResult | undefined
    void store.putMessage({ topic: 't', queueId: 0, body: 'a-body' }).then((r) => {
      a = r
    })
    await vi.waitFor(() => expect(held).toHaveLength(1), { timeout: 10_000, interval: 5 })
    // a's group was written before its sync: readable while the sync runs, not acknowledged yet.
    expect(store.getMessage('g', 't', 0, 1, 8).messages.map((m) => m.body.toString())).toEqual(['a-body'])
    expect(a).toBeUndefined()
    let b: PutMessageResult | undefined
    void store.putMessage({ topic: 't', queueId: 0, body: 'b-body' }).then((r) => {
      b = r
    })
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(logBytes(dir).includes(Buffer.from('b-body'))).toBe(false)
    expect(store.getMessage('g', 't', 0, 2, 8).status).not.toBe('FOUND')
    // b's record is staged: counted as not yet in the files.
    const staged = store.stats().commitBehindBytes
    expect(staged).toBeGreaterThan(Buffer.byteLength('b-body'))
    held.shift()?.()
    await vi.waitFor(() => expect(held).toHaveLength(1), { timeout: 10_000, interval: 5 })
    expect(a?.status).toBe('PUT_OK')
    expect(b).toBeUndefined()
    expect(logBytes(dir).includes(Buffer.from('b-body'))).toBe(true)
    expect(store.getMessage('g', 't', 0, 2, 8).messages.map((m) => m.body.toString())).toEqual(['b-body'])
    expect(store.stats().commitBehindBytes).toBe(0)
    holding = false
    held.shift()?.()
    await vi.waitFor(() => expect(b?.status).toBe('PUT_OK'), { timeout: 10_000, interval: 5 })
  })

  it('a batch larger than the stage, and records larger than it, are stored whole across files; a reopen finds every one', async () => {
    const dir = tempDir('mqstore-stage-')
    let store = await open(dir, { mappedFileSizeCommitLog: 2 * WRITE_STAGE_BYTES })
    // 3 stages' worth of small records in one batch (the stage is written out and restarted
    // mid-batch), then two records larger than the stage (through the mapping), then small ones.
    const small = Array.from({ length: 3 * (WRITE_STAGE_BYTES / 1024) }, (_, n) => ({ topic: 't', queueId: 0, body: bodyOf(n, 900) }))
    const large = [0, 1].map((k) => ({ topic: 't', queueId: 0, body: bodyOf(1_000_000 + k, WRITE_STAGE_BYTES + 4096) }))
    const tail = Array.from({ length: 50 }, (_, n) => ({ topic: 't', queueId: 0, body: bodyOf(2_000_000 + n, 700) }))
    const sent = [...small, ...large, ...tail]
    for (const part of [small, large, tail]) {
      const results = await store.putMessages(part)
      expect(results.filter((r) => r.status !== 'PUT_OK')).toEqual([])
    }
    const check = (s: MessageStore): void => {
      let offset = 0
      while (offset < sent.length) {
        const got = s.getMessage('g', 't', 0, offset, 32)
        expect(got.status).toBe('FOUND')
        for (const m of got.messages) expect(m.body.equals(sent[m.queueOffset].body)).toBe(true)
        offset = got.nextBeginOffset
      }
      expect(offset).toBe(sent.length)
    }
    check(store)
    expect(store.stats().commitLogMaxOffset).toBeGreaterThan(2 * WRITE_STAGE_BYTES)
    await store.close()
    cleanups.splice(0)
    store = await open(dir, { mappedFileSizeCommitLog: 2 * WRITE_STAGE_BYTES })
    check(store)
  })

  it("a group is dispatched from its puts' own requests, not parsed back from the log, with their tags and keys", async () => {
    const dir = tempDir('mqstore-stage-')
    const store = await open(dir)
    // The queue's first file is made on the first put (dispatch waits for it, then a pass reads the log).
    expect((await store.putMessage({ topic: 't', queueId: 2, body: 'first', tags: 'a' })).status).toBe('PUT_OK')
    const parsed = countParsedRecords(store)
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, n) =>
        store.putMessage({ topic: 't', queueId: 2, body: bodyOf(n, 64), tags: n % 2 ? 'odd' : 'even', keys: `k${n}` }),
      ),
    )
    expect(results.map((r) => r.status)).toEqual(results.map(() => 'PUT_OK'))
    expect(parsed()).toBe(0)
    // Units and index entries as the records say: the tag filter and key lookups find them.
    let odd = 0
    for (let offset = 1; offset < 101; ) {
      const got = store.getMessage('g', 't', 2, offset, 32, 'odd')
      odd += got.messages.length
      for (const m of got.messages) expect(m.tags).toBe('odd')
      offset = got.nextBeginOffset
    }
    expect(odd).toBe(50)
    expect(store.queryMessage('t', 'k7', 4).messages.map((m) => m.body.equals(bodyOf(7, 64)))).toEqual([true])
  })

  it('puts that do not wait (WAIT=false) are written at once: readable when the put resolves', async () => {
    const dir = tempDir('mqstore-stage-')
    const store = await open(dir)
    const results = await store.putMessages(
      Array.from({ length: 20 }, (_, n) => ({ topic: 't', queueId: 1, body: bodyOf(n, 100), properties: { WAIT: 'false' } })),
    )
    expect(results.map((r) => r.status)).toEqual(results.map(() => 'PUT_OK'))
    expect(store.getMessage('g', 't', 1, 0, 32).messages).toHaveLength(20)
    expect(logBytes(dir).includes(bodyOf(19, 100))).toBe(true)
  })
})
