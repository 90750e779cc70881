// Read-only openers in the writer's own process: every read the writer serves, writing calls
// refused, offsets from the writer's file kept apart from it, nothing in the store changed, and
// consume() woken by the follower when the writer appends.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MQStoreError } from '../../lib/errors.js'
import { MessageStore, MessageStoreReader } from '../../lib/store/message-store.js'
import { fieldsAndBodyOf } from '../helpers/message-fields.js'
import { repoRoot, tempDir } from '../helpers/tmp.js'
import { snapshotStore } from './store-snapshot.js'

const SMALL = { mappedFileSizeCommitLog: 64 * 1024, mappedFileSizeConsumeQueue: 20 * 64, flushIntervalCommitLog: 50 }

const opened: { close(): Promise<void> }[] = []
afterEach(async () => {
  for (const store of opened.splice(0).reverse()) await store.close()
})

async function writer(dir: string, options = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, { ...SMALL, ...options })
  opened.push(store)
  return store
}

async function reader(dir: string, options: { offsetStorePath?: string; followIntervalMs?: number } = {}): Promise<MessageStoreReader> {
  const store = await MessageStore.open(dir, { readOnly: true, ...options })
  opened.push(store)
  return store
}

function body(i: number): Buffer {
  return Buffer.from(`message ${i} `.padEnd(200, 'x'))
}

async function putMany(store: MessageStore, topic: string, queueId: number, from: number, count: number, tags = 'a'): Promise<void> {
  const results = await store.putMessages(
    Array.from({ length: count }, (_, k) => ({ topic, queueId, body: body(from + k), tags, keys: [`key-${from + k}`] })),
  )
  for (const r of results) expect(r.status).toBe('PUT_OK')
}

