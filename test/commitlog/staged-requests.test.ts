// SYNC_FLUSH stages each put's record with a dispatch request, dispatched once a group commit has
// written the record; the request objects are then filled in again for later records. Each
// message must still reach its own queue unit and index entries, also when dispatch stops at a
// new queue (it then reads the records from the log) and when puts wait in many groups.
import { describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/index.js'
import { blankDispatchRequest } from '../../lib/store/commitlog/record.js'
import { StagedRequests } from '../../lib/store/commitlog/staged-requests.js'
import { tempDir } from '../helpers/tmp.js'

const PRODUCERS = 8
const PUTS_EACH = 40
const TOPICS = 5

function topicOf(p: number, i: number): string {
  return `staged-${(p + i) % TOPICS}`
}

describe('staged dispatch requests (SYNC_FLUSH)', () => {
  it('gives every durable put its own queue unit, tag and keys across many group commits and new queues', async () => {
    const dir = tempDir('mqstore-staged-')
    const store = await MessageStore.open(dir, { flushDiskType: 'SYNC_FLUSH' })
    try {
      // Producers that each await their put, over topics made as the puts go (dispatch waits
      // for a new queue's first file, and reads the records after it back from the log).
      await Promise.all(
        Array.from({ length: PRODUCERS }, async (_, p) => {
          for (let i = 0; i < PUTS_EACH; i++) {
            const put = await store.putMessage({
              topic: topicOf(p, i),
              queueId: i % 2,
              tags: `t${i % 3}`,
              keys: [`key-${p}-${i}`, `alt-${p}-${i}`],
              body: Buffer.from(`body-${p}-${i}`),
            })
            expect(put.status).toBe('PUT_OK')
          }
        }),
      )
      expect(store.stats().groupCommitTimesTotal).toBeGreaterThan(5)

      for (let p = 0; p < PRODUCERS; p++) {
        for (let i = 0; i < PUTS_EACH; i++) {
          for (const key of [`key-${p}-${i}`, `alt-${p}-${i}`]) {
            const found = store.queryMessage(topicOf(p, i), key, 4)
            expect(
              found.messages.map((m) => m.body.toString()),
              key,
            ).toEqual([`body-${p}-${i}`])
          }
        }
      }
      // Each queue holds its own messages once, in order, and a tag filter finds its tag's alone.
      let total = 0
      for (let t = 0; t < TOPICS; t++) {
        for (let q = 0; q < 2; q++) {
          const topic = `staged-${t}`
          const got = store.getMessage('g', topic, q, 0, 1000)
          expect(got.messages.map((m) => m.queueOffset)).toEqual(got.messages.map((_, k) => k))
          for (const m of got.messages) {
            expect(m.topic).toBe(topic)
            expect(m.queueId).toBe(q)
            const [, p, i] = m.body.toString().split('-').map(Number)
            expect(topicOf(p, i)).toBe(topic)
            expect(m.tags).toBe(`t${i % 3}`)
            expect(m.keys).toEqual([`key-${p}-${i}`, `alt-${p}-${i}`])
          }
          const tagged = store.getMessage('g', topic, q, 0, 1000, { tags: ['t1'] })
          const ones = got.messages.filter((m) => m.tags === 't1').map((m) => m.queueOffset)
          expect((tagged.messages ?? []).map((m) => m.queueOffset)).toEqual(ones)
          total += got.messages.length
        }
      }
      expect(total).toBe(PRODUCERS * PUTS_EACH)
    } finally {
      await store.close()
    }
  })

  it('hands out a request once dispatch is done with it, without the message strings it held', () => {
    const staged = new StagedRequests()
    const request = blankDispatchRequest()
    request.keys = 'k1 k2'
    request.uniqKey = 'U1'
    staged.add(request, -1)
    expect(staged.spareRequest()).toBeNull()
    let seen: unknown[] = []
    let blanks: number[] = []
    staged.take((requests, blankOffsets) => {
      seen = [...requests]
      blanks = [...blankOffsets]
      // While dispatch runs, the request is offered to no one else.
      expect(staged.spareRequest()).toBeNull()
    })
    expect(seen).toEqual([request])
    expect(blanks).toEqual([-1])
    const again = staged.spareRequest()
    expect(again).toBe(request)
    expect(again?.keys).toBeUndefined()
    expect(again?.uniqKey).toBeUndefined()
    expect(staged.spareRequest()).toBeNull()
    // Nothing staged since: nothing handed over. Dropped requests are not offered again.
    staged.take(() => expect.unreachable('no requests were staged'))
    staged.add(blankDispatchRequest(), 7)
    staged.drop()
    staged.take(() => expect.unreachable('the staged requests were dropped'))
    expect(staged.spareRequest()).toBeNull()
  })
})
