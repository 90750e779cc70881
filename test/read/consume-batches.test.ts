// consume() reads its batch size at a time: RocketMQ's per-pull message count
// (maxTransferCountOnMessageInMemory) caps getMessage only; the byte limit caps both. The messages
// of one read share the buffer behind their bodies, which shows where each read ended.
import { afterEach, describe, expect, it } from 'vitest'

import { MessageStore, type MessageStoreReader, type OpenOptions } from '../../lib/store/message-store.js'
import type { MessageExt, Subscription } from '../../lib/store/types.js'
import { tempDir } from '../helpers/tmp.js'

const stores: { close(): Promise<void> }[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
})

async function storeWith(count: number, bodyBytes: number, options: OpenOptions = {}): Promise<{ dir: string; store: MessageStore }> {
  const dir = tempDir('mqstore-consume-batches-')
  const store = (await MessageStore.open(dir, options)) as MessageStore
  stores.push(store)
  const body = Buffer.alloc(bodyBytes, 7)
  for (let from = 0; from < count; from += 100) {
    const batch = Array.from({ length: Math.min(100, count - from) }, () => ({ topic: 'orders', queueId: 0, body }))
    const results = await store.putMessages(batch)
    expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
  }
  return { dir, store }
}

/** Consumes `count` messages and returns how many each read served (runs sharing a body buffer). */
async function readSizes(subscription: Subscription, count: number): Promise<{ sizes: number[]; messages: MessageExt[] }> {
  const messages: MessageExt[] = []
  for await (const m of subscription) {
    messages.push(m)
    if (messages.length === count) break
  }
  const sizes: number[] = []
  for (let i = 0; i < messages.length; i++) {
    if (i > 0 && messages[i].body.buffer === messages[i - 1].body.buffer) sizes[sizes.length - 1]++
    else sizes.push(1)
  }
  return { sizes, messages }
}

describe('consume() batch size', () => {
  it('reads 128 messages at a time by default, and batchSize when given, where getMessage stops at 32', async () => {
    const { store } = await storeWith(300, 100)
    const byDefault = await readSizes(store.consume({ group: 'g', topic: 'orders', queueId: 0, from: 'earliest' }), 300)
    expect(byDefault.sizes).toEqual([128, 128, 44])
    expect(byDefault.messages.map((m) => m.queueOffset)).toEqual(Array.from({ length: 300 }, (_, i) => i))
    const fifties = await readSizes(store.consume({ group: 'g', topic: 'orders', queueId: 0, from: 'earliest', batchSize: 50 }), 300)
    expect(fifties.sizes).toEqual([50, 50, 50, 50, 50, 50])
    // A pull keeps RocketMQ's count: 32 messages however many are asked for.
    const pulled = store.getMessage('g', 'orders', 0, 0, 100)
    expect(pulled.status).toBe('FOUND')
    expect(pulled.messages).toHaveLength(32)
  })

  it('stops a read at maxTransferBytesOnMessageInMemory, whatever the batch size', async () => {
    const { store } = await storeWith(200, 4 * 1024)
    const { sizes, messages } = await readSizes(
      store.consume({ group: 'g', topic: 'orders', queueId: 0, from: 'earliest', batchSize: 1000 }),
      200,
    )
    // Records of about 4.2 KiB: some 60 to a read of at most 256 KiB (RocketMQ's default).
    const perRead = Math.floor((256 * 1024) / messages[0].storeSize)
    expect(perRead).toBeGreaterThan(32)
    expect(sizes).toEqual([perRead, perRead, perRead, 200 - 3 * perRead])
  })

  it('a read-only opener reads the same batches (its read count in stats)', async () => {
    const { dir } = await storeWith(300, 100)
    const reader = (await MessageStore.open(dir, { readOnly: true })) as MessageStoreReader
    stores.push(reader)
    const before = reader.stats().getMessageTimes
    const { messages } = await readSizes(reader.consume({ group: 'g', topic: 'orders', queueId: 0, from: 'earliest' }), 300)
    expect(messages.map((m) => m.queueOffset)).toEqual(Array.from({ length: 300 }, (_, i) => i))
    expect(reader.stats().getMessageTimes - before).toBe(3)
    expect(reader.getMessage('g', 'orders', 0, 0, 100).messages).toHaveLength(32)
  })
})