describe('a read-only opener beside a writer in the same process', () => {
  it('serves getMessage, lookups by key, offset and time, and stats, as the writer does', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    await putMany(w, 'orders', 0, 0, 300)
    await putMany(w, 'orders', 1, 300, 5, 'b')
    const r = await reader(dir)
    expect(r).toBeInstanceOf(MessageStoreReader)
    expect(r.readOnly).toBe(true)

    const got = r.getMessage('g', 'orders', 0, 10, 5)
    const expected = w.getMessage('g', 'orders', 0, 10, 5)
    expect(got.status).toBe('FOUND')
    expect(got.messages.map((m) => m.queueOffset)).toEqual(expected.messages.map((m) => m.queueOffset))
    expect(got.messages.map((m) => m.body.toString())).toEqual(expected.messages.map((m) => m.body.toString()))
    expect(got.nextBeginOffset).toBe(expected.nextBeginOffset)
    expect(got.minOffset).toBe(0)
    expect(got.maxOffset).toBe(300)
    expect(got.messages[0].msgId).toBe(expected.messages[0].msgId)

    expect(r.getMessage('g', 'orders', 0, 300, 5).status).toBe('OFFSET_OVERFLOW_ONE')
    expect(r.getMessage('g', 'orders', 0, 301, 5)).toMatchObject({ status: 'OFFSET_OVERFLOW_BADLY', nextBeginOffset: 300 })
    expect(r.getMessage('g', 'nothing', 0, 0, 5)).toMatchObject({ status: 'NO_MESSAGE_IN_QUEUE', nextBeginOffset: 0 })
    expect(r.getMessage('g', 'orders', 1, 0, 32, ['a']).status).toBe('NO_MATCHED_MESSAGE')
    expect(r.getMessage('g', 'orders', 1, 0, 32, 'b').messages).toHaveLength(5)

    expect(r.getLatestByKey('orders', 'key-42')?.body.toString()).toBe(body(42).toString())
    expect(r.getLatestByKey('orders', 'no-such-key')).toBeNull()
    expect(r.getLatestByKey('other', 'key-42')).toBeNull()
    const query = r.queryMessage('orders', 'key-7', 10)
    expect(query.messages.map((m) => m.queueOffset)).toEqual([7])
    const first = got.messages[0]
    expect(r.lookMessageByOffset(first.commitLogOffset)?.queueOffset).toBe(10)
    expect(r.lookMessageByOffset(first.commitLogOffset + 1)).toBeNull()
    expect(r.getCommitLogOffsetInQueue('orders', 0, 10)).toBe(first.commitLogOffset)
    expect(r.getCommitLogOffsetInQueue('orders', 0, 1000)).toBe(0)
    expect(r.getMessageStoreTimeStamp('orders', 0, 10)).toBe(first.storeTimestamp)
    expect(r.getMessageStoreTimeStamp('orders', 0, 1000)).toBe(-1)
    // A batch shares one store time: any offset stored then is an exact answer, as in the writer.
    const byTime = r.getOffsetInQueueByTime('orders', 0, first.storeTimestamp)
    expect(r.getMessageStoreTimeStamp('orders', 0, byTime)).toBe(
      w.getMessageStoreTimeStamp('orders', 0, w.getOffsetInQueueByTime('orders', 0, first.storeTimestamp)),
    )
    expect(r.getOffsetInQueueByTime('orders', 0, 0)).toBe(0)
    expect(r.getOffsetInQueueByTime('orders', 0, Date.now() + 60_000)).toBe(299)
    expect(r.getOffsetInQueueByTime('none', 0, 1)).toBe(0)
    expect(r.getEarliestMessageTime()).toBe(w.getEarliestMessageTime())
    expect(r.getEarliestMessageTime('orders', 1)).toBe(w.getEarliestMessageTime('orders', 1))
    expect(r.getMinOffsetInQueue('orders', 0)).toBe(0)
    expect(r.getMaxOffsetInQueue('orders', 1)).toBe(5)
    expect(r.getMessageTotalInQueue('orders', 0)).toBe(300)
    expect(r.getMinPhyOffset()).toBe(w.getMinPhyOffset())
    expect(r.getMaxPhyOffset()).toBe(w.getMaxPhyOffset())
    expect(r.listTopics()).toEqual([{ topic: 'orders', readQueueNums: 2, writeQueueNums: 2, created: false }])

    const stats = r.stats()
    expect(stats).toMatchObject({ readOnly: true, needsRecovery: false, storeExists: true, offsetStorePath: null })
    expect(stats.commitLogMaxOffset).toBe(w.getMaxPhyOffset())
    if (process.platform === 'linux') expect(stats.writerRunning).toBe(true)
  })

  it('reads every field as the writer does, a read larger than its first buffer included, and skips and counts a body that fails its CRC', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    const bodyOf = (i: number) => Buffer.alloc(2_000 + 97 * i, `${i}:`)
    const results = await w.putMessages(
      Array.from({ length: 40 }, (_, i) => ({
        topic: 'big',
        queueId: 0,
        body: bodyOf(i),
        tags: i % 2 === 0 ? 'even' : 'odd',
        keys: [`k${i}`, 'all'],
        properties: { n: String(i), note: 'é' },
      })),
    )
    for (const result of results) expect(result.status).toBe('PUT_OK')
    const r = await reader(dir)
    // 32 records of 2-5 KB: more than the reader's first 64 KiB buffer, over several 64 KiB files.
    const got = r.getMessage('g', 'big', 0, 0, 32)
    expect(got.messages).toHaveLength(32)
    expect(got.messages.map(fieldsAndBodyOf)).toEqual(w.getMessage('g', 'big', 0, 0, 32).messages.map(fieldsAndBodyOf))
    expect(r.getMessage('g', 'big', 0, 32, 32).messages.map(fieldsAndBodyOf)).toEqual(
      w.getMessage('g', 'big', 0, 32, 32).messages.map(fieldsAndBodyOf),
    )
    const odd = r.getMessage('g', 'big', 0, 0, 32, 'odd').messages.map((m) => m.queueOffset)
    expect(odd.length).toBeGreaterThan(10)
    expect(odd.every((offset) => offset % 2 === 1)).toBe(true)
    expect(odd).toEqual(w.getMessage('g', 'big', 0, 0, 32, 'odd').messages.map((m) => m.queueOffset))
    // Queues whose records lie between one another's: each read takes its own out of what it reads.
    const mixed = await w.putMessages(
      Array.from({ length: 300 }, (_, i) => ({ topic: 'big', queueId: 1 + (i % 3), body: bodyOf(i % 7), keys: [`m${i}`] })),
    )
    for (const result of mixed) expect(result.status).toBe('PUT_OK')
    for (const queueId of [1, 2, 3]) {
      for (let offset = 0; offset < 100; offset += 32) {
        const own = r.getMessage('g', 'big', queueId, offset, 32)
        expect(own.messages.length).toBe(Math.min(32, 100 - offset))
        expect(own.messages.map(fieldsAndBodyOf)).toEqual(w.getMessage('g', 'big', queueId, offset, 32).messages.map(fieldsAndBodyOf))
      }
    }
    // A bit flipped in the body of message 5, where the file holds it.
    const m5 = got.messages[5]
    const files = fs.readdirSync(join(dir, 'commitlog')).sort()
    const file = files.findLast((name) => Number(name) <= m5.commitLogOffset)!
    const path = join(dir, 'commitlog', file)
    const bytes = fs.readFileSync(path)
    const recordAt = m5.commitLogOffset - Number(file)
    const bodyAt = bytes.indexOf(bodyOf(5), recordAt)
    expect(bodyAt).toBeGreaterThan(recordAt)
    expect(bodyAt + m5.body.length).toBeLessThan(recordAt + m5.storeSize)
    const fd = fs.openSync(path, 'r+')
    fs.writeSync(fd, Buffer.from([bytes[bodyAt + 10] ^ 0x01]), 0, 1, bodyAt + 10)
    fs.closeSync(fd)
    const after = r.getMessage('g', 'big', 0, 0, 32)
    expect(after.bodyCrcFailures).toBe(1)
    expect(after.messages.map((m) => m.queueOffset)).toEqual(Array.from({ length: 32 }, (_, k) => k).filter((k) => k !== 5))
    expect(after.messages.every((m) => m.body.equals(bodyOf(m.queueOffset)))).toBe(true)
  })

  it('refuses every writing call with READ_ONLY and reads nothing after close', async () => {
    const dir = tempDir()
    await writer(dir)
    const r = await reader(dir)
    await expect(r.putMessage({ topic: 't', queueId: 0, body: Buffer.from('x') })).rejects.toMatchObject({ code: 'READ_ONLY' })
    await expect(r.putMessages([])).rejects.toBeInstanceOf(MQStoreError)
    await expect(r.setTopicConfig('t', {})).rejects.toMatchObject({ code: 'READ_ONLY' })
    await expect(r.compact()).rejects.toMatchObject({ code: 'READ_ONLY' })
    expect(() => r.createTopic('t', { queues: 2 })).toThrow(expect.objectContaining({ code: 'READ_ONLY' }))
    expect(() => r.retryCompaction()).toThrow(expect.objectContaining({ code: 'READ_ONLY' }))
    expect(() => r.executeDeleteFilesManually()).toThrow(expect.objectContaining({ code: 'READ_ONLY' }))
    // A nack is a put to the group's retry topic: refused as well.
    const stop = new AbortController()
    const sub = r.consume({ group: 'g', topic: 't', signal: stop.signal })
    const [first] = r.getMessage('g', 't', 0, 0, 1).messages
    await expect(sub.nack(first)).rejects.toMatchObject({ code: 'READ_ONLY' })
    stop.abort()
    await r.close()
    await r.close()
    expect(r.isClosed).toBe(true)
    expect(() => r.getMessage('g', 't', 0, 0, 1)).toThrow(expect.objectContaining({ code: 'STORE_CLOSED' }))
  })

  it('rejects bad options and arguments with typed errors', async () => {
    const dir = tempDir()
    await expect(MessageStore.open(dir, { readOnly: true, offsetStorePath: join(dir, 'mine.json') })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    })
    await expect(MessageStore.open(dir, { readOnly: true, followIntervalMs: 0 })).rejects.toMatchObject({ code: 'INVALID_OPTION' })
    await expect(MessageStoreReader.open('', { readOnly: true })).rejects.toBeInstanceOf(TypeError)
    await expect(MessageStoreReader.open(dir, {} as never)).rejects.toBeInstanceOf(TypeError)
    const r = await reader(dir)
    expect(() => r.getMessage('g', 't', -1, 0, 1)).toThrow(RangeError)
    expect(() => r.queryMessage('t', '', 1)).toThrow(TypeError)
    expect(() => r.consume({ group: 'g', topic: 't', from: 3 })).toThrow(TypeError)
  })

  it('opens a directory no writer ever created, changes nothing, and follows the writer once it starts', async () => {
    const dir = join(tempDir(), 'later')
    const r = await reader(dir, { followIntervalMs: 2 })
    expect(fs.existsSync(dir)).toBe(false)
    expect(r.stats()).toMatchObject({ storeExists: false, commitLogMinOffset: -1, commitLogMaxOffset: 0 })
    expect(r.getMessage('g', 't', 0, 0, 1).status).toBe('NO_MESSAGE_IN_QUEUE')
    const seen: number[] = []
    const stop = new AbortController()
    const consuming = (async () => {
      for await (const m of r.consume({ group: 'g', topic: 't', queueId: 0, from: 'earliest', signal: stop.signal })) {
        seen.push(m.queueOffset)
        if (seen.length === 50) stop.abort()
      }
    })()
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(fs.existsSync(dir)).toBe(false)
    const w = await writer(dir)
    for (let i = 0; i < 50; i += 10) await putMany(w, 't', 0, i, 10)
    await consuming
    expect(seen).toEqual(Array.from({ length: 50 }, (_, i) => i))
    expect(r.stats().followTicks).toBeGreaterThan(0)
  })

  it('writes no byte in the store: content, sizes, mtimes and inodes are unchanged by reads', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    await putMany(w, 'orders', 0, 0, 500)
    await w.commitOffset('g', 'orders', 0, 17, { durable: true })
    await w.close()
    opened.splice(opened.indexOf(w), 1)
    const before = snapshotStore(dir)
    const own = join(tempDir(), 'reader', 'offsets.json')
    const r = await reader(dir, { offsetStorePath: own })
    r.getMessage('g', 'orders', 0, 0, 32)
    r.queryMessage('orders', 'key-3', 4)
    r.getOffsetInQueueByTime('orders', 0, Date.now())
    r.stats()
    const sub = r.consume({ group: 'g', topic: 'orders', queueId: 0 })
    let n = 0
    for await (const m of sub) {
      expect(m.queueOffset).toBe(17 + n)
      m.body.fill(0)
      if (++n === 100) break
    }
    await sub.commit()
    await r.close()
    opened.splice(opened.indexOf(r), 1)
    expect(snapshotStore(dir)).toEqual(before)
    expect(JSON.parse(fs.readFileSync(own, 'utf8')).offsetTable['orders@g']).toEqual({ 0: 117 })
  })
})

