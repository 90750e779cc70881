// The queue-ends file (lib/store/queue/queue-ends.ts): each queue's end at a clean close, checked
// when a deferred queue is opened on first use (docs/recovery.md, Q6 for one queue). Damage is done
// to the real files of a closed store.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import {
  decodeQueueEnds,
  encodeQueueEnds,
  QueueEnds,
  type QueueEndsSeal,
  readQueueEndsFile,
  writeQueueEndsFile,
} from '../lib/store/queue/queue-ends.js'
import { tempDir } from './helpers/tmp.js'

const CQ_FILE = 20 * 50
const OPTIONS: OpenOptions = { mappedFileSizeCommitLog: 256 * 1024, mappedFileSizeConsumeQueue: CQ_FILE }
const TOPICS = ['ends-a', 'ends-b']
const QUEUES = 3
/** Units per queue: more than one consume-queue file (50 units each). */
const PER_QUEUE = 70

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-queueends-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

const SEAL: QueueEndsSeal = {
  endOffset: 123_456,
  lastRecordOffset: 123_000,
  queueCount: 3,
  queueUnitSum: 42,
  physicMsgTimestamp: 1_700_000_000_000,
  logicsMsgTimestamp: 1_700_000_000_001,
  indexMsgTimestamp: 1_700_000_000_002,
}

function sampleEnds(): QueueEnds {
  const ends = new QueueEnds()
  ends.set('a', 0, 10)
  ends.set('a', 7, 2 ** 40)
  ends.set('b%RETRY%x', 2_147_483_647, 0)
  return ends
}

describe('encoding', () => {
  it('a table decodes to the same ends and seal', () => {
    const decoded = decodeQueueEnds(encodeQueueEnds(SEAL, sampleEnds()))
    expect(decoded?.seal).toEqual(SEAL)
    expect([...(decoded?.ends.entries() ?? [])]).toEqual([...sampleEnds().entries()])
    expect(decoded?.ends.get('a', 7)).toBe(2 ** 40)
    expect(decoded?.ends.get('a', 1)).toBeNull()
  })

  it('a flipped byte anywhere, or a cut file, is not a table', () => {
    const bytes = encodeQueueEnds(SEAL, sampleEnds())
    for (let at = 0; at < bytes.length; at++) {
      const damaged = Buffer.from(bytes)
      damaged[at] ^= 0x10
      expect(decodeQueueEnds(damaged), `flip at ${at}`).toBeNull()
    }
    expect(decodeQueueEnds(bytes.subarray(0, bytes.length - 1))).toBeNull()
    expect(decodeQueueEnds(Buffer.alloc(0))).toBeNull()
  })

  it('a table sealed with another shutdown record, or a missing file, reads as none', () => {
    const path = join(dir, 'queueends')
    expect(readQueueEndsFile(path, SEAL)).toBeNull()
    writeQueueEndsFile(path, SEAL, sampleEnds())
    expect(readQueueEndsFile(path, SEAL)?.size).toBe(3)
    expect(readQueueEndsFile(path, { ...SEAL, queueUnitSum: 43 })).toBeNull()
    expect(readQueueEndsFile(path, { ...SEAL, physicMsgTimestamp: SEAL.physicMsgTimestamp + 1 })).toBeNull()
  })
})

/** Fills TOPICS × QUEUES queues with PER_QUEUE messages each and closes cleanly. */
async function fill(): Promise<void> {
  const store = await MessageStore.open(dir, OPTIONS)
  const batch = []
  for (let i = 0; i < PER_QUEUE; i++) {
    for (const topic of TOPICS) for (let q = 0; q < QUEUES; q++) batch.push({ topic, queueId: q, body: `${topic}/${q}/${i}` })
  }
  for (let i = 0; i < batch.length; i += 64) {
    for (const r of await store.putMessages(batch.slice(i, i + 64))) expect(r.status).toBe('PUT_OK')
  }
  await store.close()
}

/** Zeroes the last `units` units of a queue of the closed store (what a lost tail leaves). */
function zeroTail(topic: string, queueId: number, units: number): void {
  const endByte = PER_QUEUE * 20
  const path = join(dir, 'consumequeue', topic, String(queueId), formatOffsetName(endByte - (endByte % CQ_FILE)))
  const within = endByte % CQ_FILE
  expect(within).toBeGreaterThanOrEqual(units * 20)
  const fd = fs.openSync(path, 'r+')
  try {
    fs.writeSync(fd, Buffer.alloc(units * 20), 0, units * 20, within - units * 20)
  } finally {
    fs.closeSync(fd)
  }
}

