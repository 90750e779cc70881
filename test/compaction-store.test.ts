// Compacted topics through the store's API: real store directories, real files.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import fc from 'fast-check'

import { MQStoreError } from '../lib/errors.js'
import { OFFSET_PHYSICALOFFSET } from '../lib/store/commitlog/record.js'
import { MessageStore, type MessageExt, type OpenOptions } from '../lib/store/message-store.js'
import { ManualClock, smallStoreOptions } from './helpers/compaction.js'
import { fieldsAndBodyOf, fieldsOf } from './helpers/message-fields.js'
import { settleLogFiles } from './helpers/log-files.js'
import { tempDir } from './helpers/tmp.js'

const TOPIC = 'profiles'
let dir: string
let clock: ManualClock
const open: MessageStore[] = []

function logFilesWithRecords(logDir: string, store: MessageStore): string[] {
  return fs
    .readdirSync(logDir)
    .sort()
    .filter((name) => Number(name) < store.getMaxPhyOffset())
}

function options(extra: OpenOptions = {}): OpenOptions {
  return smallStoreOptions({
    clock,
    topics: { [TOPIC]: { cleanupPolicy: 'compact', segmentBytes: 4096, minCleanableDirtyRatio: 0 } },
    ...extra,
  })
}

beforeEach(() => {
  dir = tempDir()
  clock = new ManualClock(Date.now())
})
afterEach(async () => {
  for (const store of open.splice(0)) await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function openStore(extra: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, options(extra))
  open.push(store)
  return store
}

async function reopen(store: MessageStore, extra: OpenOptions = {}): Promise<MessageStore> {
  await store.close()
  open.splice(open.indexOf(store), 1)
  return openStore(extra)
}

/** Puts `rounds` values of `keys` keys; returns key → [offset, value] of the last one. */
async function putRounds(store: MessageStore, keys: number, rounds: number, queueId = 0): Promise<Map<string, [number, string]>> {
  const latest = new Map<string, [number, string]>()
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < keys; k++) {
      const value = `v${r}-${'x'.repeat(60)}`
      const res = await store.putMessage({ topic: TOPIC, queueId, body: value, keys: `user-${k}`, tags: k % 2 === 0 ? 'even' : 'odd' })
      expect(res.status).toBe('PUT_OK')
      latest.set(`user-${k}`, [res.queueOffset, value])
    }
  }
  return latest
}

function readQueue(store: MessageStore, from = 0, queueId = 0): MessageExt[] {
  const out: MessageExt[] = []
  let offset = from
  for (;;) {
    const r = store.getMessage('g', TOPIC, queueId, offset, 32)
    if (r.status !== 'FOUND') break
    out.push(...r.messages)
    offset = r.nextBeginOffset
  }
  return out
}

