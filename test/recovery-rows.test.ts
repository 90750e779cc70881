// The variants of recovery rows Q3, Q4, Q6 and I1 (docs/recovery.md) that test/recovery.test.ts
// does not walk: each consume-queue damage after a clean close (the queue is deferred and checked
// on first use) and after a crash (the abort file left in place, or a writer killed with SIGKILL:
// every queue is checked at open), a queue folder added between a clean close and the next open,
// and an index file newer than the checkpoint that holds wrong entries, so that keeping it would
// lose keys.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore, type OpenOptions, type PutMessageResult } from '../lib/store/message-store.js'
import { distEntry, runNodeScript, tempDir } from './helpers/tmp.js'

const FILE = 64 * 1024
/** 20 units per consume-queue file: each queue of `fill(300)` has four files. */
const CQ_FILE = 20 * 20
const SLOTS = 64
const OPTIONS: OpenOptions = { mappedFileSizeCommitLog: FILE, mappedFileSizeConsumeQueue: CQ_FILE, maxHashSlotNum: SLOTS, maxIndexNum: 256 }
const TOPICS = ['t0', 't1']
const QUEUE_IDS = [0, 1]

interface Put {
  topic: string
  queueId: number
  key: string
  result: PutMessageResult
}

let dir: string
const stores: MessageStore[] = []
beforeEach(() => {
  dir = tempDir('mqstore-recovery-rows-')
})
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function open(options: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, { ...OPTIONS, ...options })
  stores.push(store)
  return store
}

/** Puts `count` messages over 2 topics × 2 queues, each with its own key, then closes cleanly. */
async function fill(count: number): Promise<Put[]> {
  const store = await open()
  const puts: Put[] = []
  for (let i = 0; i < count; i += 25) {
    const batch = []
    for (let j = i; j < Math.min(count, i + 25); j++) {
      batch.push({ topic: `t${j % 2}`, queueId: (j >> 1) % 2, body: Buffer.alloc(200 + (j % 5) * 50, j & 0xff), keys: `key-${j}` })
    }
    const results = await store.putMessages(batch)
    results.forEach((result, n) => {
      const j = i + n
      expect(result.status).toBe('PUT_OK')
      puts.push({ topic: `t${j % 2}`, queueId: (j >> 1) % 2, key: `key-${j}`, result })
    })
  }
  stores.splice(stores.indexOf(store), 1)
  await store.close()
  return puts
}

/**
 * As fill, in a child process killed with SIGKILL once its puts are acknowledged: a real crash
 * (the store's own abort file, checkpoint and unflushed consume queues as the process left them).
 */
function fillAndKill(count: number): Put[] {
  const result = runNodeScript(
    `
    import { MessageStore } from ${JSON.stringify(distEntry)}
    const store = await MessageStore.open(process.argv[2], JSON.parse(process.argv[3]))
    const puts = []
    for (let i = 0; i < ${count}; i += 25) {
      const batch = []
      for (let j = i; j < Math.min(${count}, i + 25); j++) {
        batch.push({ topic: 't' + (j % 2), queueId: (j >> 1) % 2, body: Buffer.alloc(200 + (j % 5) * 50, j & 0xff), keys: 'key-' + j })
      }
      const results = await store.putMessages(batch)
      results.forEach((result, n) => {
        const j = i + n
        puts.push({ topic: 't' + (j % 2), queueId: (j >> 1) % 2, key: 'key-' + j, result })
      })
    }
    process.stdout.write(JSON.stringify(puts), () => process.kill(process.pid, 'SIGKILL'))
    `,
    [dir, JSON.stringify(OPTIONS)],
  )
  expect(result.signal, result.stderr).toBe('SIGKILL')
  const puts = JSON.parse(result.stdout) as Put[]
  expect(puts.map((p) => p.result.status)).toEqual(Array(count).fill('PUT_OK'))
  return puts
}

const crash = () => fs.writeFileSync(join(dir, 'abort'), '')
const queueDir = (topic: string, queueId: number) => join(dir, 'consumequeue', topic, String(queueId))
const cqFile = (topic: string, queueId: number, queueOffset: number) => {
  const logic = queueOffset * 20
  return join(queueDir(topic, queueId), formatOffsetName(logic - (logic % CQ_FILE)))
}

function patch(path: string, position: number, bytes: Buffer): void {
  const fd = fs.openSync(path, 'r+')
  fs.writeSync(fd, bytes, 0, bytes.length, position)
  fs.closeSync(fd)
}

function readAt(path: string, position: number, length: number): Buffer {
  const fd = fs.openSync(path, 'r')
  const bytes = Buffer.alloc(length)
  fs.readSync(fd, bytes, 0, length, position)
  fs.closeSync(fd)
  return bytes
}