describe('lookups and reads in a row in a reader', () => {
  it('answers lookups by key and offset as the writer, records longer than its first read and keys sharing a hash included, and skips a body that fails its CRC', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    const bodyOf = (i: number) => Buffer.alloc(i % 5 === 0 ? 9_000 + i : 100 + i, `${i}:`)
    // "Aa" and "BB" have the same Java hash, so these keys share index slots and entries' hashes.
    const keysOf = (i: number) => [`k${i}`, i % 2 === 0 ? 'xAa' : 'xBB']
    const results = await w.putMessages(
      Array.from({ length: 60 }, (_, i) => ({ topic: i % 3 === 0 ? 'other' : 'kv', queueId: i % 2, body: bodyOf(i), keys: keysOf(i) })),
    )
    for (const result of results) expect(result.status).toBe('PUT_OK')
    const r = await reader(dir)
    const same = (a: { messages: readonly Parameters<typeof fieldsAndBodyOf>[0][] }, b: typeof a) =>
      expect(a.messages.map(fieldsAndBodyOf)).toEqual(b.messages.map(fieldsAndBodyOf))
    for (let i = 0; i < 60; i++) {
      const topic = i % 3 === 0 ? 'other' : 'kv'
      const got = r.queryMessage(topic, `k${i}`, 4)
      expect(got.messages.map((m) => m.body.equals(bodyOf(i)))).toEqual([true])
      same(got, w.queryMessage(topic, `k${i}`, 4))
      expect(r.lookMessageByOffset(results[i].wroteOffset)).toEqual(w.lookMessageByOffset(results[i].wroteOffset))
      expect(fieldsAndBodyOf(r.lookMessageByOffset(results[i].wroteOffset)!)).toEqual(
        fieldsAndBodyOf(w.lookMessageByOffset(results[i].wroteOffset)!),
      )
    }
    // The keys that share a hash: each record checked on its own topic and keys.
    const aa = r.queryMessage('kv', 'xAa', 64)
    expect(aa.messages.map((m) => m.body.toString().split(':')[0])).toEqual(
      Array.from({ length: 60 }, (_, i) => i)
        .filter((i) => i % 3 !== 0 && i % 2 === 0)
        .map(String),
    )
    same(aa, w.queryMessage('kv', 'xAa', 64))
    same(r.queryMessage('kv', 'xBB', 3), w.queryMessage('kv', 'xBB', 3))
    expect(r.queryMessage('kv', 'xBB', 3).messages.map((m) => m.queueOffset)).toEqual(
      w.queryMessage('kv', 'xBB', 3).messages.map((m) => m.queueOffset),
    )
    expect(r.getLatestByKey('kv', 'xBB')?.body.equals(bodyOf(59))).toBe(true)
    // A store-time range that ends before the puts finds nothing.
    expect(r.queryMessage('kv', 'k1', 4, 0, results[0].storeTimestamp - 1).messages).toEqual([])
    expect(r.lookMessageByOffset(results[5].wroteOffset + 4)).toBeNull()
    expect(r.lookMessageByOffset(w.getMaxPhyOffset())).toBeNull()

    // A bit flipped in the body of the newest 'xAa' message (58): lookups serve the others.
    const newest = r.getLatestByKey('kv', 'xAa')!
    expect(newest.body.equals(bodyOf(58))).toBe(true)
    const file = fs
      .readdirSync(join(dir, 'commitlog'))
      .sort()
      .findLast((name) => Number(name) <= newest.commitLogOffset)!
    const path = join(dir, 'commitlog', file)
    const bodyAt = fs.readFileSync(path).indexOf(bodyOf(58), newest.commitLogOffset - Number(file))
    const fd = fs.openSync(path, 'r+')
    fs.writeSync(fd, Buffer.from([0xff]), 0, 1, bodyAt + 3)
    fs.closeSync(fd)
    expect(r.getLatestByKey('kv', 'xAa')?.body.equals(bodyOf(56))).toBe(true)
    const after = r.queryMessage('kv', 'xAa', 2)
    expect(after.bodyCrcFailures).toBe(1)
    expect(after.messages.map((m) => m.body.toString().split(':')[0])).toEqual(['52', '56'])
    expect(r.lookMessageByOffset(newest.commitLogOffset)).toBeNull()
    expect(r.queryMessage('kv', 'k58', 4).messages).toEqual([])
    // Its store time is read from its head, as the writer reads it.
    expect(r.getMessageStoreTimeStamp('kv', 0, newest.queueOffset)).toBe(newest.storeTimestamp)
    expect(w.getMessageStoreTimeStamp('kv', 0, newest.queueOffset)).toBe(newest.storeTimestamp)
  })

  it('reads a compacted queue as the writer: every field, across segments, in pieces, with tags, and a body damaged after it was indexed skipped and counted', async () => {
    const dir = tempDir()
    const w = await writer(dir, {
      topics: { kv: { cleanupPolicy: 'compact', segmentBytes: 4096, minCleanableDirtyRatio: 0 } },
      compaction: { enabled: false, fileDeleteDelayMs: 0 },
    })
    const bodyOf = (i: number) => Buffer.from(`kv ${i} `.padEnd(60 + (i % 9) * 40, String.fromCharCode(97 + (i % 26))))
    const results = await w.putMessages(
      Array.from({ length: 200 }, (_, i) => ({
        topic: 'kv',
        queueId: 0,
        body: bodyOf(i),
        tags: i % 3 === 0 ? 'third' : 'other',
        keys: [`key-${i % 40}`],
      })),
    )
    for (const result of results) expect(result.status).toBe('PUT_OK')
    expect(fs.readdirSync(join(dir, 'compaction', 'kv', '0')).length).toBeGreaterThan(3)
    const r = await reader(dir)
    const both = (offset: number, n: number, tags?: string) => {
      const got = r.getMessage('g', 'kv', 0, offset, n, tags)
      const expected = w.getMessage('g', 'kv', 0, offset, n, tags)
      expect(got.messages.map(fieldsAndBodyOf)).toEqual(expected.messages.map(fieldsAndBodyOf))
      expect({ ...got, messages: 0 }).toEqual({ ...expected, messages: 0 })
      return got
    }
    let served = 0
    for (let offset = 0; offset < 200; ) {
      const got = both(offset, 7)
      served += got.messages.length
      offset = got.nextBeginOffset
    }
    expect(served).toBe(200)
    // A read right after more puts, at the end it knew, sees them.
    const more = await w.putMessages(
      Array.from({ length: 5 }, (_, k) => ({ topic: 'kv', queueId: 0, body: bodyOf(200 + k), tags: 'other', keys: ['late'] })),
    )
    for (const result of more) expect(result.status).toBe('PUT_OK')
    expect(r.getMessage('g', 'kv', 0, 200, 7).messages.map((m) => m.queueOffset)).toEqual([200, 201, 202, 203, 204])
    expect(both(5, 64, 'third').messages.map((m) => m.queueOffset)).toEqual(
      Array.from({ length: 205 }, (_, i) => i)
        .filter((i) => i >= 5 && i < 200 && i % 3 === 0)
        .slice(0, 64),
    )
    // A bit flipped in the copy of message 17 after the reader indexed it.
    const folder = join(dir, 'compaction', 'kv', '0')
    const file = fs.readdirSync(folder).find((name) => fs.readFileSync(join(folder, name)).includes(bodyOf(17)))!
    const at = fs.readFileSync(join(folder, file)).indexOf(bodyOf(17))
    const fd = fs.openSync(join(folder, file), 'r+')
    fs.writeSync(fd, Buffer.from([0x01]), 0, 1, at + 5)
    fs.closeSync(fd)
    const after = r.getMessage('g', 'kv', 0, 10, 20)
    expect(after.bodyCrcFailures).toBe(1)
    // The damaged copy counts against maxMsgNums, as in the writer.
    expect(after.messages.map((m) => m.queueOffset)).toEqual(Array.from({ length: 20 }, (_, k) => 10 + k).filter((k) => k !== 17))
    expect(after.messages.every((m) => m.body.equals(bodyOf(m.queueOffset)))).toBe(true)
    expect(after.messages.map(fieldsAndBodyOf)).toEqual(w.getMessage('g', 'kv', 0, 10, 20).messages.map(fieldsAndBodyOf))
  })

  it('walks a long chain of keys sharing a hash while its visits open more files than the reader keeps open', async () => {
    const dir = tempDir()
    const w = await writer(dir, { maxHashSlotNum: 64, maxIndexNum: 4096 })
    // "xAa" once, then 2,200 records of "xBB" (the same Java hash) in 4 KiB bodies: the chain from
    // the newest entry back to "xAa" visits records in some 150 commit-log files of 64 KiB.
    const first = await w.putMessages([{ topic: 't', queueId: 0, body: Buffer.alloc(100, 1), keys: ['xAa'] }])
    expect(first[0].status).toBe('PUT_OK')
    for (let b = 0; b < 22; b++) {
      const batch = await w.putMessages(
        Array.from({ length: 100 }, () => ({ topic: 't', queueId: 0, body: Buffer.alloc(4000, 2), keys: ['xBB'] })),
      )
      for (const result of batch) expect(result.status).toBe('PUT_OK')
    }
    expect(fs.readdirSync(join(dir, 'commitlog')).length).toBeGreaterThan(140)
    const r = await reader(dir)
    expect(r.getLatestByKey('t', 'xAa')?.commitLogOffset).toBe(first[0].wroteOffset)
    expect(r.getLatestByKey('t', 'xAa')?.body.equals(Buffer.alloc(100, 1))).toBe(true)
  })

  it('finds a key put just now in an index file and a commit-log file the writer has just started', async () => {
    const dir = tempDir()
    const w = await writer(dir, { maxHashSlotNum: 16, maxIndexNum: 64 })
    const r = await reader(dir)
    for (let i = 0; i < 300; i++) {
      const [put] = await w.putMessages([{ topic: 't', queueId: 0, body: Buffer.alloc(500, i), keys: [`n${i}`] }])
      expect(put.status).toBe('PUT_OK')
      // No pause between the put and the lookups: every roll is seen at once.
      expect(r.queryMessage('t', `n${i}`, 1).messages.map((m) => m.queueOffset)).toEqual([i])
      expect(r.getLatestByKey('t', `n${i}`)?.queueOffset).toBe(i)
    }
    expect(fs.readdirSync(join(dir, 'index')).length).toBeGreaterThan(3)
    expect(fs.readdirSync(join(dir, 'commitlog')).length).toBeGreaterThan(2)
  })

  it('reads in a row see new units at once, across consume-queue and commit-log rolls, and a mid-queue answer knows the end of at most 100 ms before', async () => {
    const dir = tempDir()
    const w = await writer(dir, { mappedFileSizeConsumeQueue: 20 * 4 })
    const r = await reader(dir)
    let next = 0
    for (let round = 0; round < 40; round++) {
      await putMany(w, 'rows', 0, round * 7, 7)
      // A read in a row of reads that reaches past the known end sees every unit put before it.
      for (;;) {
        const got = r.getMessage('g', 'rows', 0, next, 3)
        if (got.status !== 'FOUND') {
          expect(got.status).toBe('OFFSET_OVERFLOW_ONE')
          break
        }
        expect(got.messages.map((m) => m.body.toString())).toEqual(got.messages.map((m) => body(m.queueOffset).toString()))
        next = got.nextBeginOffset
      }
      expect(next).toBe((round + 1) * 7)
    }
    expect(fs.readdirSync(join(dir, 'commitlog')).length).toBeGreaterThan(1)
    // A read of units known already may answer with the end of its last look...
    const before = r.getMessage('g', 'rows', 0, 0, 3).maxOffset
    await putMany(w, 'rows', 0, 280, 5)
    expect([before, before + 5]).toContain(r.getMessage('g', 'rows', 0, 0, 3).maxOffset)
    // ...of no more than 100 ms before; the queue's own bounds are read at every call.
    expect(r.getMaxOffsetInQueue('rows', 0)).toBe(before + 5)
    await new Promise((resolve) => setTimeout(resolve, 110))
    expect(r.getMessage('g', 'rows', 0, 0, 3).maxOffset).toBe(before + 5)
  })
})