/** Every message body of a queue, read in pulls of 32 from offset 0. */
function bodies(store: MessageStore, topic: string, queueId: number): string[] {
  const out: string[] = []
  for (let offset = 0; ; ) {
    const got = store.getMessage('g', topic, queueId, offset, 32)
    if (got.messages.length === 0) return out
    out.push(...got.messages.map((m) => Buffer.from(m.body).toString()))
    offset = got.nextBeginOffset
  }
}

function expected(topic: string, queueId: number): string[] {
  return Array.from({ length: PER_QUEUE }, (_, i) => `${topic}/${queueId}/${i}`)
}

describe('a clean close records every queue end', () => {
  it('units zeroed at the tail of a queue after a clean close are noticed when the queue is opened, and the queue is rebuilt and serves them all', async () => {
    await fill()
    expect(fs.existsSync(join(dir, 'queueends'))).toBe(true)
    zeroTail('ends-b', 1, 5)
    const store = await MessageStore.open(dir, OPTIONS)
    try {
      expect(store.getMaxOffsetInQueue('ends-b', 1)).toBe(PER_QUEUE)
      expect(bodies(store, 'ends-b', 1)).toEqual(expected('ends-b', 1))
      const repair = store.stats().repairs.find((r) => r.action === 'deleted consume queue ends-b/1 to rebuild it')
      expect(repair?.reason).toContain(`not at the ${PER_QUEUE} the last clean close recorded`)
      // The other queues were not touched.
      expect(store.stats().repairs).toHaveLength(1)
      expect(bodies(store, 'ends-a', 2)).toEqual(expected('ends-a', 2))
    } finally {
      await store.close()
    }
  })

  it('a queue left deferred through a whole run keeps its recorded end for the next close: its lost tail is still noticed two opens later', async () => {
    await fill()
    let store = await MessageStore.open(dir, OPTIONS)
    // Only one queue is opened in this run; the others stay deferred to the close.
    expect((await store.putMessage({ topic: 'ends-a', queueId: 0, body: 'extra' })).status).toBe('PUT_OK')
    await store.close()
    zeroTail('ends-a', 2, 3)
    store = await MessageStore.open(dir, OPTIONS)
    try {
      expect(bodies(store, 'ends-a', 2)).toEqual(expected('ends-a', 2))
      expect(store.stats().repairs.map((r) => r.action)).toEqual(['deleted consume queue ends-a/2 to rebuild it'])
      expect(store.getMaxOffsetInQueue('ends-a', 0)).toBe(PER_QUEUE + 1)
    } finally {
      await store.close()
    }
  })

  it.each([
    ['missing', (path: string) => fs.rmSync(path)],
    ['corrupt', (path: string) => fs.writeFileSync(path, Buffer.from(fs.readFileSync(path)).fill(0x5a, 70, 80))],
  ])('a %s table: open works, and the queue count is still compared with the shutdown record', async (_name, damage) => {
    await fill()
    damage(join(dir, 'queueends'))
    fs.rmSync(join(dir, 'consumequeue', 'ends-a', '1'), { recursive: true })
    const store = await MessageStore.open(dir, OPTIONS)
    try {
      expect(store.stats().lastExitOK).toBe(true)
      expect(store.stats().repairs.map((r) => r.action)).toContain('re-dispatching the whole commit log')
      for (const topic of TOPICS) for (let q = 0; q < QUEUES; q++) expect(bodies(store, topic, q)).toEqual(expected(topic, q))
    } finally {
      await store.close()
    }
  })

  it('a table left by an earlier close is not trusted: its ends do not rebuild queues that grew since', async () => {
    await fill()
    const stale = fs.readFileSync(join(dir, 'queueends'))
    let store = await MessageStore.open(dir, OPTIONS)
    for (let q = 0; q < QUEUES; q++) expect((await store.putMessage({ topic: 'ends-b', queueId: q, body: 'more' })).status).toBe('PUT_OK')
    await store.close()
    fs.writeFileSync(join(dir, 'queueends'), stale)
    store = await MessageStore.open(dir, OPTIONS)
    try {
      for (let q = 0; q < QUEUES; q++) expect(store.getMaxOffsetInQueue('ends-b', q)).toBe(PER_QUEUE + 1)
      expect(store.stats().repairs).toEqual([])
    } finally {
      await store.close()
    }
  })
})
