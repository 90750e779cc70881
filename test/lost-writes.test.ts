// Damage a power cut could do, at random points: after a "crash" (the abort file left behind), the
// commit log is zeroed or garbled from a random byte on, a consume queue loses its tail or runs
// ahead of the log, or the checkpoint is gone. The store must recover to a consistent prefix,
// serve no damaged record, and lose nothing before the damage point.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import fc from 'fast-check'

import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore, type OpenOptions, type PutMessageResult } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'

const FILE = 32 * 1024
const CQ_FILE = 20 * 50
const OPTIONS: OpenOptions = { mappedFileSizeCommitLog: FILE, mappedFileSizeConsumeQueue: CQ_FILE, maxHashSlotNum: 32, maxIndexNum: 128 }
const QUEUES = [
  ['a', 0],
  ['a', 1],
  ['b', 0],
] as const

interface Put {
  topic: string
  queueId: number
  key: string
  body: Buffer
  result: PutMessageResult
}

let root: string
beforeEach(() => {
  root = tempDir('mqstore-lost-')
})
afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true })
})

async function fill(dir: string, count: number): Promise<Put[]> {
  const store = await MessageStore.open(dir, OPTIONS)
  const puts: Put[] = []
  for (let i = 0; i < count; i++) {
    const [topic, queueId] = QUEUES[i % QUEUES.length]
    const body = Buffer.alloc(50 + ((i * 37) % 400), (i * 7) & 0xff)
    const result = await store.putMessage({ topic, queueId, body, keys: `k${i}` })
    puts.push({ topic, queueId, key: `k${i}`, body, result })
  }
  await store.close()
  fs.writeFileSync(join(dir, 'abort'), '')
  return puts
}

function overwrite(path: string, position: number, bytes: Buffer): void {
  const fd = fs.openSync(path, 'r+')
  fs.writeSync(fd, bytes, 0, bytes.length, position)
  fs.closeSync(fd)
}

/** Zeros (or garbage) every commit-log byte from `offset` on. */
function damageFrom(dir: string, offset: number, garbage: Buffer | null): void {
  for (const name of fs.readdirSync(join(dir, 'commitlog'))) {
    const start = Number(name)
    if (start + FILE <= offset) continue
    const from = Math.max(0, offset - start)
    const length = FILE - from
    const bytes = Buffer.alloc(length)
    if (garbage !== null) for (let i = 0; i < length; i++) bytes[i] = garbage[i % garbage.length]
    overwrite(join(dir, 'commitlog', name), from, bytes)
  }
}

/** Checks the recovered store against the puts whose records end at or before `damagePoint`. */
function check(store: MessageStore, puts: Put[], damagePoint: number): void {
  const kept = puts.filter((p) => p.result.wroteOffset + p.result.wroteBytes <= damagePoint)
  for (const put of kept) {
    const m = store.lookMessageByOffset(put.result.wroteOffset)
    expect(m?.keys).toEqual([put.key])
    expect(Buffer.compare(m!.body, put.body)).toBe(0)
    const byQueue = store.getMessage('check', put.topic, put.queueId, put.result.queueOffset, 1).messages[0]
    expect(byQueue?.commitLogOffset).toBe(put.result.wroteOffset)
    expect(store.queryMessage(put.topic, put.key, 4, 0, Date.now() + 1000).messages.map((x) => x.commitLogOffset)).toEqual([
      put.result.wroteOffset,
    ])
  }
  // Nothing damaged is served: a record that reaches past the damage point is gone or intact.
  for (const put of puts.filter((p) => p.result.wroteOffset + p.result.wroteBytes > damagePoint)) {
    const m = store.lookMessageByOffset(put.result.wroteOffset)
    if (m !== null) expect(Buffer.compare(m.body, put.body)).toBe(0)
  }
  for (const [topic, queueId] of QUEUES) {
    const max = store.getMaxOffsetInQueue(topic, queueId)
    expect(max).toBeGreaterThanOrEqual(kept.filter((p) => p.topic === topic && p.queueId === queueId).length)
    for (let next = store.getMinOffsetInQueue(topic, queueId); next < max; ) {
      const got = store.getMessage('check', topic, queueId, next, 32)
      expect(got.status).toBe('FOUND')
      got.messages.forEach((m, n) => expect(m.queueOffset).toBe(next + n))
      next = got.nextBeginOffset
    }
  }
}

describe('lost writes after a crash', () => {
  it('zeros or garbage from a random point: a consistent prefix, nothing before the point lost', async () => {
    const pristine = join(root, 'pristine')
    const puts = await fill(pristine, 240)
    const end = puts[puts.length - 1].result.wroteOffset + puts[puts.length - 1].result.wroteBytes
    let run = 0
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: end }),
        fc.boolean(),
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        async (point, zeros, garbage) => {
          const dir = join(root, `run-${run++}`)
          fs.cpSync(pristine, dir, { recursive: true })
          damageFrom(dir, point, zeros ? null : Buffer.from(garbage))
          const store = await MessageStore.open(dir, OPTIONS)
          try {
            check(store, puts, point)
          } finally {
            await store.close()
            fs.rmSync(dir, { recursive: true, force: true })
          }
        },
      ),
      { numRuns: 30 },
    )
  })

  it('a consume queue that lost its tail, one that runs ahead, and a lost checkpoint', async () => {
    const pristine = join(root, 'pristine')
    const puts = await fill(pristine, 240)
    const end = puts[puts.length - 1].result.wroteOffset + puts[puts.length - 1].result.wroteBytes
    let run = 0
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('cq-tail', 'cq-ahead', 'checkpoint'), fc.integer({ min: 0, max: 79 }), async (damage, unit) => {
        const dir = join(root, `run-${run++}`)
        fs.cpSync(pristine, dir, { recursive: true })
        const queueDir = join(dir, 'consumequeue', 'a', '1')
        const logic = unit * 20
        const cqPath = join(queueDir, formatOffsetName(logic - (logic % CQ_FILE)))
        if (damage === 'cq-tail') {
          overwrite(cqPath, logic % CQ_FILE, Buffer.alloc(CQ_FILE - (logic % CQ_FILE)))
          for (const name of fs.readdirSync(queueDir)) if (Number(name) > logic) fs.rmSync(join(queueDir, name))
        } else if (damage === 'cq-ahead') {
          // Units that point past the end of the commit log, as if the log lost writes the queue kept.
          const units = Buffer.alloc(60)
          for (let i = 0; i < 3; i++) {
            units.writeBigInt64BE(BigInt(end + i * 500), i * 20)
            units.writeInt32BE(500, i * 20 + 8)
          }
          const last = fs.readdirSync(queueDir).sort().at(-1)!
          const buffer = fs.readFileSync(join(queueDir, last))
          let at = 0
          while (at + 20 <= buffer.length && buffer.readInt32BE(at + 8) > 0) at += 20
          if (at + 60 <= buffer.length) overwrite(join(queueDir, last), at, units)
        } else {
          fs.rmSync(join(dir, 'checkpoint'))
        }
        const store = await MessageStore.open(dir, OPTIONS)
        try {
          check(store, puts, end)
          expect(store.getMaxOffsetInQueue('a', 1)).toBe(puts.filter((p) => p.topic === 'a' && p.queueId === 1).length)
        } finally {
          await store.close()
          fs.rmSync(dir, { recursive: true, force: true })
        }
      }),
      { numRuns: 20 },
    )
  })
})
