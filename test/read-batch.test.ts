// A read is one pass: records are located and checked where they lie, then copied with their body
// CRCs in one native call, into a private buffer (the fields) and the buffer bodies are views of.
// What a consumer gets is its own: the bytes behind a body hold this read's bodies and nothing
// else (a body that fails its CRC, or a record the read's filter refused, is zero or absent), and
// a message keeps its fields whatever the consumer does with the body's buffer.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import type { MessageExt } from '../lib/store/types.js'
import { fieldsAndBodyOf, fieldsOf } from './helpers/message-fields.js'
import { tempDir } from './helpers/tmp.js'

const OPTIONS: OpenOptions = { mappedFileSizeCommitLog: 64 * 1024 }
const COUNT = 12
const bodyOf = (i: number) => Buffer.from(`body-${String(i).padStart(3, '0')}-`.padEnd(80, '~'))

let dir: string
const open: MessageStore[] = []

async function openStore(options: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, { ...OPTIONS, ...options })
  open.push(store)
  return store
}

beforeEach(() => {
  dir = tempDir('mqstore-read-batch-')
})
afterEach(async () => {
  for (const store of open.splice(0)) await store.close()
})

async function fill(store: MessageStore, count = COUNT, tags?: (i: number) => string): Promise<void> {
  for (let i = 0; i < count; i++) {
    const r = await store.putMessage({
      topic: 't',
      queueId: 0,
      body: bodyOf(i),
      keys: [`k${i}`],
      tags: tags?.(i),
      properties: { n: String(i) },
    })
    expect(r.status).toBe('PUT_OK')
  }
}

describe('the bytes behind a body', () => {
  it('hold exactly the bodies of the read, end to end', async () => {
    const store = await openStore()
    await fill(store)
    const got = store.getMessage('g', 't', 0, 0, 32).messages
    expect(got.length).toBe(COUNT)
    const buffer = Buffer.from(got[0].body.buffer)
    expect(buffer.equals(Buffer.concat(got.map((m) => m.body)))).toBe(true)
    expect(got.every((m) => m.body.buffer === got[0].body.buffer)).toBe(true)
    // No header, topic or property bytes of any record: the fields live elsewhere.
    expect(buffer.indexOf('k1')).toBe(-1)
  })

  it('a body that fails its CRC is zeroed in them, and the other bodies are intact', async () => {
    const store = await openStore()
    await fill(store)
    await store.close()
    open.length = 0
    const file = join(dir, 'commitlog', '00000000000000000000')
    const bytes = fs.readFileSync(file)
    const at = bytes.indexOf(bodyOf(4))
    bytes[at + 20] ^= 0x01
    fs.writeFileSync(file, bytes)
    const again = await openStore()
    const r = again.getMessage('g', 't', 0, 0, 32)
    expect(r.bodyCrcFailures).toBe(1)
    expect(r.messages.map((m) => m.queueOffset)).toEqual([0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11])
    const buffer = Buffer.from(r.messages[0].body.buffer)
    expect(buffer.length).toBe(COUNT * 80)
    // Where body 4 would be: zeros; no byte of the damaged body is reachable.
    expect(buffer.subarray(4 * 80, 5 * 80).every((b) => b === 0)).toBe(true)
    expect(buffer.indexOf('body-004')).toBe(-1)
    expect(r.messages.every((m) => m.body.equals(bodyOf(m.queueOffset)))).toBe(true)
  })

  it('records the tag filter refuses (a tag whose hash collides) are not copied at all', async () => {
    const store = await openStore()
    // "Aa" and "BB" have the same Java hash: the consume queue cannot tell them apart.
    await fill(store, COUNT, (i) => (i % 2 === 0 ? 'Aa' : 'BB'))
    const r = store.getMessage('g', 't', 0, 0, 32, 'Aa')
    expect(r.messages.map((m) => m.queueOffset)).toEqual([0, 2, 4, 6, 8, 10])
    expect(r.messages.every((m) => m.tags === 'Aa')).toBe(true)
    expect(r.nextBeginOffset).toBe(COUNT)
    const buffer = Buffer.from(r.messages[0].body.buffer)
    expect(buffer.length).toBe(6 * 80)
    expect(buffer.indexOf('body-001')).toBe(-1)
  })

  it('queryMessage serves only the key asked for when another key shares its hash', async () => {
    const store = await openStore()
    await store.putMessage({ topic: 't', body: 'aa', keys: ['Aa'] })
    await store.putMessage({ topic: 't', body: 'bb', keys: ['x', 'BB'] })
    await store.putMessage({ topic: 'u', body: 'other topic', keys: ['Aa'] })
    const r = store.queryMessage('t', 'Aa', 8)
    expect(r.messages.map((m) => m.body.toString())).toEqual(['aa'])
    expect(Buffer.from(r.messages[0].body.buffer).toString()).toBe('aa')
    expect(store.queryMessage('t', 'BB', 8).messages.map((m) => m.body.toString())).toEqual(['bb'])
    expect(store.queryMessage('u', 'Aa', 8).messages.map((m) => m.body.toString())).toEqual(['other topic'])
  })

  it('queryMessage keeps the newest maxNum matches, oldest first', async () => {
    const store = await openStore()
    for (let i = 0; i < 6; i++) await store.putMessage({ topic: 't', body: `v${i}`, keys: ['same'] })
    const r = store.queryMessage('t', 'same', 3)
    expect(r.messages.map((m) => m.body.toString())).toEqual(['v3', 'v4', 'v5'])
    // The three not served are not reachable either.
    expect(Buffer.from(r.messages[0].body.buffer).indexOf('v0')).toBe(-1)
  })
})

