// A damaged unit in the middle of a consume queue makes the queue damaged, not short: reopen
// rebuilds it from the commit log (docs/recovery.md Q3), so it keeps its length and its queue
// offsets, and a new put does not get an offset the log already holds. Once after a crash (the
// scan of the last files) and once after a clean close (a deferred queue's bisection).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'

const OPTIONS: OpenOptions = { mappedFileSizeCommitLog: 64 * 1024, mappedFileSizeConsumeQueue: 20 * 64 }
const MESSAGES = 40
const UNIT = 20

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-cq-middle-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

async function build(): Promise<number[]> {
  const store = await MessageStore.open(dir, OPTIONS)
  const offsets: number[] = []
  for (let i = 0; i < MESSAGES; i++) {
    const r = await store.putMessage({ topic: 't', queueId: 0, body: `m${i}` })
    expect(r.queueOffset).toBe(i)
    offsets.push(r.wroteOffset)
  }
  await store.close()
  return offsets
}

type Damage = 'zeros' | 'negative offset' | 'huge size' | 'far offset'

function damageUnit(queueOffset: number, how: Damage): void {
  const file = join(dir, 'consumequeue', 't', '0', '0'.repeat(20))
  const fd = fs.openSync(file, 'r+')
  const bytes =
    how === 'zeros' ? Buffer.alloc(UNIT) : Buffer.from([{ 'huge size': 0x40, 'far offset': 0x01, 'negative offset': 0x80 }[how]])
  // The offset field is the unit's first 8 bytes, the size the next 4 (cq-unit.ts).
  fs.writeSync(fd, bytes, 0, bytes.length, queueOffset * UNIT + { zeros: 0, 'negative offset': 0, 'huge size': 8, 'far offset': 2 }[how])
  fs.closeSync(fd)
}

async function expectWholeQueue(store: MessageStore, offsets: number[]): Promise<void> {
  expect(store.getMaxOffsetInQueue('t', 0)).toBe(MESSAGES)
  const served: { queueOffset: number; commitLogOffset: number }[] = []
  for (let next = 0; next < MESSAGES; ) {
    const got = store.getMessage('g', 't', 0, next, 16)
    expect(got.status).toBe('FOUND')
    served.push(...got.messages)
    next = got.nextBeginOffset
  }
  expect(served.map((m) => m.queueOffset)).toEqual(offsets.map((_, i) => i))
  expect(served.map((m) => m.commitLogOffset)).toEqual(offsets)
  const next = await store.putMessage({ topic: 't', queueId: 0, body: 'after' })
  expect(next.queueOffset).toBe(MESSAGES)
}

describe('a damaged unit in the middle of a consume queue', () => {
  // A huge size still makes a valid unit: its record would overlap the next unit's.
  for (const how of ['zeros', 'negative offset', 'huge size'] as const) {
    it(`(${how}) after a crash: the queue is rebuilt with its length and offsets`, async () => {
      const offsets = await build()
      damageUnit(17, how)
      fs.writeFileSync(join(dir, 'abort'), '')
      const store = await MessageStore.open(dir, OPTIONS)
      try {
        expect(store.stats().repairs.map((r) => r.action)).toContain('deleted consume queue t/0 to rebuild it')
        await expectWholeQueue(store, offsets)
      } finally {
        await store.close()
      }
    })

    it(`(${how}) after a clean close: the deferred queue is rebuilt with its length and offsets`, async () => {
      const offsets = await build()
      damageUnit(17, how)
      const store = await MessageStore.open(dir, OPTIONS)
      try {
        await expectWholeQueue(store, offsets)
        expect(store.stats().repairs.map((r) => r.action)).toContain('deleted consume queue t/0 to rebuild it')
      } finally {
        await store.close()
      }
    })
  }
})

describe('a damaged last unit of a consume queue', () => {
  // The queue would end before it, and no later record of the queue would show the loss.
  for (const path of ['after a crash', 'after a clean close', 'after a clean close whose checkpoint was lost'] as const) {
    for (const how of ['far offset', 'negative offset'] as const) {
      it(`(${how}) ${path}: the queue keeps its length and offsets`, async () => {
        const offsets = await build()
        damageUnit(MESSAGES - 1, how)
        if (path === 'after a crash') fs.writeFileSync(join(dir, 'abort'), '')
        if (path.endsWith('lost')) fs.rmSync(join(dir, 'checkpoint'))
        const store = await MessageStore.open(dir, OPTIONS)
        try {
          await expectWholeQueue(store, offsets)
        } finally {
          await store.close()
        }
      })
    }
  }
})