describe('compacted topics in the store', () => {
  it('answers MESSAGE_ILLEGAL to a put without a key, and takes keyed puts', async () => {
    const store = await openStore()
    expect((await store.putMessage({ topic: TOPIC, queueId: 0, body: 'x' })).status).toBe('MESSAGE_ILLEGAL')
    expect((await store.putMessage({ topic: TOPIC, queueId: 0, body: 'x', keys: ['   '] })).status).toBe('MESSAGE_ILLEGAL')
    expect((await store.putMessage({ topic: TOPIC, queueId: 0, body: 'x', keys: ['a', 'b'] })).status).toBe('PUT_OK')
    expect((await store.putMessage({ topic: 'plain', queueId: 0, body: 'x' })).status).toBe('PUT_OK')
  })

  it('serves the latest value per key at its original offset after compact(), and min/max/time from the compacted files', async () => {
    const store = await openStore()
    const latest = await putRounds(store, 8, 20)
    const report = await store.compact()
    expect(report.queues).toHaveLength(1)
    expect(report.recordsDropped).toBeGreaterThan(0)
    expect(report.bytesWritten).toBeLessThan(report.bytesRead)
    const seen = readQueue(store)
    for (const [key, [offset, value]] of latest) {
      const m = seen.find((x) => x.queueOffset === offset)
      expect(m?.keys, key).toEqual([key])
      expect(m!.body.toString()).toBe(value)
    }
    // Offsets only grow; the msgId of a survivor is the one its put returned (commit-log offset).
    const offsets = seen.map((m) => m.queueOffset)
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b))
    expect(store.getMinOffsetInQueue(TOPIC, 0)).toBe(seen[0].queueOffset)
    expect(store.getMinOffsetInQueue(TOPIC, 0)).toBeGreaterThan(0)
    expect(store.getMaxOffsetInQueue(TOPIC, 0)).toBe(160)
    // A removed offset reads as the next survivor.
    const r = store.getMessage('g', TOPIC, 0, 0, 1)
    expect(r.status).toBe('FOUND')
    expect(r.messages[0].queueOffset).toBe(seen[0].queueOffset)
    expect(r.nextBeginOffset).toBe(seen[0].queueOffset + 1)
    expect(store.getMessage('g', TOPIC, 0, 160, 1).status).toBe('OFFSET_OVERFLOW_ONE')
    expect(store.getOffsetInQueueByTime(TOPIC, 0, 0)).toBe(seen[0].queueOffset)
    expect(store.getMessageStoreTimeStamp(TOPIC, 0, seen[0].queueOffset)).toBe(seen[0].storeTimestamp)
    // The tag filter works on compacted reads too.
    const odd = store.getMessage('g', TOPIC, 0, 0, 100, { tags: ['odd'] })
    expect(odd.messages.every((m) => m.tags === 'odd')).toBe(true)
    const s = store.stats().compaction
    expect(s.passes).toBe(1)
    expect(s.recopyPercent).toBeGreaterThan(0)
    expect(s.maxBufferUtilizationPercent).toBeGreaterThan(0)
    expect(s.uncleanableQueueCount).toBe(0)
  })

  it('keeps the compacted state across close and reopen, and keeps taking puts at the next offset', async () => {
    let store = await openStore()
    await putRounds(store, 5, 20)
    await store.compact()
    const before = readQueue(store).map((m) => [m.queueOffset, m.body.toString()])
    store = await reopen(store)
    expect(readQueue(store).map((m) => [m.queueOffset, m.body.toString()])).toEqual(before)
    const r = await store.putMessage({ topic: TOPIC, queueId: 0, body: 'after', keys: 'user-1' })
    expect(r.queueOffset).toBe(100)
    expect(readQueue(store).at(-1)!.body.toString()).toBe('after')
  })

  it("does not serve a compaction-log copy whose commit-log header is damaged (a position out of the log's range, or another record's)", async () => {
    let store = await openStore()
    const offsets: number[] = []
    for (let k = 0; k < 6; k++) {
      const res = await store.putMessage({ topic: TOPIC, queueId: 0, body: `value-${k}`, keys: `user-${k}` })
      expect(res.status).toBe('PUT_OK')
      offsets.push(res.wroteOffset)
    }
    expect(readQueue(store).map((m) => m.commitLogOffset)).toEqual(offsets)
    await store.close()
    open.splice(open.indexOf(store), 1)
    // The copies are byte for byte: the first two records of the first segment, at 0 and after it.
    const logDir = join(dir, 'compaction', TOPIC, '0')
    const file = join(logDir, fs.readdirSync(logDir).sort()[0])
    const bytes = fs.readFileSync(file)
    const second = bytes.readInt32BE(0)
    bytes[OFFSET_PHYSICALOFFSET] ^= 0x40 // record 0: a position far past the log's end
    bytes.writeBigInt64BE(BigInt(offsets[3]), second + OFFSET_PHYSICALOFFSET) // record 1: record 3's position
    fs.writeFileSync(file, bytes)
    store = await openStore()
    const served = readQueue(store)
    expect(served.map((m) => m.queueOffset)).toEqual([2, 3, 4, 5])
    expect(served.map((m) => m.commitLogOffset)).toEqual(offsets.slice(2))
  })

  it('persists topic settings in config/topics.json, refuses bad ones, and changes them at run time', async () => {
    let store = await openStore()
    expect(store.getTopicConfig(TOPIC).cleanupPolicy).toBe('compact')
    await expect(store.setTopicConfig('orders', { cleanupPolicy: 'nope' as never })).rejects.toThrow(MQStoreError)
    await expect(store.setTopicConfig('orders', { bogus: 1 } as never)).rejects.toMatchObject({ code: 'INVALID_OPTION' })
    const c = await store.setTopicConfig('orders', { cleanupPolicy: 'compact,delete', retentionMs: 1000 })
    expect(c.cleanupPolicy).toBe('compact,delete')
    const file = JSON.parse(fs.readFileSync(join(dir, 'config', 'topics.json'), 'utf8'))
    expect(file.topicConfigTable.orders).toMatchObject({ topicName: 'orders', perm: 6, cleanupPolicy: 'compact,delete', retentionMs: 1000 })
    store = await reopen(store, { topics: undefined })
    expect(store.getTopicConfig('orders')).toMatchObject({ cleanupPolicy: 'compact,delete', retentionMs: 1000 })
    expect(store.getTopicConfig(TOPIC)).toMatchObject({ cleanupPolicy: 'compact', segmentBytes: 4096 })
    await expect(MessageStore.open(join(dir, 'other'), options({ topics: { x: { segmentBytes: 1 } } }))).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    })
  })

  it('refuses to compact a topic holding keyless messages unless forced, then copies its keyed messages in', async () => {
    const store = await openStore()
    await store.putMessage({ topic: 'late', queueId: 0, body: 'a1', keys: 'a' })
    await store.putMessage({ topic: 'late', queueId: 0, body: 'no key' })
    await store.putMessage({ topic: 'late', queueId: 0, body: 'a2', keys: 'a' })
    await expect(store.setTopicConfig('late', { cleanupPolicy: 'compact' })).rejects.toThrow(/without a key/)
    await store.setTopicConfig('late', { cleanupPolicy: 'compact', segmentBytes: 4096 }, { force: true })
    const r = store.getMessage('g', 'late', 0, 0, 10)
    expect(r.messages.map((m) => m.body.toString())).toEqual(['a1', 'a2'])
    expect(store.getMaxOffsetInQueue('late', 0)).toBe(3)
    // Removing compact again deletes the compaction logs; reads come from the consume queue.
    await store.setTopicConfig('late', { cleanupPolicy: 'delete' })
    expect(fs.existsSync(join(dir, 'compaction', 'late'))).toBe(false)
    expect(store.getMessage('g', 'late', 0, 0, 10).messages).toHaveLength(3)
  })

  it('removing compact from a topic aborts its running pass and deletes its compaction logs', async () => {
    const store = await openStore({ compaction: { enabled: false, fileDeleteDelayMs: 0, ioMaxBytesPerSecond: 50_000, sliceMs: 0.01 } })
    await putRounds(store, 8, 20)
    const qdir = join(dir, 'compaction', TOPIC, '0')
    const pass = store.compact()
    while (!fs.readdirSync(qdir).some((n) => n.endsWith('.cleaned'))) await new Promise((r) => setImmediate(r))
    await store.setTopicConfig(TOPIC, { cleanupPolicy: 'delete' })
    const report = await pass
    expect(report.queues).toEqual([])
    expect(fs.existsSync(join(dir, 'compaction', TOPIC))).toBe(false)
    // Every message is there again, from the consume queue.
    expect(readQueue(store)).toHaveLength(160)
  })

  it('shows a tombstone (keyed, empty body) until its delete horizon, then neither it nor its key', async () => {
    const store = await openStore({
      topics: { [TOPIC]: { cleanupPolicy: 'compact', segmentBytes: 4096, minCleanableDirtyRatio: 0, deleteRetentionMs: 60_000 } },
    })
    await putRounds(store, 6, 10)
    const tomb = await store.putMessage({ topic: TOPIC, queueId: 0, body: '', keys: 'user-2' })
    await putRounds(store, 6, 10)
    // user-2 was written again after the tombstone; delete it for good this time.
    const last = await store.putMessage({ topic: TOPIC, queueId: 0, body: '', keys: 'user-3' })
    await putRounds(store, 1, 40)
    await store.compact()
    let seen = readQueue(store)
    expect(seen.some((m) => m.queueOffset === tomb.queueOffset)).toBe(false) // superseded by later values
    const kept = seen.find((m) => m.queueOffset === last.queueOffset)!
    expect(kept.body.length).toBe(0)
    expect(Number(kept.properties.DELETE_HORIZON)).toBe(clock.now() + 60_000)
    expect(seen.some((m) => m.keys[0] === 'user-3' && m.queueOffset < last.queueOffset)).toBe(false)
    clock.advance(60_000)
    await store.compact()
    seen = readQueue(store)
    expect(seen.some((m) => m.keys[0] === 'user-3')).toBe(false)
    expect(seen.some((m) => m.keys[0] === 'user-2' && m.body.length > 0)).toBe(true)
  })

  it('a consumer that keeps up sees every message while passes run', async () => {
    const store = await openStore()
    const abort = new AbortController()
    const seen: number[] = []
    const total = 300
    const consumer = (async () => {
      for await (const m of store.consume({ group: 'g', topic: TOPIC, queueId: 0, from: 0, signal: abort.signal })) {
        seen.push(m.queueOffset)
        if (seen.length === total) abort.abort()
      }
    })()
    for (let i = 0; i < total; i++) {
      await store.putMessage({ topic: TOPIC, queueId: 0, body: `v${i}-${'y'.repeat(50)}`, keys: `k${i % 7}` })
      // Let the consumer read what was put before a pass may remove it.
      await new Promise((resolve) => setImmediate(resolve))
      if (i % 50 === 49) await store.compact()
    }
    await consumer
    expect(seen).toEqual(Array.from({ length: total }, (_, i) => i))
  })

  it('keeps the latest values of a compacted topic when the commit-log files that held them are gone', async () => {
    let store = await openStore()
    const latest = await putRounds(store, 6, 20)
    for (let i = 0; i < 1000; i++) await store.putMessage({ topic: 'filler', queueId: 0, body: 'z'.repeat(300) })
    await store.compact()
    store = await reopen(store)
    await store.close()
    open.splice(open.indexOf(store), 1)
    // Commit-log retention deletes the oldest files: do the same on disk.
    const logDir = join(dir, 'commitlog')
    const files = fs.readdirSync(logDir).sort()
    expect(files.length).toBeGreaterThan(3)
    for (const f of files.slice(0, 2)) fs.rmSync(join(logDir, f))
    store = await openStore()
    expect(store.getMinPhyOffset()).toBeGreaterThan(0)
    const seen = readQueue(store)
    for (const [key, [offset, value]] of latest) {
      const m = seen.find((x) => x.queueOffset === offset)
      expect(m?.body.toString(), key).toBe(value)
    }
  })

  it("cuts a compaction log back when a crash took the commit log's tail, so the offsets can be reused", async () => {
    let store = await openStore()
    const results = []
    for (let i = 0; i < 60; i++) results.push(await store.putMessage({ topic: TOPIC, queueId: 0, body: `old-${i}`, keys: `k${i % 5}` }))
    await store.close()
    open.splice(open.indexOf(store), 1)
    // A crash that lost the last ten records: zeros from the 51st record on, and no clean shutdown.
    const logFile = join(dir, 'commitlog', fs.readdirSync(join(dir, 'commitlog')).sort()[0])
    const from = results[50].wroteOffset
    const end = results[59].wroteOffset + results[59].wroteBytes
    const fd = fs.openSync(logFile, 'r+')
    fs.writeSync(fd, Buffer.alloc(end - from), 0, end - from, from)
    fs.closeSync(fd)
    fs.writeFileSync(join(dir, 'abort'), '')
    store = await openStore()
    expect(store.getMaxOffsetInQueue(TOPIC, 0)).toBe(50)
    expect(readQueue(store).every((m) => m.queueOffset < 50)).toBe(true)
    const r = await store.putMessage({ topic: TOPIC, queueId: 0, body: 'new-50', keys: 'k0' })
    expect(r.queueOffset).toBe(50)
    expect(readQueue(store).at(-1)).toMatchObject({ queueOffset: 50 })
    expect(readQueue(store).at(-1)!.body.toString()).toBe('new-50')
  })

  it('commit-log retention deletes the files that held a compacted topic without losing its latest values', async () => {
    let store = await openStore()
    const latest = await putRounds(store, 6, 20)
    for (let i = 0; i < 1000; i++) await store.putMessage({ topic: 'filler', queueId: 0, body: 'z'.repeat(300) })
    await store.compact()
    await settleLogFiles(store)
    const logDir = join(dir, 'commitlog')
    // The files that hold records (not the next one, made ahead and empty).
    const names = logFilesWithRecords(logDir, store)
    expect(names.length).toBeGreaterThan(3)
    const old = (clock.now() - 100 * 3_600_000) / 1000
    for (const name of names.slice(0, -1)) fs.utimesSync(join(logDir, name), old, old)
    store.executeDeleteFilesManually()
    const pass = await store.runCleanupPass()
    expect(pass.commitLogFiles).toBe(names.length - 1)
    expect(store.getMinPhyOffset()).toBeGreaterThan(0)
    const check = (s: MessageStore): void => {
      const seen = readQueue(s)
      for (const [key, [offset, value]] of latest) expect(seen.find((x) => x.queueOffset === offset)?.body.toString(), key).toBe(value)
      expect(s.getMinOffsetInQueue(TOPIC, 0)).toBe(seen[0].queueOffset)
    }
    check(store)
    store = await reopen(store)
    check(store)
  })

  it('a consume queue rebuilt after damage, once retention removed its records from the commit log, does not cut the compaction log nor hand its offsets out again', async () => {
    let store = await openStore()
    const latest = await putRounds(store, 6, 20)
    for (let i = 0; i < 1000; i++) await store.putMessage({ topic: 'filler', queueId: 0, body: 'z'.repeat(300) })
    await store.compact()
    await settleLogFiles(store)
    const logDir = join(dir, 'commitlog')
    // The files that hold records (not the next one, made ahead and empty).
    const names = logFilesWithRecords(logDir, store)
    const old = (clock.now() - 100 * 3_600_000) / 1000
    for (const name of names.slice(0, -1)) fs.utimesSync(join(logDir, name), old, old)
    store.executeDeleteFilesManually()
    expect((await store.runCleanupPass()).commitLogFiles).toBe(names.length - 1)
    await store.close()
    open.splice(open.indexOf(store), 1)
    // A unit in the middle of the queue zeroed: the queue is damaged, rebuilt from a log that no
    // longer holds any of its records.
    const queueDir = join(dir, 'consumequeue', TOPIC, '0')
    const file = join(queueDir, fs.readdirSync(queueDir).sort()[0])
    const bytes = fs.readFileSync(file)
    bytes.fill(0, 20 * 3, 20 * 4)
    fs.writeFileSync(file, bytes)
    store = await openStore()
    expect(store.stats().repairs.map((r) => r.action)).toContain(`deleted consume queue ${TOPIC}/0 to rebuild it`)
    const seen = readQueue(store)
    for (const [key, [offset, value]] of latest) expect(seen.find((x) => x.queueOffset === offset)?.body.toString(), key).toBe(value)
    const r = await store.putMessage({ topic: TOPIC, queueId: 0, body: 'after', keys: 'user-1' })
    expect(r.queueOffset).toBe(120)
    expect(readQueue(store).at(-1)).toMatchObject({ queueOffset: 120 })
  })

  it("serves every field of a compacted copy as the commit log holds it, across the log's segments and with a tag filter", async () => {
    const store = await openStore()
    for (let i = 0; i < 60; i++) {
      const res = await store.putMessage({
        topic: TOPIC,
        queueId: 0,
        body: Buffer.alloc(100 + i, i),
        keys: `user-${i % 20}`,
        tags: i % 3 === 0 ? 'three' : 'other',
        properties: { n: String(i), city: 'Zürich' },
      })
      expect(res.status).toBe('PUT_OK')
    }
    await store.compact()
    const served = readQueue(store)
    // Older values compacted away (the active segment's stay), the latest of each of the 20 keys
    // last, read from segments of 4 KiB.
    expect(served.length).toBeLessThan(40)
    expect(served.map((m) => m.queueOffset).slice(-20)).toEqual(Array.from({ length: 20 }, (_, k) => 40 + k))
    expect(fs.readdirSync(join(dir, 'compaction', TOPIC, '0')).filter((name) => /^\d{20}$/.test(name)).length).toBeGreaterThan(1)
    expect(served.map(fieldsAndBodyOf)).toEqual(served.map((m) => fieldsAndBodyOf(store.lookMessageByOffset(m.commitLogOffset)!)))
    const three = store.getMessage('g', TOPIC, 0, 0, 32, 'three').messages
    expect(three.map((m) => m.queueOffset)).toEqual(served.filter((m) => m.tags === 'three').map((m) => m.queueOffset))
    // A consumer writing over the whole buffer behind a body changes none of the other fields.
    const before = served.map(fieldsOf)
    new Uint8Array(served[0].body.buffer).fill(0)
    expect(served.map(fieldsOf)).toEqual(before)
  })

  it("checks each copy's position against its consume-queue unit across the queue's files, and skips one that names another record's", async () => {
    const store = await openStore()
    // 450 offsets over three consume-queue files of 200 units; reads of 32 cross their ends.
    const results = await store.putMessages(
      Array.from({ length: 450 }, (_, i) => ({ topic: TOPIC, queueId: 0, body: `value-${i}`, keys: `user-${i}` })),
    )
    for (const result of results) expect(result.status).toBe('PUT_OK')
    expect(fs.readdirSync(join(dir, 'consumequeue', TOPIC, '0')).length).toBe(3)
    expect(readQueue(store).map((m) => m.commitLogOffset)).toEqual(results.map((r) => r.wroteOffset))
    await store.close()
    open.splice(open.indexOf(store), 1)
    // The copy of offset 250 (in the second consume-queue file) made to name offset 251's record.
    const logDir = join(dir, 'compaction', TOPIC, '0')
    const body = Buffer.from('value-250')
    const file = fs.readdirSync(logDir).find((name) => fs.readFileSync(join(logDir, name)).includes(body))!
    const bytes = fs.readFileSync(join(logDir, file))
    const bodyAt = bytes.indexOf(body)
    let recordAt = 0
    while (recordAt + bytes.readInt32BE(recordAt) <= bodyAt) recordAt += bytes.readInt32BE(recordAt)
    bytes.writeBigInt64BE(BigInt(results[251].wroteOffset), recordAt + OFFSET_PHYSICALOFFSET)
    fs.writeFileSync(join(logDir, file), bytes)
    const again = await openStore()
    const served = readQueue(again).map((m) => m.queueOffset)
    expect(served).toEqual(Array.from({ length: 450 }, (_, i) => i).filter((i) => i !== 250))
  })

  it('serves copies from compacted queues and skips a record whose body fails its CRC', async () => {
    let store = await openStore()
    for (let i = 0; i < 5; i++) await store.putMessage({ topic: TOPIC, queueId: 0, body: `body-${i}-${'q'.repeat(40)}`, keys: `k${i}` })
    const first = store.getMessage('g', TOPIC, 0, 0, 1).messages[0]
    first.body[0] ^= 0xff // a consumer writing into its message changes only its copy
    expect(store.getMessage('g', TOPIC, 0, 0, 1).messages[0].body.toString()).toBe(`body-0-${'q'.repeat(40)}`)
    await store.close()
    open.splice(open.indexOf(store), 1)
    // Flip a byte inside the third record's body in the compaction log.
    const file = join(dir, 'compaction', TOPIC, '0', '00000000000000000000')
    const bytes = fs.readFileSync(file)
    const at = bytes.indexOf(Buffer.from('body-2-'))
    expect(at).toBeGreaterThan(0)
    const fd = fs.openSync(file, 'r+')
    fs.writeSync(fd, Buffer.from('X'), 0, 1, at)
    fs.closeSync(fd)
    store = await openStore()
    const r = store.getMessage('g', TOPIC, 0, 0, 10)
    expect(r.messages.map((m) => m.queueOffset)).toEqual([0, 1, 3, 4])
    expect(r.bodyCrcFailures).toBe(1)
  })

  it('runs automatic passes on its own when a queue is dirty enough', async () => {
    const store = await openStore({ compaction: { enabled: true, backoffMs: 10, fileDeleteDelayMs: 0 } })
    await putRounds(store, 4, 30)
    for (let i = 0; i < 500 && store.stats().compaction.passes === 0; i++) await new Promise((r) => setTimeout(r, 10))
    expect(store.stats().compaction.passes).toBeGreaterThan(0)
    expect(store.stats().compaction.timeSinceLastRunMs).toBeGreaterThanOrEqual(0)
  })
})