/** Every put is readable by offset, queue and key; every queue is gap-free and holds exactly its puts. */
function expectAll(store: MessageStore, puts: Put[]): void {
  for (const put of puts) {
    expect(store.lookMessageByOffset(put.result.wroteOffset)?.keys).toEqual([put.key])
    const byQueue = store.getMessage('check', put.topic, put.queueId, put.result.queueOffset, 1).messages[0]
    expect(byQueue?.commitLogOffset).toBe(put.result.wroteOffset)
    const byKey = store.queryMessage(put.topic, put.key, 4, 0, Date.now() + 1000).messages
    expect(byKey.map((m) => m.commitLogOffset)).toEqual([put.result.wroteOffset])
  }
  for (const topic of TOPICS) {
    for (const queueId of QUEUE_IDS) {
      const mine = puts.filter((p) => p.topic === topic && p.queueId === queueId)
      expect(store.getMaxOffsetInQueue(topic, queueId)).toBe(mine.length)
      const served: number[] = []
      for (let next = store.getMinOffsetInQueue(topic, queueId); next < mine.length; ) {
        const got = store.getMessage('check', topic, queueId, next, 32)
        expect(got.status).toBe('FOUND')
        served.push(...got.messages.map((m) => m.commitLogOffset))
        next = got.nextBeginOffset
      }
      expect(served).toEqual(mine.map((p) => p.result.wroteOffset))
    }
  }
}

const repairs = (store: MessageStore) =>
  store
    .stats()
    .repairs.map((r) => `${r.action}: ${r.reason}`)
    .join('\n')

/** A 12-byte unit head (commit-log offset, size) as the consume queue stores it. */
function unitHead(offset: number, size: number): Buffer {
  const unit = Buffer.alloc(12)
  unit.writeBigInt64BE(BigInt(offset), 0)
  unit.writeInt32BE(size, 8)
  return unit
}

/** Overwrites the last unit of `topic`/`queueId` with what `make` returns for the queue's puts. */
function damageLastUnit(puts: Put[], topic: string, queueId: number, make: (queue: Put[]) => Buffer): void {
  const queue = puts.filter((p) => p.topic === topic && p.queueId === queueId)
  const last = queue[queue.length - 1].result.queueOffset
  patch(cqFile(topic, queueId, last), (last * 20) % CQ_FILE, make(queue))
}

const EXITS = [
  { exit: 'a clean close', crashed: false },
  { exit: 'a crash', crashed: true },
] as const

describe('Q3: a consume-queue file of the wrong size, a bad name or a gap is rebuilt from the commit log', () => {
  const damages: { what: string; exits: readonly (typeof EXITS)[number][]; damage: () => void }[] = [
    // After a clean close recovery.test.ts has this one.
    { what: 'a file one byte too long', exits: [EXITS[1]], damage: () => fs.appendFileSync(cqFile('t1', 1, 0), 'x') },
    {
      what: 'a file whose name is not a 20-digit offset',
      exits: EXITS,
      damage: () => fs.copyFileSync(cqFile('t1', 1, 0), join(queueDir('t1', 1), 'copy-of-the-first-file')),
    },
    { what: 'a gap: a file missing in the middle', exits: EXITS, damage: () => fs.rmSync(cqFile('t1', 1, 20)) },
  ]
  for (const { what, exits, damage } of damages) {
    for (const { exit, crashed } of exits) {
      it(`${what}, after ${exit}`, async () => {
        const puts = await fill(300)
        expect(fs.readdirSync(queueDir('t1', 1))).toHaveLength(4)
        damage()
        if (crashed) crash()
        const store = await open()
        expect(store.stats().lastExitOK).toBe(!crashed)
        // After a clean close the queue is checked on its first use: the reads find it rebuilt.
        expectAll(store, puts)
        expect(repairs(store)).toContain('deleted consume queue t1/1 to rebuild it')
        expect(fs.readdirSync(queueDir('t1', 1)).sort()).toEqual([0, 1, 2, 3].map((n) => formatOffsetName(n * CQ_FILE)))
      })
    }
  }
})