describe('a last unit damaged to point past the data but inside the last log file', () => {
  it('after a clean close without its shutdown record, the queue is rebuilt, not cut (Q2 is for crashes)', async () => {
    const offsets = await build()
    const store = await MessageStore.open(dir, OPTIONS)
    // Another queue ahead: dispatch at open resumes past every record of queue 0.
    for (let i = 0; i < 5; i++) await store.putMessage({ topic: 't', queueId: 1, body: `other${i}` })
    await store.close()
    const file = join(dir, 'consumequeue', 't', '0', '0'.repeat(20))
    const units = fs.readFileSync(file)
    units.writeBigInt64BE(BigInt(offsets.at(-1)! + 10_000), (MESSAGES - 1) * UNIT)
    fs.writeFileSync(file, units)
    fs.rmSync(join(dir, 'checkpoint'))
    const reopened = await MessageStore.open(dir, OPTIONS)
    try {
      expect(reopened.stats().repairs.map((r) => r.action)).toContain('deleted consume queue t/0 to rebuild it')
      await expectWholeQueue(reopened, offsets)
    } finally {
      await reopened.close()
    }
  })
})

describe('a rebuild that cannot read every record of the queue', () => {
  const LOG_FILE_BYTES = 16 * 1024
  const options: OpenOptions = { mappedFileSizeCommitLog: LOG_FILE_BYTES, mappedFileSizeConsumeQueue: 20 * 128 }
  const COUNT = 80

  // (After a crash the scan reaches the damaged record and truncates the log there instead.)
  // Without the checkpoint there is no shutdown record: every queue opens at once and dispatch
  // rebuilds; with it, the queue opens on first use and rebuilds alone.
  for (const path of ['after a clean close', 'after a clean close whose checkpoint was lost'] as const) {
    it(`${path}: records lost in the log leave blanks, later records keep their queue offsets`, async () => {
      const store = await MessageStore.open(dir, options)
      const wrote: number[] = []
      for (let i = 0; i < COUNT; i++) {
        const r = await store.putMessage({ topic: 't', queueId: 0, body: `${i}|${'x'.repeat(1000)}` })
        wrote.push(r.wroteOffset)
      }
      await store.close()
      // Record 5 lies in the first log file, which recovery does not scan: its magic code is
      // damaged, so dispatch skips the rest of that file. A damaged unit makes the queue rebuild.
      const firstOfSecondFile = wrote.findIndex((w) => w >= LOG_FILE_BYTES)
      expect(firstOfSecondFile).toBeGreaterThan(6)
      const log = join(dir, 'commitlog', '0'.repeat(20))
      const bytes = fs.readFileSync(log)
      bytes.writeInt32BE(0x12345678, wrote[5] + 4)
      fs.writeFileSync(log, bytes)
      damageUnit(17, 'zeros')
      if (path !== 'after a clean close') fs.rmSync(join(dir, 'checkpoint'))

      const reopened = await MessageStore.open(dir, options)
      try {
        expect(reopened.getMaxOffsetInQueue('t', 0), JSON.stringify(reopened.stats().repairs)).toBe(COUNT)
        const served: number[] = []
        for (let next = 0; next < COUNT; ) {
          const got = reopened.getMessage('g', 't', 0, next, 16)
          for (const m of got.messages) {
            expect(Number(m.body.toString().split('|')[0])).toBe(m.queueOffset)
            served.push(m.queueOffset)
          }
          expect(got.nextBeginOffset).toBeGreaterThan(next)
          next = got.nextBeginOffset
        }
        const expected = [...Array(COUNT).keys()].filter((q) => q < 5 || q >= firstOfSecondFile)
        expect(served).toEqual(expected)
        expect((await reopened.putMessage({ topic: 't', queueId: 0, body: 'after' })).queueOffset).toBe(COUNT)
      } finally {
        await reopened.close()
      }
    })
  }
})