describe('mqstore compact', () => {
  it('runs a pass over a closed store and reports it as JSON or text', async () => {
    const { spawnSync } = await import('node:child_process')
    const { fileURLToPath } = await import('node:url')
    const cli = fileURLToPath(new URL('../dist/lib/cli/main.js', import.meta.url))
    const store = await openStore()
    await putRounds(store, 5, 20)
    await store.close()
    open.splice(open.indexOf(store), 1)
    const index = ['--max-hash-slot-num', '64', '--max-index-num', '256']
    const other = spawnSync(process.execPath, [cli, 'compact', dir, '--topic', 'nothing-here', '--json', ...index], { encoding: 'utf8' })
    expect(other.status, other.stderr).toBe(0)
    expect(JSON.parse(other.stdout).queues).toEqual([])
    const run = spawnSync(process.execPath, [cli, 'compact', dir, '--json', ...index], { encoding: 'utf8' })
    expect(run.status, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout)
    expect(report.queues).toHaveLength(1)
    expect(report.queues[0]).toMatchObject({ topic: TOPIC, queueId: 0 })
    expect(report.recordsDropped).toBeGreaterThan(0)
    const text = spawnSync(process.execPath, [cli, 'compact', dir, ...index], { encoding: 'utf8' })
    expect(text.status, text.stderr).toBe(0)
    expect(text.stdout).toMatch(/^queues cleaned: \d+/)
    const bad = spawnSync(process.execPath, [cli, 'compact'], { encoding: 'utf8' })
    expect(bad.status).toBe(2)
    expect(bad.stderr).toMatch(/missing <dir>/)
    // The CLI left the index as it was (sizes given), so the store opens without repairs.
    const after = await openStore()
    expect(after.stats().repairs).toEqual([])
    expect(after.stats().compaction.passes).toBe(0)
  })
})

