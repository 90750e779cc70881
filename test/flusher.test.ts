// The commit-log flusher with small files: one flush covers one file (RocketMQ's rule), so a
// burst that filled several files must be flushed file after file in the same pass. Before, a
// SYNC_FLUSH batch over more than four files answered FLUSH_DISK_TIMEOUT for every message, and
// the periodic flush moved one file per interval, leaving the rest unsynced for seconds.
// The group commit's rules, with syncs held by the test: a put is acknowledged only by a sync
// that covered its record, a failed sync fails every waiting put and stops syncing, and close
// waits for the sync in flight.
import { afterEach, describe, expect, it, vi } from 'vitest'

import { MessageStore, type OpenOptions, type PutMessageResult } from '../lib/store/message-store.js'
import { interposeFdatasync, sizeOfFd } from './helpers/fdatasync.js'
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

/** A sync of the commit log that completes (or fails) only when the test says so. */
interface HeldSync {
  release(): void
  fail(error: Error): void
}

/**
 * Holds every fdatasync of a commit-log file (the only files of LOG_FILE bytes) once `hold` is
 * set: SYNC_FLUSH stages the commit log and syncs it with fdatasync (write-stage.ts). The first
 * flush of a new file is its creation fsync, so tests start holding after a first put.
 */
function holdCommitLogSyncs(): { held: HeldSync[]; calls: () => number; hold: (on: boolean) => void; restore: () => void } {
  const held: HeldSync[] = []
  let holding = false
  let calls = 0
  const restore = interposeFdatasync({
    async: (fd, callback, original) => {
      if (!holding || sizeOfFd(fd) !== LOG_FILE) return original(fd, callback)
      calls++
      held.push({ release: () => original(fd, callback), fail: (error) => callback(error) })
    },
  })
  return { held, calls: () => calls, hold: (on) => void (holding = on), restore }
}

/** A put's result once it settles, or undefined while it waits. */
function track(put: Promise<PutMessageResult>): { result: PutMessageResult | undefined } {
  const out: { result: PutMessageResult | undefined } = { result: undefined }
  void put.then((r) => {
    out.result = r
  })
  return out
}

/** A few turns of the event loop: enough for anything not waiting on a held sync to settle. */
async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve))
}

/** vi.waitFor with room for a loaded machine. */
const until = (check: () => void) => vi.waitFor(check, { timeout: 10_000, interval: 5 })

const eio = () => Object.assign(new Error('EIO: input/output error, fdatasync'), { code: 'EIO', errno: -5, syscall: 'fdatasync' })

describe('the SYNC_FLUSH group commit', () => {
  const stores: MessageStore[] = []
  let syncs: ReturnType<typeof holdCommitLogSyncs>
  afterEach(async () => {
    syncs.hold(false)
    for (const s of syncs.held.splice(0)) s.release()
    for (const store of stores.splice(0)) await store.close()
    syncs.restore()
  })

  async function open(options: OpenOptions = {}): Promise<MessageStore> {
    syncs = holdCommitLogSyncs()
    const store = await MessageStore.open(tempDir('mqstore-group-commit-'), { ...BASE, flushDiskType: 'SYNC_FLUSH', ...options })
    stores.push(store)
    // The file's first flush is its creation fsync; from the next one on, flushes are fdatasyncs.
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'first' })).status).toBe('PUT_OK')
    syncs.hold(true)
    return store
  }

  it('acknowledges a put only once a sync covering its record completed, and flushedWhere moves only then', async () => {
    const store = await open()
    const flushedBefore = store.stats().commitLogFlushedOffset
    const a = track(store.putMessage({ topic: 't', queueId: 0, body: 'a' }))
    await until(() => expect(syncs.held).toHaveLength(1))
    await turns()
    expect(a.result).toBeUndefined()
    expect(store.stats().commitLogFlushedOffset).toBe(flushedBefore)
    syncs.held.splice(0)[0].release()
    await until(() => expect(a.result?.status).toBe('PUT_OK'))
    const end = (a.result?.wroteOffset ?? 0) + (a.result?.wroteBytes ?? 0)
    expect(store.stats().commitLogFlushedOffset).toBeGreaterThanOrEqual(end)
  })

  it('a put appended while a sync runs waits for a later sync: the running one did not cover it', async () => {
    const store = await open()
    const a = track(store.putMessage({ topic: 't', queueId: 0, body: 'a' }))
    await until(() => expect(syncs.held).toHaveLength(1))
    const b = track(store.putMessage({ topic: 't', queueId: 0, body: 'b' }))
    await turns()
    syncs.held.shift()?.release()
    await until(() => expect(a.result?.status).toBe('PUT_OK'))
    const aEnd = (a.result?.wroteOffset ?? 0) + (a.result?.wroteBytes ?? 0)
    // The first sync covered a's record, not b's (staged after it started): b waits for the next one.
    await until(() => expect(syncs.held).toHaveLength(1))
    await turns()
    expect(b.result).toBeUndefined()
    expect(store.stats().commitLogFlushedOffset).toBe(aEnd)
    syncs.held.shift()?.release()
    await until(() => expect(b.result?.status).toBe('PUT_OK'))
    expect(store.stats().commitLogFlushedOffset).toBe((b.result?.wroteOffset ?? 0) + (b.result?.wroteBytes ?? 0))
  })

  it('a sync that fails while later puts wait: every waiting put gets FLUSH_DISK_TIMEOUT, no sync is tried again', async () => {
    const store = await open({ syncFlushTimeout: 60_000 })
    const flushedBefore = store.stats().commitLogFlushedOffset
    const a = track(store.putMessage({ topic: 't', queueId: 0, body: 'a' }))
    await until(() => expect(syncs.held).toHaveLength(1))
    const b = track(store.putMessage({ topic: 't', queueId: 0, body: 'b' }))
    const c = track(store.putMessage({ topic: 't', queueId: 0, body: 'c', properties: { WAIT: 'false' } }))
    await turns()
    syncs.held.shift()?.fail(eio())
    await until(() => {
      expect(a.result?.status).toBe('FLUSH_DISK_TIMEOUT')
      expect(b.result?.status).toBe('FLUSH_DISK_TIMEOUT')
    })
    expect(c.result?.status).toBe('PUT_OK')
    const callsAfterFailure = syncs.calls()
    // The idle flush (every 10 ms) and a new put would sync again if the flusher retried.
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'd' })).status).toBe('SERVICE_NOT_AVAILABLE')
    await new Promise((resolve) => setTimeout(resolve, 60))
    expect(syncs.calls()).toBe(callsAfterFailure)
    expect(syncs.held).toHaveLength(0)
    expect(store.stats().commitLogFlushedOffset).toBe(flushedBefore)
    expect(store.stats().runningFlags.flags.map((f) => f.name)).toEqual(['NOT_WRITEABLE'])
  })

  it('close waits for the sync in flight, then acknowledges the put it covered', async () => {
    const store = await open()
    const a = track(store.putMessage({ topic: 't', queueId: 0, body: 'a' }))
    await until(() => expect(syncs.held).toHaveLength(1))
    let closed = false
    const closing = store.close().then(() => {
      closed = true
    })
    stores.splice(stores.indexOf(store), 1)
    await turns(10)
    expect(closed).toBe(false)
    expect(a.result).toBeUndefined()
    syncs.held.shift()?.release()
    // Close's own final flush may sync again: let it.
    syncs.hold(false)
    await closing
    expect(a.result?.status).toBe('PUT_OK')
  })
})