describe('a message handed out', () => {
  it('keeps every field after the consumer writes over the whole buffer behind its body', async () => {
    const store = await openStore()
    await fill(store)
    const got = store.getMessage('g', 't', 0, 0, 32).messages
    const expected = got.map(fieldsOf)
    // Read lazily after the write: nothing was decoded before it.
    const fresh = store.getMessage('g', 't', 0, 0, 32).messages
    new Uint8Array(fresh[0].body.buffer).fill(0xff)
    expect(fresh.map(fieldsOf)).toEqual(expected)
    expect(fresh.every((m) => m.body.every((b) => b === 0xff))).toBe(true)
    // The store and other reads are untouched.
    expect(got.every((m) => m.body.equals(bodyOf(m.queueOffset)))).toBe(true)
    expect(store.getMessage('g', 't', 0, 0, 32).messages.every((m) => m.body.equals(bodyOf(m.queueOffset)))).toBe(true)
  })

  it('keeps every field after the buffer behind its body is transferred away', async () => {
    const store = await openStore()
    await fill(store)
    const expected = store.getMessage('g', 't', 0, 0, 32).messages.map(fieldsOf)
    const got = store.getMessage('g', 't', 0, 0, 32).messages
    const buffer = got[0].body.buffer as ArrayBuffer
    const moved = structuredClone(buffer, { transfer: [buffer] })
    expect(buffer.byteLength).toBe(0)
    expect(Buffer.from(moved).subarray(0, 80).equals(bodyOf(0))).toBe(true)
    // Bodies first made after the transfer are empty, like views of any detached buffer; the
    // other fields still read what was stored.
    expect(got[1].body.length).toBe(0)
    expect(got.map(fieldsOf)).toEqual(expected)
    expect(store.getMessage('g', 't', 0, 0, 32).messages.every((m) => m.body.equals(bodyOf(m.queueOffset)))).toBe(true)
  })

  it('reads every field as a zero-copy read decodes it, IPv6 hosts and empty bodies included', async () => {
    // The private copy holds each record without its body: the fields after the body, and the
    // hosts and msgId, must still be read from the right places.
    const put = async (store: MessageStore) => {
      for (let i = 0; i < 6; i++) {
        const r = await store.putMessage({
          topic: 't',
          queueId: 0,
          body: Buffer.alloc(i * 33, i),
          keys: [`k${i}`, 'both'],
          tags: `tag${i}`,
          properties: { n: `é${i}` },
          bornHost: i % 2 === 0 ? '10.1.2.3:99' : '[2001:db8::1]:4567',
        })
        expect(r.status).toBe('PUT_OK')
      }
    }
    const read = (store: MessageStore) => [
      ...store.getMessage('g', 't', 0, 0, 32).messages,
      ...store.queryMessage('t', 'both', 32).messages,
    ]
    const copying = await openStore()
    await put(copying)
    const copied = read(copying).map(fieldsAndBodyOf)
    await copying.close()
    open.splice(0)
    const decoded = read(await openStore({ copyMessageBody: false })).map(fieldsAndBodyOf)
    expect(copied.length).toBe(12)
    expect(copied).toEqual(decoded)
    expect(copied[1].bornHost).toEqual({ address: '2001:db8::1', port: 4567 })
    expect(copied[0].body.length).toBe(0)
  })

  it("toJSON after a write into the buffer gives the stored fields and the consumer's body", async () => {
    const store = await openStore()
    await fill(store, 2)
    const [m] = store.getMessage('g', 't', 0, 0, 1).messages
    m.body.fill(0x41)
    const json = JSON.parse(JSON.stringify(m)) as Record<string, unknown>
    expect(json.topic).toBe('t')
    expect(json.keys).toEqual(['k0'])
    expect(Buffer.from((json.body as { data: number[] }).data).toString()).toBe('A'.repeat(80))
  })
})