describe('compacted topic against a model', () => {
  it('reading the queue from its start folds to the model (key → last value) over random puts, tombstones, passes, commit-log retention and reopens', async () => {
    type Op =
      | { kind: 'put'; key: number; size: number }
      | { kind: 'delete'; key: number }
      | { kind: 'filler' }
      | { kind: 'compact' }
      | { kind: 'advance' }
      | { kind: 'reopen'; dropOldest: boolean }
    const op: fc.Arbitrary<Op> = fc.oneof(
      { weight: 10, arbitrary: fc.record({ kind: fc.constant('put' as const), key: fc.nat(9), size: fc.nat(300) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: fc.nat(9) }) },
      { weight: 2, arbitrary: fc.constant({ kind: 'filler' as const }) },
      { weight: 2, arbitrary: fc.constant({ kind: 'compact' as const }) },
      { weight: 1, arbitrary: fc.constant({ kind: 'advance' as const }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('reopen' as const), dropOldest: fc.boolean() }) },
    )
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 80 }), async (ops) => {
        for (const s of open.splice(0)) await s.close()
        fs.rmSync(dir, { recursive: true, force: true })
        const extra: OpenOptions = {
          topics: { [TOPIC]: { cleanupPolicy: 'compact', segmentBytes: 4096, minCleanableDirtyRatio: 0, deleteRetentionMs: 5_000 } },
        }
        let store = await openStore(extra)
        const model = new Map<string, string>()
        let step = 0
        const check = (): void => {
          const folded = new Map<string, string>()
          let last = -1
          for (const m of readQueue(store)) {
            expect(m.queueOffset).toBeGreaterThan(last)
            last = m.queueOffset
            if (m.body.length === 0) folded.delete(m.keys.join(' '))
            else folded.set(m.keys.join(' '), m.body.toString())
          }
          expect(folded).toEqual(model)
        }
        for (const o of ops) {
          step++
          if (o.kind === 'put' || o.kind === 'delete') {
            const key = `key-${o.key}`
            const body = o.kind === 'put' ? `s${step}-${'b'.repeat(o.size)}` : ''
            expect((await store.putMessage({ topic: TOPIC, queueId: 0, keys: key, body })).status).toBe('PUT_OK')
            if (body === '') model.delete(key)
            else model.set(key, body)
          } else if (o.kind === 'filler') {
            for (let i = 0; i < 40; i++) await store.putMessage({ topic: 'filler', queueId: 0, body: 'f'.repeat(1000) })
          } else if (o.kind === 'compact') {
            await store.compact()
            check()
          } else if (o.kind === 'advance') {
            clock.advance(3_000)
          } else {
            await store.close()
            open.splice(open.indexOf(store), 1)
            if (o.dropOldest) {
              // Commit-log retention: the oldest file goes (never the last one).
              const logDir = join(dir, 'commitlog')
              const files = fs.existsSync(logDir) ? fs.readdirSync(logDir).sort() : []
              if (files.length > 2) fs.rmSync(join(logDir, files[0]))
            }
            store = await openStore(extra)
            check()
          }
        }
        check()
      }),
      { numRuns: 15 },
    )
  }, 300_000)
})