describe('offsets in a reader', () => {
  it('start from the writer file, are kept apart from it, and resume from the reader own file', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    await putMany(w, 't', 0, 0, 40)
    await w.commitOffset('g', 't', 0, 10, { durable: true })
    await w.commitOffset('h', 't', 0, 20, { durable: true })

    const memory = await reader(dir)
    expect(memory.queryOffset('g', 't', 0)).toBe(10)
    memory.commitOffset('g', 't', 0, 30)
    await memory.commitOffset('g', 't', 0, 31, { durable: true })
    expect(memory.queryOffset('g', 't', 0)).toBe(31)
    expect(w.queryOffset('g', 't', 0)).toBe(10)

    const own = join(tempDir(), 'offsets.json')
    const first = await reader(dir, { offsetStorePath: own })
    await first.commitOffset('g', 't', 0, 25, { durable: true })
    first.commitOffset('h', 't', 0, 21)
    await first.close()
    const again = await reader(dir, { offsetStorePath: own })
    expect(again.queryOffset('g', 't', 0)).toBe(25)
    expect(again.queryOffset('h', 't', 0)).toBe(21)
    expect(again.queryOffset('x', 't', 0)).toBe(-1)
    const sub = again.consume({ group: 'g', topic: 't', queueId: 0 })
    expect(sub.position).toBe(25)
    const topic = again.consume({ group: 'h', topic: 't', autoCommit: true })
    for await (const m of topic) {
      expect(m.queueOffset).toBe(21)
      break
    }
    expect(again.queryOffset('h', 't', 0)).toBe(22)
    expect(w.queryOffset('g', 't', 0)).toBe(10)
  })
})

