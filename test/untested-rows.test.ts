// Rows of the status and recovery tables that had no test of their own: WAIT 'false',
// FLUSH_DISK_TIMEOUT, an illegal message failing alone in a batch, the transfer byte limit,
// consume() from 'latest' and from a number, consumer
// offsets across a power cut, the C2 three-file rule, C3's start file, C4, and puts after a
// truncation that went back several files.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { interposeFdatasync } from './helpers/fdatasync.js'
import { PowerLossDisk } from './helpers/power-loss.js'
import { tempDir } from './helpers/tmp.js'

const FILE = 16 * 1024
const OPTIONS: OpenOptions = { mappedFileSizeCommitLog: FILE, mappedFileSizeConsumeQueue: 20 * 100, maxHashSlotNum: 64, maxIndexNum: 256 }

let dir: string
const stores: MessageStore[] = []
const restores: (() => void)[] = []
beforeEach(() => {
  dir = tempDir('mqstore-rows-')
})
afterEach(async () => {
  for (const restore of restores.splice(0)) restore()
  for (const store of stores.splice(0)) await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function open(options: OpenOptions = {}, at = dir): Promise<MessageStore> {
  const store = await MessageStore.open(at, { ...OPTIONS, ...options })
  stores.push(store)
  return store
}

async function close(store: MessageStore): Promise<void> {
  stores.splice(stores.indexOf(store), 1)
  await store.close()
}

/** Resolves at the next turn of the event loop (what waiting for an event polls with). */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe('put statuses', () => {
  it("SYNC_FLUSH: a put with the property WAIT 'false' resolves PUT_OK without waiting for its flush", async () => {
    const store = await open({ flushDiskType: 'SYNC_FLUSH' })
    const waited = await store.putMessage({ topic: 't', queueId: 0, body: 'waits' })
    expect(store.stats().commitLogFlushedOffset).toBeGreaterThanOrEqual(waited.wroteOffset + waited.wroteBytes)
    const r = await store.putMessage({ topic: 't', queueId: 0, body: 'does not wait', properties: { WAIT: 'false' } })
    expect(r.status).toBe('PUT_OK')
    // Nothing flushed it: the commit log's flushed offset is still where the first put left it.
    expect(store.stats().commitLogFlushedOffset).toBeLessThan(r.wroteOffset + r.wroteBytes)
    expect(store.getMessage('g', 't', 0, 1, 1).messages[0].properties.WAIT).toBe('false')
  })

  it('SYNC_FLUSH: a flush that does not finish by syncFlushTimeout answers FLUSH_DISK_TIMEOUT; the message stays stored', async () => {
    const pending: (() => void)[] = []
    let stall = true
    restores.push(
      // A disk that stops answering: the group commit's fdatasync (SYNC_FLUSH stages the commit
      // log, write-stage.ts) completes only when the test lets it.
      interposeFdatasync({
        async: (fd, callback, original) => (stall ? pending.push(() => original(fd, callback)) : original(fd, callback)),
      }),
    )
    const store = await open({ flushDiskType: 'SYNC_FLUSH', syncFlushTimeout: 50 })
    const r = await store.putMessage({ topic: 't', queueId: 0, body: 'slow disk', keys: 'k' })
    expect(r.status).toBe('FLUSH_DISK_TIMEOUT')
    expect(r.wroteOffset).toBeGreaterThanOrEqual(0)
    expect(store.lookMessageByOffset(r.wroteOffset)?.keys).toEqual(['k'])
    stall = false
    for (const release of pending.splice(0)) release()
  })

  it('an illegal message fails alone in putMessages: an oversized body between two good ones', async () => {
    const store = await open()
    const results = await store.putMessages([
      { topic: 't', queueId: 0, body: 'a' },
      { topic: 't', queueId: 0, body: Buffer.alloc(5 * 1024 * 1024) },
      { topic: 't', queueId: 0, body: 'c' },
    ])
    expect(results.map((r) => r.status)).toEqual(['PUT_OK', 'MESSAGE_ILLEGAL', 'PUT_OK'])
    expect(results[2].queueOffset).toBe(1)
    expect(store.getMessage('g', 't', 0, 0, 8).messages.map((m) => Buffer.from(m.body).toString())).toEqual(['a', 'c'])
  })
})

describe('reads', () => {
  it('getMessage stops at the in-memory transfer byte limit', async () => {
    const store = await open({ maxTransferBytesOnMessageInMemory: 2500 })
    const puts = await store.putMessages(Array.from({ length: 6 }, (_, i) => ({ topic: 't', queueId: 0, body: Buffer.alloc(1000, i) })))
    const size = puts[0].wroteBytes
    const got = store.getMessage('g', 't', 0, 0, 32)
    expect(got.messages).toHaveLength(Math.floor(2500 / size))
    expect(got.bufferTotalSize).toBeLessThanOrEqual(2500)
    expect(got.nextBeginOffset).toBe(got.messages.length)
    const rest = store.getMessage('g', 't', 0, got.nextBeginOffset, 32)
    expect(rest.messages[0].queueOffset).toBe(got.nextBeginOffset)
  })
})

describe('consume()', () => {
  it("from 'latest' yields only what arrives after it started; from a number starts there", async () => {
    const store = await open()
    await store.putMessages(Array.from({ length: 5 }, (_, i) => ({ topic: 't', queueId: 0, body: `old-${i}` })))
    const abort = new AbortController()
    const latest = store.consume({ group: 'g', topic: 't', queueId: 0, from: 'latest', signal: abort.signal })
    const fromThree = store.consume({ group: 'g2', topic: 't', queueId: 0, from: 3, signal: abort.signal })
    const seen: string[] = []
    const reading = (async () => {
      for await (const m of latest) {
        seen.push(Buffer.from(m.body).toString())
        if (seen.length === 2) break
      }
    })()
    await turn()
    await store.putMessages([
      { topic: 't', queueId: 0, body: 'new-0' },
      { topic: 't', queueId: 0, body: 'new-1' },
    ])
    await reading
    expect(seen).toEqual(['new-0', 'new-1'])
    expect(latest.position).toBe(7)
    const fromNumber: string[] = []
    for await (const m of fromThree) {
      fromNumber.push(Buffer.from(m.body).toString())
      if (fromNumber.length === 4) break
    }
    expect(fromNumber).toEqual(['old-3', 'old-4', 'new-0', 'new-1'])
    abort.abort()
  })
})

describe.skipIf(process.platform !== 'linux')(
  'consumer offsets (Linux only: the power-loss model resolves descriptors through /proc/self/fd)',
  () => {
    it('committed offsets survive a power cut once the periodic persist has run', async () => {
      const storeDir = join(dir, 'store')
      fs.mkdirSync(storeDir)
      const disk = new PowerLossDisk({ root: storeDir, seed: 3, imageRoot: join(dir, 'images'), mode: 'lose-unsynced' }).arm()
      restores.push(() => disk.disarm())
      const store = await open({ flushConsumerOffsetInterval: 20 }, storeDir)
      await store.putMessages(Array.from({ length: 4 }, () => ({ topic: 't', queueId: 1, body: 'x' })))
      store.commitOffset('g', 't', 1, 3)
      // Wait for the persist (the event), then cut the power.
      const file = join(storeDir, 'config', 'consumerOffset.json')
      while (!(fs.existsSync(file) && fs.readFileSync(file, 'utf8').includes('"1": 3'))) await turn()
      const cut = disk.cutNow()
      disk.disarm()
      const reopened = await open({}, cut.dir)
      expect(reopened.stats().lastExitOK).toBe(false)
      expect(reopened.queryOffset('g', 't', 1)).toBe(3)
    })
  },
)

describe('recovery rows', () => {
  async function fill(count: number, options: OpenOptions = {}) {
    const store = await open(options)
    const results = []
    for (let i = 0; i < count; i += 20) {
      results.push(
        ...(await store.putMessages(
          Array.from({ length: Math.min(20, count - i) }, (_, j) => ({
            topic: 't',
            queueId: 0,
            body: Buffer.alloc(300, i + j),
            keys: `k${i + j}`,
          })),
        )),
      )
    }
    await close(store)
    return results
  }
  const fileOf = (offset: number) => join(dir, 'commitlog', formatOffsetName(offset - (offset % FILE)))
  function flipInBody(r: { wroteOffset: number; wroteBytes: number }): void {
    const path = fileOf(r.wroteOffset)
    const data = fs.readFileSync(path)
    data[(r.wroteOffset % FILE) + r.wroteBytes - 60] ^= 0xff
    fs.writeFileSync(path, data)
  }
  const eraseShutdownRecord = () => {
    const fd = fs.openSync(join(dir, 'checkpoint'), 'r+')
    fs.writeSync(fd, Buffer.alloc(36), 0, 36, 64)
    fs.closeSync(fd)
  }

  it('C2 three-file rule: without a shutdown record, damage in a file older than the last three is not scanned; in the third-last it is', async () => {
    const puts = await fill(300)
    const files = fs.readdirSync(join(dir, 'commitlog')).sort()
    expect(files.length).toBeGreaterThanOrEqual(5)
    const inFirst = puts.find((r) => r.wroteOffset + r.wroteBytes < FILE)!
    const thirdLastStart = Number(files[files.length - 3])
    const inThirdLast = puts.filter((r) => r.wroteOffset >= thirdLastStart && r.wroteOffset + r.wroteBytes < thirdLastStart + FILE).at(-2)!

    flipInBody(inFirst)
    eraseShutdownRecord()
    let store = await open()
    const scanned = store.stats().recovery
    expect(scanned?.damage).toBeNull()
    expect(scanned?.scannedBytes).toBe(store.getMaxPhyOffset() - thirdLastStart)
    expect(store.getMaxPhyOffset()).toBe(puts.at(-1)!.wroteOffset + puts.at(-1)!.wroteBytes)
    await close(store)

    flipInBody(inThirdLast)
    eraseShutdownRecord()
    store = await open()
    expect(store.stats().recovery?.damage).toMatchObject({ kind: 'corrupt', offset: inThirdLast.wroteOffset })
    expect(store.getMaxPhyOffset()).toBe(inThirdLast.wroteOffset)
  })

  it("C3 start file: after a crash the scan starts at the newest file whose first record is older than the checkpoint's safe time", async () => {
    const now = Date.now()
    const puts = await fill(300)
    const files = fs.readdirSync(join(dir, 'commitlog')).sort()
    // Every record was written within a second, so the safe time (min(physic, logics) − 3 s) is
    // older than every file's first record: the scan starts at the first file.
    fs.writeFileSync(join(dir, 'abort'), '')
    let store = await open()
    expect(store.stats().recovery?.scannedBytes).toBe(store.getMaxPhyOffset())
    await close(store)

    // A checkpoint far in the future makes every file's first record older than the safe time:
    // the scan starts at the newest file.
    const fd = fs.openSync(join(dir, 'checkpoint'), 'r+')
    const future = Buffer.alloc(16)
    future.writeBigInt64BE(BigInt(now + 3_600_000), 0)
    future.writeBigInt64BE(BigInt(now + 3_600_000), 8)
    fs.writeSync(fd, future, 0, 16, 0)
    fs.closeSync(fd)
    fs.writeFileSync(join(dir, 'abort'), '')
    store = await open()
    const lastStart = Number(files.at(-1))
    expect(store.stats().recovery?.scannedBytes).toBe(store.getMaxPhyOffset() - lastStart)
    expect(store.getMaxPhyOffset()).toBe(puts.at(-1)!.wroteOffset + puts.at(-1)!.wroteBytes)
  })

  it('C4 keep: zeros after the last record are the end of data, after a crash as after a clean close', async () => {
    const puts = await fill(50)
    fs.writeFileSync(join(dir, 'abort'), '')
    const store = await open({ corruptionPolicy: 'strict' })
    expect(store.stats().recovery).toMatchObject({ damage: null, processOffset: puts.at(-1)!.wroteOffset + puts.at(-1)!.wroteBytes })
    expect(store.stats().repairs).toEqual([])
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(50)
  })

  it('puts after a truncation that went back several files continue at the cut, in new files, and survive a reopen', async () => {
    const puts = await fill(300)
    const files = fs.readdirSync(join(dir, 'commitlog')).sort()
    expect(files.length).toBeGreaterThanOrEqual(5)
    const victim = puts.find((r) => r.wroteOffset > FILE + 100)!
    flipInBody(victim)
    fs.writeFileSync(join(dir, 'abort'), '')
    // A checkpoint of zeros: the crash scan starts at the first file and meets the damage early.
    fs.writeFileSync(join(dir, 'checkpoint'), Buffer.alloc(4096))
    let store = await open({ corruptionPolicy: 'tolerant' })
    expect(store.getMaxPhyOffset()).toBe(victim.wroteOffset)
    expect(fs.readdirSync(join(dir, 'commitlog')).length).toBe(2)
    const kept = puts.indexOf(victim)
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(kept)
    const after = await store.putMessages(
      Array.from({ length: 150 }, (_, i) => ({ topic: 't', queueId: 0, body: Buffer.alloc(200, i), keys: `after-${i}` })),
    )
    expect(after[0].wroteOffset).toBe(victim.wroteOffset)
    expect(after[0].queueOffset).toBe(kept)
    await close(store)
    store = await open({ corruptionPolicy: 'strict' })
    expect(store.stats().repairs).toEqual([])
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(kept + 150)
    for (const [i, r] of after.entries()) {
      expect(store.lookMessageByOffset(r.wroteOffset)?.keys).toEqual([`after-${i}`])
      expect(store.queryMessage('t', `after-${i}`, 4, 0, Date.now() + 1000).messages.map((m) => m.commitLogOffset)).toEqual([r.wroteOffset])
    }
    expect(store.getMessage('g', 't', 0, kept - 1, 2).messages.map((m) => m.queueOffset)).toEqual([kept - 1, kept])
  })
})
