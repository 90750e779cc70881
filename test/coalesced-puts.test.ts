// Single SYNC_FLUSH puts made in one turn go as one batch (lib/store/coalesced-puts.ts): each put
// keeps its own answer, and no put overtakes an earlier one, whatever path the later one takes.
import { describe, expect, it } from 'vitest'

import { CoalescedPuts } from '../lib/store/coalesced-puts.js'
import { PutMessageResult } from '../lib/store/commitlog/put-message-result.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import type { Message } from '../lib/store/types.js'
import { tempDir } from './helpers/tmp.js'

const SYNC: OpenOptions = { flushDiskType: 'SYNC_FLUSH', mappedFileSizeCommitLog: 1 << 20 }

function message(body: string, topic = 'CoalescedTopic'): Message {
  return { topic, queueId: 0, body: Buffer.from(body) }
}

/** A put alone that a test of the batch never expects. */
const alone = (): Promise<PutMessageResult> => Promise.reject(new Error('put alone'))

/** The bodies of queue 0 of `topic`, in queue order. */
function bodiesIn(store: MessageStore, topic = 'CoalescedTopic'): string[] {
  const bodies: string[] = []
  for (let offset = 0; ; ) {
    const got = store.getMessage('g', topic, 0, offset, 32)
    if (got.status !== 'FOUND') return bodies
    for (const m of got.messages) bodies.push(Buffer.from(m.body).toString())
    offset = got.nextBeginOffset
  }
}

describe('coalesced puts', () => {
  it('answers each gathered put from one batch put in a microtask, in the order they were made', async () => {
    const batches: string[][] = []
    const puts = new CoalescedPuts(async (messages) => {
      batches.push(messages.map((m) => String(m.body)))
      return messages.map((_, i) => new PutMessageResult('PUT_OK', i * 100, 100, i, 1))
    }, alone)
    const answers = [puts.add(message('a')), puts.add(message('b')), puts.add(message('c'))]
    expect(batches).toEqual([])
    const results = await Promise.all(answers)
    expect(batches).toEqual([['a', 'b', 'c']])
    expect(results.map((r) => r.queueOffset)).toEqual([0, 1, 2])
  })

  it('puts at once what a direct flush finds, and the microtask then has nothing left to put', async () => {
    const batches: number[] = []
    const puts = new CoalescedPuts(async (messages) => {
      batches.push(messages.length)
      return messages.map(() => new PutMessageResult('PUT_OK', 0, 1, 0, 1))
    }, alone)
    const first = puts.add(message('a'))
    puts.flush()
    expect(batches).toEqual([1])
    const second = puts.add(message('b'))
    await Promise.all([first, second])
    expect(batches).toEqual([1, 1])
    puts.flush()
    expect(batches).toEqual([1, 1])
  })

  it("rejects every put of a batch whose put rejected, with that batch's error", async () => {
    const puts = new CoalescedPuts(() => Promise.reject(new Error('boom')), alone)
    const answers = [puts.add(message('a')), puts.add(message('b'))]
    for (const answer of answers) await expect(answer).rejects.toThrow('boom')
  })

  it('a SYNC_FLUSH store answers every put of one turn in call order, counting each in the group commit stats', async () => {
    const store = await MessageStore.open(tempDir(), SYNC)
    try {
      await store.putMessage(message('warm'))
      const before = store.stats()
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.putMessage(message(`m${i}`))))
      const after = store.stats()
      expect(results.map((r) => r.status)).toEqual(results.map(() => 'PUT_OK'))
      expect(results.map((r) => r.queueOffset)).toEqual(results.map((_, i) => i + 1))
      for (let i = 1; i < results.length; i++) expect(results[i].wroteOffset).toBeGreaterThan(results[i - 1].wroteOffset)
      expect(after.groupCommitRequestsTotal - before.groupCommitRequestsTotal).toBe(50)
      expect(bodiesIn(store)).toEqual(['warm', ...results.map((_, i) => `m${i}`)])
    } finally {
      await store.close()
    }
  })

  it('no put overtakes a gathered one: a batch put, and a put that does not wait, go after it', async () => {
    const store = await MessageStore.open(tempDir(), SYNC)
    try {
      const answers = [
        store.putMessage(message('a')),
        store.putMessage(message('b')),
        store.putMessages([message('c')]).then((r) => r[0]),
        store.putMessage({ ...message('d'), properties: { WAIT: 'false' } }),
        store.putMessage(message('e')),
      ]
      const results = await Promise.all(answers)
      expect(results.map((r) => r.status)).toEqual(['PUT_OK', 'PUT_OK', 'PUT_OK', 'PUT_OK', 'PUT_OK'])
      expect(results.map((r) => r.queueOffset)).toEqual([0, 1, 2, 3, 4])
      expect(bodiesIn(store)).toEqual(['a', 'b', 'c', 'd', 'e'])
    } finally {
      await store.close()
    }
  })

  it('a put made in the same turn as close is appended before the close and is there after a reopen', async () => {
    const dir = tempDir()
    const store = await MessageStore.open(dir, SYNC)
    const answer = store.putMessage(message('last'))
    const closed = store.close()
    expect((await answer).status).toBe('PUT_OK')
    await closed
    const reopened = await MessageStore.open(dir, SYNC)
    try {
      expect(bodiesIn(reopened)).toEqual(['last'])
    } finally {
      await reopened.close()
    }
  })

  it('a message of the wrong shape or with unreadable properties rejects alone and an illegal one fails alone; the others of the turn are put', async () => {
    const store = await MessageStore.open(tempDir(), SYNC)
    try {
      const good = store.putMessage(message('ok1'))
      const wrongShape = store.putMessage({ topic: 'CoalescedTopic', queueId: 0, body: 42 } as unknown as Message)
      const illegal = store.putMessage(message('bad', 'no spaces allowed'))
      const unreadable = store.putMessage(
        Object.defineProperty(message('unreadable'), 'properties', {
          get() {
            throw new Error('properties cannot be read')
          },
        }),
      )
      const good2 = store.putMessage(message('ok2'))
      await expect(wrongShape).rejects.toThrow(TypeError)
      await expect(unreadable).rejects.toThrow('properties cannot be read')
      expect((await illegal).status).toBe('MESSAGE_ILLEGAL')
      expect([(await good).status, (await good2).status]).toEqual(['PUT_OK', 'PUT_OK'])
      expect(bodiesIn(store)).toEqual(['ok1', 'ok2'])
    } finally {
      await store.close()
    }
  })
})