describe('zero-copy reads (copyMessageBody: false)', () => {
  it('serve bodies in place: views of the commit-log file, no copy of their own', async () => {
    const store = await openStore({ copyMessageBody: false })
    await fill(store)
    for (const got of [
      store.getMessage('g', 't', 0, 0, 32).messages,
      store.queryMessage('t', 'k5', 4, 0, Number.MAX_SAFE_INTEGER).messages,
    ]) {
      expect(got.length).toBeGreaterThan(0)
      for (const m of got) {
        expect(m.body.equals(bodyOf(m.queueOffset))).toBe(true)
        // The buffer behind the body is the whole file's view, not a buffer of the read's bodies.
        expect(m.body.buffer.byteLength).toBeGreaterThanOrEqual(store.getMaxPhyOffset())
        expect(m.body.byteOffset).toBeGreaterThan(m.commitLogOffset)
      }
    }
  })

  for (const checkCRCOnRead of [true, false]) {
    it(`a page written through a view is served from the stored bytes, each such body a copy of its own (checkCRCOnRead: ${checkCRCOnRead})`, async () => {
      const store = await openStore({ copyMessageBody: false, checkCRCOnRead })
      await fill(store)
      const expected = store.getMessage('g', 't', 0, 0, 32).messages.map(fieldsOf)
      const first = store.getMessage('g', 't', 0, 0, 32).messages
      // The whole file through the first body's buffer, fields and all, before any field is read.
      new Uint8Array(first[0].body.buffer).fill(0xff)
      expect(first.map(fieldsOf)).toEqual(expected)
      const again = store.getMessage('g', 't', 0, 0, 32)
      expect(again.bodyCrcFailures).toBe(0)
      expect(again.messages.map(fieldsOf)).toEqual(expected)
      for (const m of again.messages) {
        expect(m.body.equals(bodyOf(m.queueOffset))).toBe(true)
        expect(m.body.buffer.byteLength).toBe(m.body.length)
      }
      // A record put after the page was copied is served as the writer wrote it, not as the copy shows it.
      await fill(store, COUNT + 2)
      const later = store.getMessage('g', 't', 0, COUNT, 32).messages
      expect(later.map((m) => m.queueOffset)).toEqual(Array.from({ length: COUNT + 2 }, (_, i) => COUNT + i))
      expect(later.every((m) => m.body.equals(bodyOf(m.queueOffset - COUNT)))).toBe(true)
      expect(later.map((m) => m.keys)).toEqual(Array.from({ length: COUNT + 2 }, (_, i) => [`k${i}`]))
    })
  }

  it('read the same fields and bodies as copying reads, across commit-log files and with a read limit', async () => {
    const many = 2_000
    const put = async (store: MessageStore) => {
      const batch = Array.from({ length: many }, (_, i) => ({
        topic: 't',
        queueId: i % 3,
        body: bodyOf(i),
        keys: [`k${i}`],
        tags: `tag${i % 7}`,
      }))
      for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
    }
    const readAll = (store: MessageStore) => {
      const seen: { fields: ReturnType<typeof fieldsOf>; body: Buffer }[] = []
      for (let queueId = 0; queueId < 3; queueId++) {
        for (let offset = 0; ; ) {
          const r = store.getMessage('g', 't', queueId, offset, 29)
          if (r.messages.length === 0) break
          for (const m of r.messages) seen.push({ fields: fieldsOf(m), body: Buffer.from(m.body) })
          offset = r.nextBeginOffset
        }
      }
      return seen
    }
    const copying = await openStore()
    await put(copying)
    expect(copying.getMinPhyOffset()).toBe(0)
    // More than two commit-log files: reads of 29 cross from one file into the next.
    expect(copying.getMaxPhyOffset()).toBeGreaterThan(2 * OPTIONS.mappedFileSizeCommitLog!)
    const copied = readAll(copying)
    await copying.close()
    open.splice(0)
    const inPlace = await openStore({ copyMessageBody: false })
    expect(readAll(inPlace)).toEqual(copied)
    expect(copied.length).toBe(many)
    // A read limit (the in-memory count limit is 32) cuts the read, the offsets continue after it.
    const cut = inPlace.getMessage('g', 't', 1, 0, 500)
    expect(cut.messages.length).toBe(32)
    expect(cut.nextBeginOffset).toBe(32)
  })
})