describe('Q4: a last unit that does not point at a record of its queue with its queue offset is rebuilt', () => {
  const damages: { what: string; exits: readonly (typeof EXITS)[number][]; make: (queue: Put[], puts: Put[]) => Buffer }[] = [
    {
      // After a clean close recovery.test.ts has this one.
      what: "another queue's record",
      exits: [EXITS[1]],
      make: (_queue, puts) => {
        const other = puts.find((p) => p.topic === 't1')!.result
        return unitHead(other.wroteOffset, other.wroteBytes)
      },
    },
    {
      what: 'a record of the same queue with another queue offset (the unit before, written twice)',
      exits: EXITS,
      make: (queue) => {
        const before = queue[queue.length - 2].result
        return unitHead(before.wroteOffset, before.wroteBytes)
      },
    },
    {
      what: 'no record: an offset inside the right record',
      exits: EXITS,
      make: (queue) => {
        const last = queue[queue.length - 1].result
        return unitHead(last.wroteOffset + 8, last.wroteBytes)
      },
    },
    {
      what: 'the right record with the wrong size',
      exits: EXITS,
      make: (queue) => {
        const last = queue[queue.length - 1].result
        return unitHead(last.wroteOffset, last.wroteBytes - 4)
      },
    },
  ]
  for (const { what, exits, make } of damages) {
    for (const { exit, crashed } of exits) {
      it(`${what}, after ${exit}`, async () => {
        const puts = await fill(300)
        damageLastUnit(puts, 't0', 1, (queue) => make(queue, puts))
        if (crashed) crash()
        const store = await open()
        expect(store.stats().lastExitOK).toBe(!crashed)
        expectAll(store, puts)
        expect(repairs(store)).toContain('deleted consume queue t0/1 to rebuild it')
      })
    }
  }
})

describe('Q3 and Q4 after a writer was killed with SIGKILL', () => {
  it('a gap in one queue and a wrong last unit in another: both queues are rebuilt', async () => {
    const puts = fillAndKill(300)
    expect(fs.existsSync(join(dir, 'abort'))).toBe(true)
    fs.rmSync(cqFile('t1', 1, 20))
    damageLastUnit(puts, 't0', 1, (queue) => {
      const before = queue[queue.length - 2].result
      return unitHead(before.wroteOffset, before.wroteBytes)
    })
    const store = await open()
    expect(store.stats().lastExitOK).toBe(false)
    expectAll(store, puts)
    expect(repairs(store)).toContain('deleted consume queue t1/1 to rebuild it')
    expect(repairs(store)).toContain('deleted consume queue t0/1 to rebuild it')
  })
})

describe('Q6: after a clean close, a number of queues that differs from the shutdown record', () => {
  it('a queue folder added since the close (a copy of another queue): the whole log is dispatched again and the stranger is emptied', async () => {
    const puts = await fill(300)
    fs.cpSync(queueDir('t0', 0), queueDir('t0', 5), { recursive: true })
    const store = await open()
    expect(repairs(store)).toContain('re-dispatching the whole commit log')
    expectAll(store, puts)
    // The copied units point at t0/0's records: the queue holds none of its own.
    const got = store.getMessage('check', 't0', 5, 0, 32)
    expect(got.messages).toEqual([])
    expect(store.getMaxOffsetInQueue('t0', 5)).toBe(0)
    expect((await store.putMessage({ topic: 't0', queueId: 5, body: 'its first' })).queueOffset).toBe(0)
    expect(store.getMessage('check', 't0', 5, 0, 32).messages.map((m) => m.body.toString())).toEqual(['its first'])
  })

  it('the re-dispatch it causes restores what a deferred queue cannot see it lost: a last file deleted since the close', async () => {
    const puts = await fill(300)
    fs.cpSync(queueDir('t0', 0), queueDir('t0', 5), { recursive: true })
    // t1/1 loses its last file: its new last unit is a true one, so its first use finds no fault.
    fs.rmSync(cqFile('t1', 1, 60))
    const store = await open()
    expect(repairs(store)).toContain('re-dispatching the whole commit log')
    expectAll(store, puts)
  })
})

describe('I1: after a crash, index files newer than the checkpoint are deleted and their keys indexed again', () => {
  it('a newest file whose hash slots were lost would hide its keys if it were kept', async () => {
    const puts = await fill(600)
    const names = fs.readdirSync(join(dir, 'index')).sort()
    expect(names.length).toBeGreaterThanOrEqual(3)
    const newest = join(dir, 'index', names[names.length - 1])
    const before = join(dir, 'index', names[names.length - 2])
    // The checkpoint's index time is the end of the file before the newest: that one is kept,
    // the newest is "newer than the checkpoint" (its end moved a second later if they share one).
    const beforeEnd = readAt(before, 8, 8).readBigInt64BE(0)
    if (readAt(newest, 8, 8).readBigInt64BE(0) <= beforeEnd) {
      const later = Buffer.alloc(8)
      later.writeBigInt64BE(beforeEnd + 1000n, 0)
      patch(newest, 8, later)
    }
    const indexTime = Buffer.alloc(8)
    indexTime.writeBigInt64BE(beforeEnd, 0)
    patch(join(dir, 'checkpoint'), 16, indexTime)
    // The newest file's slots never reached the disk: kept, it would find none of its keys, and
    // dispatch, resuming at its end, would not index them again.
    patch(newest, 40, Buffer.alloc(SLOTS * 4))
    crash()
    const store = await open()
    expect(fs.existsSync(before)).toBe(true)
    expectAll(store, puts)
  })
})
