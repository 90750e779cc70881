import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import fc from 'fast-check'

import { BLANK_MAGIC_CODE } from '../lib/store/commitlog/record.js'
import { parseLenientJson } from '../lib/store/consumer-offsets.js'
import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore, type Message, type OpenOptions } from '../lib/store/message-store.js'
import { distEntry, runNodeScript, tempDir } from './helpers/tmp.js'

const SMALL: OpenOptions = {
  mappedFileSizeCommitLog: 64 * 1024,
  mappedFileSizeConsumeQueue: 20 * 100,
  maxHashSlotNum: 64,
  maxIndexNum: 256,
}

let dir: string
const open: MessageStore[] = []
beforeEach(() => {
  dir = tempDir()
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

async function reopen(store: MessageStore, options: OpenOptions = SMALL): Promise<MessageStore> {
  await store.close()
  return openStore(options)
}

describe('MessageStore put and read', () => {
  it('round-trips every field of a message', async () => {
    const store = await openStore()
    const body = Buffer.from('payload ✓')
    const r = await store.putMessage({
      topic: 'orders',
      queueId: 3,
      body,
      tags: 'created',
      keys: ['order-42', 'customer-7'],
      properties: { region: 'eu', note: 'ünïcode' },
      flag: 12345,
      bornTimestamp: 1_700_000_000_123,
      bornHost: '[2001:db8::1]:4567',
      reconsumeTimes: 2,
      preparedTransactionOffset: 0,
    })
    expect(r.status).toBe('PUT_OK')
    expect(r.wroteOffset).toBe(0)
    expect(r.queueOffset).toBe(0)
    expect(r.msgId).toMatch(/^7F00000100002A9F0{16}$/)
    expect(r.storeTimestamp).toBeGreaterThan(0)
    const got = store.getMessage('g', 'orders', 3, 0, 32)
    expect(got.status).toBe('FOUND')
    const m = got.messages[0]
    expect(m).toMatchObject({
      topic: 'orders',
      queueId: 3,
      queueOffset: 0,
      commitLogOffset: 0,
      storeSize: r.wroteBytes,
      tags: 'created',
      keys: ['order-42', 'customer-7'],
      storeTimestamp: r.storeTimestamp,
      bornTimestamp: 1_700_000_000_123,
      bornHost: { address: '2001:db8::1', port: 4567 },
      storeHost: { address: '127.0.0.1', port: 10911 },
      msgId: r.msgId,
      reconsumeTimes: 2,
      flag: 12345,
      preparedTransactionOffset: 0,
    })
    expect(m.sysFlag & 0x10).toBe(0x10) // born host is IPv6
    expect(m.properties).toMatchObject({ region: 'eu', note: 'ünïcode', TAGS: 'created', KEYS: 'order-42 customer-7' })
    expect(Buffer.compare(m.body, body)).toBe(0)
    expect(store.lookMessageByOffset(r.wroteOffset)?.msgId).toBe(r.msgId)
    expect(store.lookMessageByOffset(r.wroteOffset + 1)).toBeNull()
  })

  it('assigns dense queue offsets per queue and commit-log offsets in append order', async () => {
    const store = await openStore()
    const results = await store.putMessages(Array.from({ length: 30 }, (_, i): Message => ({ topic: 't', queueId: i % 3, body: `m${i}` })))
    expect(results.map((r) => r.queueOffset)).toEqual(Array.from({ length: 30 }, (_, i) => Math.floor(i / 3)))
    for (let i = 1; i < results.length; i++) {
      expect(results[i].wroteOffset).toBe(results[i - 1].wroteOffset + results[i - 1].wroteBytes)
    }
    expect(store.getMaxOffsetInQueue('t', 2)).toBe(10)
    expect(store.getCommitLogOffsetInQueue('t', 1, 4)).toBe(results[13].wroteOffset)
  })

  it('rejects illegal messages with a status, and misuse with a TypeError', async () => {
    const store = await openStore()
    expect((await store.putMessage({ topic: '../etc', body: 'x' })).status).toBe('MESSAGE_ILLEGAL')
    expect((await store.putMessage({ topic: 'a'.repeat(128), body: 'x' })).status).toBe('MESSAGE_ILLEGAL')
    expect((await store.putMessage({ topic: 't', body: 'x', properties: { bad: 'a\u0001b' } })).status).toBe('MESSAGE_ILLEGAL')
    expect((await store.putMessage({ topic: 't', body: 'x', properties: { nul: 'a\u0000b' } })).status).toBe('MESSAGE_ILLEGAL')
    expect((await store.putMessage({ topic: 't', body: 'x', keys: 'a\u0000b' })).status).toBe('MESSAGE_ILLEGAL')
    expect((await store.putMessage({ topic: 't', body: 'x', properties: { big: 'x'.repeat(40_000) } })).status).toBe('MESSAGE_ILLEGAL')
    expect((await store.putMessage({ topic: 't', body: 'x', properties: { big: 'é'.repeat(20_000) } })).status).toBe(
      'PROPERTIES_SIZE_EXCEEDED',
    )
    const tooBig = await openStoreWithMax()
    expect((await tooBig.putMessage({ topic: 't', body: Buffer.alloc(1025) })).status).toBe('MESSAGE_ILLEGAL')
    await expect(store.putMessage({ topic: 't', body: 42 as unknown as string })).rejects.toThrow(TypeError)
    await expect(store.putMessage({ topic: 't', queueId: -1, body: 'x' })).rejects.toThrow(RangeError)
    expect(store.stats().putMessageFailedTimes).toBe(7)
  })

  it('a message of a batch with a bad bornHost fails alone with MESSAGE_ILLEGAL; the others are stored', async () => {
    const store = await openStore()
    const results = await store.putMessages([
      { topic: 't', body: 'a' },
      { topic: 't', body: 'b', bornHost: 'not-a-host' },
      { topic: 't', body: 'c', bornHost: '10.0.0.1:1234' },
    ])
    expect(results.map((r) => r.status)).toEqual(['PUT_OK', 'MESSAGE_ILLEGAL', 'PUT_OK'])
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(2)
    const got = store.getMessage('g', 't', 0, 0, 10)
    expect(got.messages.map((m) => m.body.toString())).toEqual(['a', 'c'])
  })

  it('a batch with a malformed message stores none of it', async () => {
    const store = await openStore()
    const batch = [
      { topic: 't', body: 'a' },
      { topic: 't', body: 7 as unknown as string },
      { topic: 't', body: 'c' },
    ]
    await expect(store.putMessages(batch)).rejects.toThrow(TypeError)
    expect(store.getMaxPhyOffset()).toBe(0)
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(0)
  })

  it('reads and offsets refuse topics that could not have been stored', async () => {
    const store = await openStore()
    expect(() => store.getMessage('g', '../x', 0, 0, 1)).toThrow(TypeError)
    expect(() => store.commitOffset('g', 'a,1:b', 0, 1)).toThrow(TypeError)
  })

  async function openStoreWithMax(): Promise<MessageStore> {
    const other = tempDir()
    const store = await MessageStore.open(other, { ...SMALL, maxMessageSize: 1024 })
    open.push(store)
    return store
  }

  it('places a record only with 8 bytes to spare, else closes the file with a blank (every size near the edge)', async () => {
    const fileSize = SMALL.mappedFileSizeCommitLog!
    const probe = await openStore()
    const probeResult = await probe.putMessage({ topic: 't', body: Buffer.alloc(100) })
    const recordLength = probeResult.wroteBytes
    await probe.close()
    open.length = 0
    for (let spare = -3; spare <= 12; spare++) {
      fs.rmSync(dir, { recursive: true, force: true })
      const store = await openStore()
      // A filler record sized so that exactly recordLength + spare bytes remain after it.
      const fillerLength = fileSize - (recordLength + spare)
      const fillerBody = fillerLength - recordLength + 100
      const filler = await store.putMessage({ topic: 't', body: Buffer.alloc(fillerBody) })
      expect(filler.wroteBytes).toBe(fillerLength)
      const r = await store.putMessage({ topic: 't', body: Buffer.alloc(100, 1) })
      expect(r.status).toBe('PUT_OK')
      const fitsHere = spare >= 8
      expect(r.wroteOffset).toBe(fitsHere ? fillerLength : fileSize)
      if (!fitsHere) {
        const first = fs.readFileSync(join(dir, 'commitlog', formatOffsetName(0)))
        expect(first.readInt32BE(fillerLength)).toBe(recordLength + spare)
        expect(first.readInt32BE(fillerLength + 4)).toBe(BLANK_MAGIC_CODE)
      }
      const got = store.getMessage('g', 't', 0, 0, 10)
      expect(got.messages.map((m) => m.commitLogOffset)).toEqual([0, r.wroteOffset])
      expect(store.lookMessageByOffset(r.wroteOffset)?.body[0]).toBe(1)
      // After a reopen, recovery walks over the blank into the next file.
      const again = await reopen(store)
      expect(again.getMessage('g', 't', 0, 1, 1).messages[0]?.commitLogOffset).toBe(r.wroteOffset)
      await again.close()
      open.length = 0
    }
  })

  it('filters by tag: by tagsCode in the consume queue, then by the exact tag', async () => {
    const store = await openStore()
    // "Aa" and "BB" have the same Java hash code: the exact-tag check must tell them apart.
    await store.putMessages(['Aa', 'BB', 'other', 'Aa', 'BB'].map((tags) => ({ topic: 't', body: tags, tags })))
    const aa = store.getMessage('g', 't', 0, 0, 32, { tags: ['Aa'] })
    expect(aa.messages.map((m) => m.queueOffset)).toEqual([0, 3])
    expect(aa.nextBeginOffset).toBe(5)
    expect(store.getMessage('g', 't', 0, 0, 32, 'BB || other').messages.map((m) => m.queueOffset)).toEqual([1, 2, 4])
    expect(store.getMessage('g', 't', 0, 0, 32, '*').messages).toHaveLength(5)
    const none = store.getMessage('g', 't', 0, 0, 32, ['missing'])
    expect(none.status).toBe('NO_MATCHED_MESSAGE')
    expect(none.nextBeginOffset).toBe(5)
  })

  it('reports every getMessage status at its edge', async () => {
    const store = await openStore()
    expect(store.getMessage('g', 'empty', 0, 0, 1).status).toBe('NO_MESSAGE_IN_QUEUE')
    await store.putMessages(Array.from({ length: 5 }, () => ({ topic: 't', body: 'x' })))
    expect(store.getMessage('g', 't', 0, 5, 1)).toMatchObject({ status: 'OFFSET_OVERFLOW_ONE', nextBeginOffset: 5 })
    expect(store.getMessage('g', 't', 0, 9, 1)).toMatchObject({ status: 'OFFSET_OVERFLOW_BADLY', nextBeginOffset: 5 })
    expect(store.getMessage('g', 't', 0, 4, 1)).toMatchObject({ status: 'FOUND', nextBeginOffset: 5, minOffset: 0, maxOffset: 5 })
    expect(() => store.getMessage('g', 't', 0, -1, 1)).toThrow(RangeError)
    expect(() => store.getMessage('bad group', 't', 0, 0, 1)).toThrow(TypeError)
  })

  it('reports OFFSET_TOO_SMALL for an offset whose commit-log file was deleted', async () => {
    let store = await openStore()
    const fileSize = SMALL.mappedFileSizeCommitLog!
    const results = await store.putMessages(Array.from({ length: 400 }, (_, i) => ({ topic: 't', body: Buffer.alloc(500, i) })))
    const firstInSecondFile = results.findIndex((r) => r.wroteOffset >= fileSize)
    expect(firstInSecondFile).toBeGreaterThan(0)
    await store.close()
    open.length = 0
    fs.rmSync(join(dir, 'commitlog', formatOffsetName(0)))
    store = await openStore()
    expect(store.getMinOffsetInQueue('t', 0)).toBe(firstInSecondFile)
    expect(store.getMessage('g', 't', 0, 0, 1)).toMatchObject({ status: 'OFFSET_TOO_SMALL', nextBeginOffset: firstInSecondFile })
    expect(store.getMessage('g', 't', 0, firstInSecondFile, 1).messages[0].body[0]).toBe(firstInSecondFile & 0xff)
  })

  it('honours maxMsgNums and the in-memory transfer limits', async () => {
    const store = await openStore({ ...SMALL, maxTransferCountOnMessageInMemory: 4 })
    await store.putMessages(Array.from({ length: 10 }, () => ({ topic: 't', body: 'x' })))
    expect(store.getMessage('g', 't', 0, 0, 3).messages).toHaveLength(3)
    expect(store.getMessage('g', 't', 0, 0, 32).messages).toHaveLength(4)
  })

  it('queries by key within a time range, across index file rolls', async () => {
    const store = await openStore()
    const results = await store.putMessages(
      Array.from({ length: 600 }, (_, i) => ({ topic: 't', queueId: i % 2, body: `b${i}`, keys: [`k${i % 50}`] })),
    )
    expect(store.stats().indexFileCount).toBeGreaterThan(1)
    const found = store.queryMessage('t', 'k7', 64, 0, Date.now() + 1000)
    expect(found.messages.map((m) => m.body.toString())).toEqual(Array.from({ length: 12 }, (_, j) => `b${7 + 50 * j}`))
    expect(store.queryMessage('t', 'k7', 3, 0, Date.now() + 1000).messages).toHaveLength(3)
    expect(store.queryMessage('other', 'k7', 64, 0, Date.now() + 1000).messages).toHaveLength(0)
    const first = results[0].storeTimestamp
    expect(store.queryMessage('t', 'k7', 64, first - 60_000, first - 30_000).messages).toHaveLength(0)
  })

  it('keys that share a hash code do not use up maxNum', async () => {
    const store = await openStore()
    // "Aa" and "BB" have the same Java hash code, so they share index chains.
    await store.putMessages([
      { topic: 't', body: 'a', keys: 'Aa' },
      { topic: 't', body: 'b', keys: 'BB' },
      { topic: 't', body: 'c', keys: 'BB' },
    ])
    expect(store.queryMessage('t', 'Aa', 1, 0, Date.now() + 1000).messages.map((m) => m.body.toString())).toEqual(['a'])
    expect(store.queryMessage('t', 'BB', 1, 0, Date.now() + 1000).messages.map((m) => m.body.toString())).toEqual(['c'])
    expect(store.queryMessage('t', 'BB', 5, 0, Date.now() + 1000).messages.map((m) => m.body.toString())).toEqual(['b', 'c'])
  })

  it('finds the offset nearest a store time', async () => {
    const store = await openStore()
    const first = await store.putMessages(Array.from({ length: 5 }, () => ({ topic: 't', body: 'a' })))
    await new Promise((resolve) => setTimeout(resolve, 30))
    const second = await store.putMessages(Array.from({ length: 5 }, () => ({ topic: 't', body: 'b' })))
    expect(store.getOffsetInQueueByTime('t', 0, second[0].storeTimestamp)).toBeGreaterThanOrEqual(5)
    expect(store.getOffsetInQueueByTime('t', 0, first[0].storeTimestamp)).toBeLessThan(5)
    expect(store.getOffsetInQueueByTime('unknown', 0, Date.now())).toBe(0)
    expect(store.getEarliestMessageTime('t', 0)).toBe(first[0].storeTimestamp)
    expect(store.getMessageStoreTimeStamp('t', 0, 7)).toBe(second[2].storeTimestamp)
    expect(store.getMessageStoreTimeStamp('t', 0, 99)).toBe(-1)
  })
})

describe('MessageStore lifecycle', () => {
  it('keeps everything and the consumer offsets across a clean reopen', async () => {
    let store = await openStore()
    await store.putMessages(Array.from({ length: 50 }, (_, i) => ({ topic: 't', queueId: i % 2, body: `m${i}`, keys: `k${i}` })))
    store.commitOffset('g', 't', 1, 17)
    store = await reopen(store)
    expect(store.stats().lastExitOK).toBe(true)
    expect(store.queryOffset('g', 't', 1)).toBe(17)
    expect(store.queryOffset('g', 't', 0)).toBe(-1)
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(25)
    expect(store.queryMessage('t', 'k33', 8, 0, Date.now() + 1000).messages[0]?.body.toString()).toBe('m33')
    const next = await store.putMessage({ topic: 't', queueId: 1, body: 'after' })
    expect(next.queueOffset).toBe(25)
  })

  it('reads consumer offsets written by RocketMQ with unquoted integer keys', async () => {
    fs.mkdirSync(join(dir, 'config'), { recursive: true })
    fs.writeFileSync(join(dir, 'config', 'consumerOffset.json'), '{"offsetTable":{"t@g":{0:12,1:"34"}}}')
    const store = await openStore()
    expect(store.queryOffset('g', 't', 0)).toBe(12)
    expect(store.queryOffset('g', 't', 1)).toBe(34)
  })

  it('quotes bare integer keys but never rewrites the inside of a string', () => {
    expect(parseLenientJson('{"offsetTable":{"a,5:b@g":{0:1, -1 : 2}}}')).toEqual({ offsetTable: { 'a,5:b@g': { '0': 1, '-1': 2 } } })
    expect(parseLenientJson('{"x":"{1:2}","y":[1,2]}')).toEqual({ x: '{1:2}', y: [1, 2] })
  })

  it('falls back to the .bak copy of the consumer offsets when the file is damaged', async () => {
    let store = await openStore()
    store.commitOffset('g', 't', 0, 5)
    await store.close()
    open.length = 0
    store = await openStore()
    store.commitOffset('g', 't', 0, 6)
    await store.close()
    open.length = 0
    fs.writeFileSync(join(dir, 'config', 'consumerOffset.json'), '{"offsetTa')
    store = await openStore()
    expect(store.queryOffset('g', 't', 0)).toBe(5)
  })

  it('a second process opening the same directory gets a clear LOCKED error', async () => {
    const store = await openStore()
    const result = runNodeScript(
      `
      import { MessageStore } from ${JSON.stringify(distEntry)}
      try { await MessageStore.open(process.argv[2]); console.log('opened') }
      catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }
    `,
      [dir],
    )
    expect(result.status).toBe(0)
    const outcome = JSON.parse(result.stdout)
    expect(outcome.code).toBe('LOCKED')
    expect(outcome.message).toContain('locked by another process')
    expect((await store.putMessage({ topic: 't', body: 'still mine' })).status).toBe('PUT_OK')
  })

  it('a reader holding zero-copy messages while the store closes never crashes (child process)', () => {
    const result = runNodeScript(
      `
      import { MessageStore } from ${JSON.stringify(distEntry)}
      const store = await MessageStore.open(process.argv[2], { mappedFileSizeCommitLog: 65536, copyMessageBody: false })
      await store.putMessages(Array.from({ length: 50 }, (_, i) => ({ topic: 't', body: 'body-' + i })))
      const held = store.getMessage('g', 't', 0, 0, 32).messages
      const before = held[3].body.toString()
      const closing = store.close()
      // Reads while close runs and after it: views become empty, never freed memory.
      const during = held.map((m) => m.body.length)
      await closing
      let errors = 0
      for (const m of held) { try { m.body.readUInt8(0) } catch { errors++ } }
      console.log(JSON.stringify({ before, during: during.length, after: held.map((m) => m.body.length).reduce((a, b) => a + b, 0), errors }))
    `,
      [dir],
    )
    expect(result.signal).toBeNull()
    expect(result.status).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({ before: 'body-3', during: 32, after: 0, errors: 32 })
  })

  it('a closed store answers puts with SERVICE_NOT_AVAILABLE and reads with STORE_CLOSED', async () => {
    const store = await openStore()
    await store.close()
    await store.close()
    expect((await store.putMessage({ topic: 't', body: 'x' })).status).toBe('SERVICE_NOT_AVAILABLE')
    expect(() => store.getMessage('g', 't', 0, 0, 1)).toThrow(expect.objectContaining({ code: 'STORE_CLOSED' }))
    expect(fs.existsSync(join(dir, 'abort'))).toBe(false)
  })

  it('supports await using (Symbol.asyncDispose)', async () => {
    {
      await using store = await MessageStore.open(dir, SMALL)
      await store.putMessage({ topic: 't', body: 'x' })
    }
    const again = await openStore()
    expect(again.getMaxOffsetInQueue('t', 0)).toBe(1)
  })

  it('rejects unknown and invalid options, and the rocketmq preset gives RocketMQ sizes', async () => {
    await expect(MessageStore.open(dir, { mappedFileSizeCommitLg: 1 } as OpenOptions)).rejects.toMatchObject({ code: 'INVALID_OPTION' })
    await expect(MessageStore.open(dir, { flushDiskType: 'SOMETIMES' as 'SYNC_FLUSH' })).rejects.toMatchObject({ code: 'INVALID_OPTION' })
    await expect(MessageStore.open(dir, { maxMessageSize: -1 })).rejects.toMatchObject({ code: 'INVALID_OPTION' })
    const store = await openStore({ preset: 'rocketmq', messageIndexEnable: false })
    expect(store.config.mappedFileSizeCommitLog).toBe(1024 * 1024 * 1024)
    expect(store.config.mappedFileSizeConsumeQueue).toBe(6_000_000)
    expect(store.config.maxHashSlotNum).toBe(5_000_000)
    expect(store.config.maxIndexNum).toBe(20_000_000)
  })

  it('SYNC_FLUSH puts resolve once flushed; many concurrent puts share flushes', async () => {
    const store = await openStore({ ...SMALL, flushDiskType: 'SYNC_FLUSH' })
    const results = await Promise.all(Array.from({ length: 64 }, (_, i) => store.putMessage({ topic: 't', queueId: i % 4, body: `m${i}` })))
    expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
    expect(store.getMaxPhyOffset()).toBe(results[63].wroteOffset + results[63].wroteBytes)
  })

  it('ASYNC_FLUSH flushes in the background: the flushed offset catches up without a close', async () => {
    const store = await openStore({ ...SMALL, flushIntervalCommitLog: 10, flushCommitLogThoroughInterval: 10 })
    // The queues exist first: a put that makes a new queue's file waits for it, and a flush may run meanwhile.
    await store.putMessages(Array.from({ length: 20 }, (_, i) => ({ topic: 't', body: `w${i}` })))
    const results = await store.putMessages(Array.from({ length: 20 }, (_, i) => ({ topic: 't', body: `m${i}` })))
    const end = results[19].wroteOffset + results[19].wroteBytes
    expect(store.stats().commitLogFlushedOffset).toBeLessThan(end)
    for (let i = 0; i < 200 && store.stats().commitLogFlushedOffset < end; i++) await new Promise((r) => setTimeout(r, 10))
    expect(store.stats().commitLogFlushedOffset).toBe(end)
  })

  it('close writes the checkpoint: the last store time and the last dispatched store time', async () => {
    const store = await openStore()
    const results = await store.putMessages(Array.from({ length: 5 }, (_, i) => ({ topic: 't', body: `m${i}` })))
    expect(store.getEarliestMessageTime()).toBe(results[0].storeTimestamp)
    await store.close()
    const checkpoint = fs.readFileSync(join(dir, 'checkpoint'))
    expect(checkpoint.length).toBe(4096)
    expect(Number(checkpoint.readBigInt64BE(0))).toBe(results[4].storeTimestamp)
    expect(Number(checkpoint.readBigInt64BE(8))).toBe(results[4].storeTimestamp)
  })

  it('with the transient store pool, messages become readable once committed', async () => {
    const store = await openStore({ ...SMALL, transientStorePoolEnable: true, transientStorePoolSize: 2, commitIntervalCommitLog: 20 })
    await store.putMessages(Array.from({ length: 10 }, (_, i) => ({ topic: 't', body: `m${i}` })))
    for (let i = 0; i < 100 && store.getMaxOffsetInQueue('t', 0) < 10; i++) await new Promise((r) => setTimeout(r, 10))
    expect(store.getMessage('g', 't', 0, 0, 32).messages.map((m) => m.body.toString())).toEqual(
      Array.from({ length: 10 }, (_, i) => `m${i}`),
    )
    const again = await reopen(store)
    expect(again.getMaxOffsetInQueue('t', 0)).toBe(10)
  })
})

describe('dispatch', () => {
  it('writes the same consume queues and index when dispatching from puts as when rebuilding from the commit log', async () => {
    const store = await openStore()
    const messages: Message[] = []
    for (let i = 0; i < 400; i++) {
      const m: Message = { topic: `t${i % 3}`, queueId: i % 2, body: Buffer.alloc(100 + (i % 7) * 300, i) }
      if (i % 2 === 0) m.tags = i % 4 === 0 ? 'even' : ''
      if (i % 3 === 0) m.keys = [`k${i}`, `shared`]
      if (i % 5 === 0) m.properties = { UNIQ_KEY: `u${i}`, TAGS: 'fromProps', KEYS: 'p1 p2' }
      if (i % 11 === 0) m.sysFlag = [0x4, 0x8, 0xc][i % 3]
      messages.push(m)
    }
    for (let i = 0; i < messages.length; i += 37) await store.putMessages(messages.slice(i, i + 37))
    await store.close()
    open.length = 0
    const snapshot = (sub: string) =>
      fs
        .readdirSync(join(dir, sub), { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => join(e.parentPath, e.name))
        .sort()
        .map((path) => fs.readFileSync(path))
    const consumeQueues = snapshot('consumequeue')
    const index = snapshot('index')
    expect(consumeQueues.length).toBeGreaterThan(3)
    expect(index.length).toBeGreaterThan(1)
    // Rebuild both from the commit log alone: an abnormal recovery from the first file.
    fs.rmSync(join(dir, 'consumequeue'), { recursive: true })
    fs.rmSync(join(dir, 'index'), { recursive: true })
    fs.rmSync(join(dir, 'checkpoint'))
    fs.writeFileSync(join(dir, 'abort'), '')
    const rebuilt = await openStore()
    expect(rebuilt.stats().lastExitOK).toBe(false)
    await rebuilt.close()
    open.length = 0
    expect(snapshot('consumequeue')).toEqual(consumeQueues)
    expect(snapshot('index')).toEqual(index)
  })
})

describe('consume()', () => {
  it('tails a queue: yields what is there, waits for arrivals, ends on abort', async () => {
    const store = await openStore()
    await store.putMessages([
      { topic: 't', body: 'a' },
      { topic: 't', body: 'b' },
    ])
    const controller = new AbortController()
    const seen: string[] = []
    const subscription = store.consume({ group: 'g', topic: 't', queueId: 0, from: 'earliest', signal: controller.signal })
    const done = (async () => {
      for await (const m of subscription) {
        seen.push(m.body.toString())
        if (seen.length === 3) controller.abort()
      }
    })()
    await new Promise((r) => setTimeout(r, 30))
    expect(seen).toEqual(['a', 'b'])
    await store.putMessage({ topic: 't', body: 'c' })
    await done
    expect(seen).toEqual(['a', 'b', 'c'])
    expect(subscription.position).toBe(3)
    subscription.commit()
    expect(store.queryOffset('g', 't', 0)).toBe(3)
  })

  it('starts from the committed offset, filters tags, auto-commits, and ends when the store closes', async () => {
    const store = await MessageStore.open(dir, SMALL)
    await store.putMessages(['x', 'y', 'x', 'y', 'x'].map((tags, i) => ({ topic: 't', body: `${i}`, tags })))
    store.commitOffset('g', 't', 0, 1)
    const seen: string[] = []
    const done = (async () => {
      for await (const m of store.consume({ group: 'g', topic: 't', queueId: 0, tags: 'x', autoCommit: true })) seen.push(m.body.toString())
    })()
    await new Promise((r) => setTimeout(r, 30))
    expect(seen).toEqual(['2', '4'])
    expect(store.queryOffset('g', 't', 0)).toBe(5)
    await store.close()
    await done
  })
})

describe('model check (fast-check)', () => {
  type Op =
    | { kind: 'put'; queueId: number; size: number; tag: string }
    | { kind: 'reopen' }
    | { kind: 'get'; queueId: number; from: number }
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('put' as const),
        queueId: fc.integer({ min: 0, max: 2 }),
        size: fc.integer({ min: 0, max: 3000 }),
        tag: fc.constantFrom('a', 'b'),
      }),
    },
    { weight: 1, arbitrary: fc.constant({ kind: 'reopen' as const }) },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('get' as const),
        queueId: fc.integer({ min: 0, max: 2 }),
        from: fc.integer({ min: 0, max: 40 }),
      }),
    },
  )

  it('random put / get / reopen sequences agree with an in-memory model', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 60 }), async (ops) => {
        fs.rmSync(dir, { recursive: true, force: true })
        let store = await MessageStore.open(dir, SMALL)
        const model: { body: Buffer; tag: string }[][] = [[], [], []]
        let counter = 0
        try {
          for (const op of ops) {
            if (op.kind === 'put') {
              const body = Buffer.alloc(op.size, counter++ & 0xff)
              const r = await store.putMessage({ topic: 'model', queueId: op.queueId, body, tags: op.tag })
              expect(r.status).toBe('PUT_OK')
              expect(r.queueOffset).toBe(model[op.queueId].length)
              model[op.queueId].push({ body, tag: op.tag })
            } else if (op.kind === 'reopen') {
              await store.close()
              store = await MessageStore.open(dir, SMALL)
            } else {
              const expected = model[op.queueId].slice(op.from, op.from + 8)
              const got = store.getMessage('g', 'model', op.queueId, op.from, 8)
              expect(got.messages.map((m) => [m.tags, m.body.length, m.body[0]])).toEqual(
                expected.map((e) => [e.tag, e.body.length, e.body[0]]),
              )
              expect(got.maxOffset).toBe(model[op.queueId].length)
            }
          }
          for (let q = 0; q < 3; q++) expect(store.getMaxOffsetInQueue('model', q)).toBe(model[q].length)
        } finally {
          await store.close()
        }
      }),
      { numRuns: 25 },
    )
  })
})