describe('consume()', () => {
  it('hands out the messages of a batch without waiting: each next() is settled within one microtask', async () => {
    const store = await openStore()
    await fill(store)
    const iterator = store.consume({ group: 'g', topic: 't', queueId: 0, from: 'earliest' })[Symbol.asyncIterator]()
    expect((await iterator.next()).value?.queueOffset).toBe(0)
    for (let i = 1; i < COUNT; i++) {
      let value: MessageExt | undefined
      void iterator.next().then((r) => {
        value = r.value
      })
      await Promise.resolve()
      expect(value?.queueOffset).toBe(i)
    }
    await iterator.return?.()
  })

  it('then waits for an arrival, and hands it out once put', async () => {
    const store = await openStore()
    await fill(store, 2)
    const iterator = store.consume({ group: 'g', topic: 't', queueId: 0, from: 'earliest' })[Symbol.asyncIterator]()
    expect((await iterator.next()).value?.queueOffset).toBe(0)
    expect((await iterator.next()).value?.queueOffset).toBe(1)
    const pending = iterator.next()
    let settled = false
    void pending.then(() => {
      settled = true
    })
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(settled).toBe(false)
    await store.putMessage({ topic: 't', queueId: 0, body: bodyOf(2) })
    const next = await pending
    expect(next.value?.queueOffset).toBe(2)
    expect(next.value?.body.equals(bodyOf(2))).toBe(true)
    await iterator.return?.()
  })

  it('over every queue of a topic: hands out what the queues already read without waiting, queues in turn', async () => {
    const store = await openStore()
    await store.createTopic('multi', { queues: 2 })
    for (let i = 0; i < 8; i++) await store.putMessage({ topic: 'multi', queueId: i % 2, body: bodyOf(i) })
    const iterator = store.consume({ group: 'g', topic: 'multi', from: 'earliest' })[Symbol.asyncIterator]()
    const seen: string[] = []
    const first = await iterator.next()
    seen.push(`${first.value?.queueId}:${first.value?.queueOffset}`)
    // The first next() read both queues' batches: the other seven are settled at once.
    let settled = 0
    for (let i = 1; i < 8; i++) {
      void iterator.next().then((r) => {
        settled++
        seen.push(`${r.value?.queueId}:${r.value?.queueOffset}`)
      })
      await Promise.resolve()
    }
    await Promise.resolve()
    expect(settled).toBe(7)
    // Queues take turns: neither batch is handed out whole before the other's.
    const queues = seen.map((s) => s.split(':')[0])
    expect(queues.every((q, i) => i === 0 || q !== queues[i - 1])).toBe(true)
    expect([...seen].sort()).toEqual(['0:0', '0:1', '0:2', '0:3', '1:0', '1:1', '1:2', '1:3'])
    await iterator.return?.()
  })
})