describe('a store the writer left behind', () => {
  it('after a crash: stats() says it needs recovery, and a unit whose record is not whole is not served', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    await putMany(w, 'orders', 0, 0, 10)
    const end = w.getMaxPhyOffset()
    await w.close()
    opened.splice(opened.indexOf(w), 1)
    // What a writer killed while it appended leaves: the abort file, and a unit dispatched for a
    // record whose bytes are not (yet) in the commit log.
    fs.writeFileSync(join(dir, 'abort'), '')
    const queueDir = join(dir, 'consumequeue', 'orders', '0')
    const [file] = fs.readdirSync(queueDir)
    const unit = Buffer.alloc(20)
    unit.writeBigInt64BE(BigInt(end), 0)
    unit.writeInt32BE(250, 8)
    const fd = fs.openSync(join(queueDir, file), 'r+')
    fs.writeSync(fd, unit, 0, 20, 10 * 20)
    fs.closeSync(fd)
    const r = await reader(dir)
    expect(r.stats()).toMatchObject({ needsRecovery: process.platform === 'linux', storeExists: true })
    expect(r.getMaxOffsetInQueue('orders', 0)).toBe(10)
    expect(r.getMessage('g', 'orders', 0, 0, 32).messages).toHaveLength(10)
    expect(r.getMessage('g', 'orders', 0, 10, 32).status).toBe('OFFSET_OVERFLOW_ONE')
  })

  it('a reader walking many files keeps few descriptors open', async () => {
    const dir = tempDir()
    const w = await writer(dir, { mappedFileSizeConsumeQueue: 20 * 4 })
    await putMany(w, 'many', 0, 0, 800)
    await w.close()
    opened.splice(opened.indexOf(w), 1)
    expect(fs.readdirSync(join(dir, 'consumequeue', 'many', '0')).length).toBe(200)
    const r = await reader(dir)
    const fds = () => (process.platform === 'linux' ? fs.readdirSync('/proc/self/fd').length : 0)
    const before = fds()
    let n = 0
    for await (const m of r.consume({ group: 'g', topic: 'many', queueId: 0, from: 'earliest' })) {
      expect(m.queueOffset).toBe(n)
      if (++n === 800) break
    }
    expect(fds() - before).toBeLessThanOrEqual(130)
    // Files whose descriptor was closed are opened again when read.
    expect(r.getMessage('g', 'many', 0, 0, 4).messages.map((m) => m.queueOffset)).toEqual([0, 1, 2, 3])
  })
})

describe('docs/api.md', () => {
  it('documents every field of a reader stats() in its Several processes section', async () => {
    const api = fs.readFileSync(join(repoRoot, 'docs', 'api.md'), 'utf8')
    const start = api.indexOf('\n## Several processes')
    expect(start).toBeGreaterThan(0)
    const text = api.slice(start, api.indexOf('\n## ', start + 1))
    const r = await reader(tempDir())
    expect(Object.keys(r.stats()).filter((field) => !text.includes(`\`${field}\``))).toEqual([])
  })
})
