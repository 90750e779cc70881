import * as fs from 'node:fs'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { verifyStore, NotAStoreError, type VerifyProblem, type VerifyReport } from '../lib/cli/verify/index.js'
import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore, type Message, type OpenOptions } from '../lib/store/message-store.js'
import { repoRoot, tempDir } from './helpers/tmp.js'

const SMALL: OpenOptions = {
  mappedFileSizeCommitLog: 64 * 1024,
  mappedFileSizeConsumeQueue: 2000,
  maxHashSlotNum: 64,
  maxIndexNum: 256,
}
const DIMS = { maxHashSlotNum: 64, maxIndexNum: 256 }
const FILE_SIZE = 64 * 1024
const ENTRIES_START = 40 + 64 * 4

/** What was put: each message and where it went. */
interface Put {
  message: Message
  offset: number
  size: number
  queueOffset: number
  /** Index entries the message gets: its keys, plus one for a UNIQ_KEY. */
  keyCount: number
}

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-verify-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

function messageAt(i: number): Message {
  // Three queues; orders/0 gets half the messages, so its units span several 100-unit files.
  const [topic, queueId] = i % 2 === 0 ? ['orders', 0] : i % 4 === 1 ? ['orders', 1] : ['payments', 0]
  const message: Message = {
    topic,
    queueId,
    body: `body ${i} ${'x'.repeat(i % 97)}`,
    keys: [`key-${i}`, `customer-${i % 13}`],
  }
  if (i % 5 !== 4) message.tags = `tag-${i % 3}` // some without tags: tags code 0
  if (i % 7 === 0) message.properties = { UNIQ_KEY: `uniq-${i}` }
  return message
}

async function buildStore(count = 400, keepOpen = false): Promise<{ puts: Put[]; store: MessageStore | null }> {
  const store = await MessageStore.open(dir, SMALL)
  const puts: Put[] = []
  for (let i = 0; i < count; i++) {
    const message = messageAt(i)
    const r = await store.putMessage(message)
    expect(r.status).toBe('PUT_OK')
    puts.push({ message, offset: r.wroteOffset, size: r.wroteBytes, queueOffset: r.queueOffset, keyCount: 2 + (i % 7 === 0 ? 1 : 0) })
  }
  if (keepOpen) return { puts, store }
  await store.close()
  return { puts, store: null }
}

function verify(options = {}): Promise<VerifyReport> {
  return verifyStore(dir, { ...DIMS, ...options })
}

function commitLogFile(offset: number): { path: string; rel: string; pos: number } {
  const start = offset - (offset % FILE_SIZE)
  const name = formatOffsetName(start)
  return { path: join(dir, 'commitlog', name), rel: `commitlog/${name}`, pos: offset - start }
}

/** Overwrites bytes of a file in place. */
function patch(path: string, position: number, bytes: Buffer): void {
  const fd = fs.openSync(path, 'r+')
  try {
    fs.writeSync(fd, bytes, 0, bytes.length, position)
  } finally {
    fs.closeSync(fd)
  }
}

function long(value: number): Buffer {
  const b = Buffer.alloc(8)
  b.writeBigInt64BE(BigInt(value))
  return b
}

function int(value: number): Buffer {
  const b = Buffer.alloc(4)
  b.writeInt32BE(value)
  return b
}

/** Where the unit of (topic, queueId) at queueOffset lives. */
function unitLocation(topic: string, queueId: number, queueOffset: number): { path: string; rel: string; pos: number } {
  const logical = queueOffset * 20
  const start = logical - (logical % 2000)
  const name = formatOffsetName(start)
  return {
    path: join(dir, 'consumequeue', topic, String(queueId), name),
    rel: `consumequeue/${topic}/${queueId}/${name}`,
    pos: logical - start,
  }
}

function indexFiles(): string[] {
  return fs.readdirSync(join(dir, 'index')).sort()
}

/** Every file under dir: content hash, size and mtime. */
function snapshot(root: string): Map<string, string> {
  const out = new Map<string, string>()
  const walk = (path: string, rel: string): void => {
    const stat = fs.statSync(path)
    if (stat.isDirectory()) {
      out.set(`${rel}/`, `dir ${stat.mtimeMs}`)
      for (const name of fs.readdirSync(path)) walk(join(path, name), `${rel}/${name}`)
      return
    }
    const hash = createHash('sha256').update(fs.readFileSync(path)).digest('hex')
    out.set(rel, `${hash} ${stat.size} ${stat.mtimeMs}`)
  }
  walk(root, '.')
  return out
}

function allProblems(r: VerifyReport): VerifyProblem[] {
  return [...r.commitLog.problems, ...r.consumeQueues.problems, ...r.index.problems, ...r.checkpoint.problems]
}

describe('verifyStore on a clean store', () => {
  it('reports no problem and the exact record, unit and entry counts', async () => {
    const { puts } = await buildStore()
    const last = puts[puts.length - 1]
    const r = await verify()
    expect(allProblems(r)).toEqual([])
    expect(r.ok).toBe(true)
    expect(r.problemCount).toBe(0)
    expect(r.commitLog.records).toBe(puts.length)
    expect(r.commitLog.bytes).toBe(puts.reduce((sum, p) => sum + p.size, 0))
    // The files holding records, and the next one when it was made ahead (an empty tail).
    const holding = Math.floor(last.offset / FILE_SIZE) + 1
    expect([holding, holding + 1]).toContain(r.commitLog.files)
    expect(r.commitLog.files).toBeGreaterThanOrEqual(2)
    expect(r.commitLog.fileSize).toBe(FILE_SIZE)
    expect(r.commitLog.minOffset).toBe(0)
    expect(r.commitLog.validEnd).toBe(last.offset + last.size)
    expect(r.commitLog.endReason).toBe('end-of-data')
    expect(r.commitLog.lastStoreTimestamp).toBeGreaterThan(0)
    expect(r.consumeQueues.queues).toBe(3)
    expect(r.consumeQueues.files).toBe(2 + 1 + 1) // orders/0 holds 200 units: two 100-unit files
    expect(r.consumeQueues.fileSize).toBe(2000)
    expect(r.consumeQueues.units).toBe(puts.length)
    expect(r.consumeQueues.expired).toBe(0)
    const entries = puts.reduce((sum, p) => sum + p.keyCount, 0)
    expect(r.index.entries).toBe(entries)
    expect(r.index.files).toBe(Math.ceil(entries / 255))
    expect(r.index.details.every((d) => d.hashSlotNum === 64 && d.indexNum === 256)).toBe(true)
    expect(r.index.expired).toBe(0)
    expect(r.checkpoint).toMatchObject({ present: true, size: 4096 })
    expect(r.checkpoint.physicMsgTimestamp).toBeGreaterThan(0)
    expect(r.cleanShutdown).toBe(true)
  })

  it("reports checkpoint timestamps that are not the last clean close's, as open distrusts its record for them", async () => {
    await buildStore()
    const path = join(dir, 'checkpoint')
    const bytes = fs.readFileSync(path)
    bytes[4] ^= 0x01 // physicMsgTimestamp, which no CRC covers
    fs.writeFileSync(path, bytes)
    const r = await verify()
    expect(r.ok).toBe(false)
    expect(r.checkpoint.problems).toEqual([
      expect.objectContaining({ file: 'checkpoint', reason: expect.stringContaining("the checkpoint's physicMsgTimestamp is") }),
    ])
    const store = await MessageStore.open(dir, SMALL)
    try {
      expect(store.stats().repairs.map((repair) => repair.reason)).toEqual([
        expect.stringContaining("the checkpoint's physicMsgTimestamp is"),
      ])
    } finally {
      await store.close()
    }
    // After a crash (an abort file) open reads no record: nothing to disagree with.
    fs.writeFileSync(path, bytes)
    fs.writeFileSync(join(dir, 'abort'), '')
    expect((await verify()).checkpoint.problems).toEqual([])
  })

  it('changes nothing: every file, size and mtime is the same afterwards', async () => {
    await buildStore()
    const before = snapshot(dir)
    const seen: [number, number][] = []
    const r = await verify({ onProgress: (done: number, total: number) => seen.push([done, total]) })
    expect(r.ok).toBe(true)
    expect(snapshot(dir)).toEqual(before)
    const total = fs.readdirSync(join(dir, 'commitlog')).length * FILE_SIZE
    expect(seen[0]).toEqual([0, total])
    expect(seen[seen.length - 1]).toEqual([total, total])
  })

  it('checks a store another process has open without disturbing it', async () => {
    const { puts, store } = await buildStore(150, true)
    try {
      const r = await verify()
      expect(allProblems(r)).toEqual([])
      expect(r.commitLog.records).toBe(150)
      expect(r.cleanShutdown).toBe(false) // the abort file exists while the store runs
      const more = await store!.putMessage(messageAt(150))
      expect(more.status).toBe('PUT_OK')
      expect(more.wroteOffset).toBe(puts[149].offset + puts[149].size)
    } finally {
      await store!.close()
    }
    const after = await verify()
    expect(after.ok).toBe(true)
    expect(after.commitLog.records).toBe(151)
    expect(after.cleanShutdown).toBe(true)
  })

  it('counts units and entries below the first commit-log file as expired, not as problems', async () => {
    const { puts } = await buildStore()
    fs.rmSync(join(dir, 'commitlog', formatOffsetName(0)))
    const gone = puts.filter((p) => p.offset < FILE_SIZE)
    const r = await verify()
    expect(allProblems(r)).toEqual([])
    expect(r.commitLog.minOffset).toBe(FILE_SIZE)
    expect(r.commitLog.records).toBe(puts.length - gone.length)
    expect(r.consumeQueues.units).toBe(puts.length)
    expect(r.consumeQueues.expired).toBe(gone.length)
    expect(r.index.expired).toBe(gone.reduce((sum, p) => sum + p.keyCount, 0))
  })

  it('reports index files of unknown dimensions when they are not given', async () => {
    await buildStore(50)
    // Without the store's sizes record (a store written by RocketMQ), nothing tells the dimensions.
    fs.rmSync(join(dir, 'config', 'storeSizes.json'))
    const r = await verifyStore(dir)
    expect(r.ok).toBe(false)
    expect(r.index.problems).toHaveLength(1)
    expect(r.index.problems[0]).toMatchObject({ file: `index/${indexFiles()[0]}`, offset: 0 })
    expect(r.index.problems[0].reason).toMatch(/unknown dimensions/)
    expect(r.commitLog.problems).toEqual([])
    expect(r.consumeQueues.problems).toEqual([])
  })

  it('refuses a directory that is not a store', async () => {
    await expect(verifyStore(dir)).rejects.toBeInstanceOf(NotAStoreError)
    await expect(verifyStore(join(dir, 'missing'))).rejects.toBeInstanceOf(NotAStoreError)
  })
})

describe('verifyStore finds damage where it is', () => {
  it('a flipped body byte: a CRC failure at the record, where valid data ends', async () => {
    const { puts } = await buildStore()
    const victim = puts[250]
    const where = commitLogFile(victim.offset)
    const bytes = fs.readFileSync(where.path)
    const body = Buffer.from(victim.message.body as string)
    const bodyAt = bytes.indexOf(body, where.pos)
    expect(bodyAt).toBeGreaterThan(where.pos)
    expect(bodyAt).toBeLessThan(where.pos + victim.size)
    patch(where.path, bodyAt + 3, Buffer.from([bytes[bodyAt + 3] ^ 0x20]))

    const r = await verify()
    expect(r.ok).toBe(false)
    expect(r.commitLog.problems).toHaveLength(1)
    expect(r.commitLog.problems[0]).toMatchObject({ file: where.rel, offset: where.pos, phyOffset: victim.offset })
    expect(r.commitLog.problems[0].reason).toMatch(/crc/i)
    expect(r.commitLog.endReason).toBe('damage')
    expect(r.commitLog.validEnd).toBe(victim.offset)
    expect(r.commitLog.records).toBe(250)
    // Units of the record and of everything after it point past the valid data.
    expect(r.consumeQueues.problems.length + r.consumeQueues.moreProblems).toBe(puts.length - 250)
    expect(r.consumeQueues.problems[0].reason).toMatch(
      new RegExp(`points at commit-log offset ${victim.offset}, beyond the end of valid commit-log data \\(${victim.offset}\\)`),
    )
  })

  it('a consume-queue unit pointing at another record, and one pointing inside a record', async () => {
    const { puts } = await buildStore()
    const orders0 = puts.filter((p) => p.message.topic === 'orders' && p.message.queueId === 0)
    const payments = puts.find((p) => p.message.topic === 'payments')!
    const a = unitLocation('orders', 0, 3)
    patch(a.path, a.pos, long(payments.offset))
    const b = unitLocation('orders', 0, 150)
    patch(b.path, b.pos, long(orders0[150].offset + 10))

    const r = await verify()
    expect(r.ok).toBe(false)
    expect(r.commitLog.problems).toEqual([])
    expect(r.index.problems).toEqual([])
    expect(r.consumeQueues.problems).toHaveLength(2)
    const [pa, pb] = r.consumeQueues.problems
    expect(pa).toMatchObject({ file: a.rel, offset: 60, queueOffset: 3, phyOffset: payments.offset })
    expect(pa.reason).toMatch(/belongs to payments\/0, not orders\/0/)
    expect(pb).toMatchObject({ file: b.rel, offset: b.pos, queueOffset: 150, phyOffset: orders0[150].offset + 10 })
    expect(b.rel).toMatch(/00000000000000002000$/)
    expect(pb.reason).toBe(`points at commit-log offset ${orders0[150].offset + 10}, inside the record at ${orders0[150].offset}`)
  })

  it('a consume-queue unit with the wrong size, and one with the wrong tags code', async () => {
    const { puts } = await buildStore()
    const orders1 = puts.filter((p) => p.message.topic === 'orders' && p.message.queueId === 1)
    const a = unitLocation('orders', 1, 7)
    patch(a.path, a.pos + 8, int(orders1[7].size + 1))
    const b = unitLocation('orders', 1, 9)
    patch(b.path, b.pos + 12, long(12345))

    const r = await verify()
    expect(r.consumeQueues.problems).toHaveLength(2)
    expect(r.consumeQueues.problems[0]).toMatchObject({ file: a.rel, offset: 140, queueOffset: 7 })
    expect(r.consumeQueues.problems[0].reason).toMatch(new RegExp(`says ${orders1[7].size + 1} bytes.* is ${orders1[7].size}`))
    expect(r.consumeQueues.problems[1]).toMatchObject({ file: b.rel, offset: 180, queueOffset: 9 })
    expect(r.consumeQueues.problems[1].reason).toMatch(/tags code 12345/)
    expect(r.problemCount).toBe(2)
  })

  it('a consume queue that lost its tail, and one with a zeroed unit inside its data', async () => {
    const { puts } = await buildStore()
    const payments = puts.filter((p) => p.message.topic === 'payments')
    const lost = unitLocation('payments', 0, payments.length - 5)
    patch(lost.path, lost.pos, Buffer.alloc(5 * 20))
    const zeroed = unitLocation('orders', 1, 50)
    patch(zeroed.path, zeroed.pos, Buffer.alloc(20))
    const orders1 = puts.filter((p) => p.message.topic === 'orders' && p.message.queueId === 1)

    const r = await verify()
    expect(r.ok).toBe(false)
    expect(r.consumeQueues.missing).toBe(5 + orders1.length - 50)
    const reasons = r.consumeQueues.problems.map((p) => `${p.file} @${p.offset}: ${p.reason}`)
    expect(reasons).toEqual([
      `${zeroed.rel} @${zeroed.pos + 20}: non-zero bytes after the end of the queue's data (an all-zero unit at ${zeroed.rel} position ${zeroed.pos}): units there are unreachable`,
      `${zeroed.rel} @${zeroed.pos}: the commit log has records of orders/1 up to queue offset ${orders1.length - 1}, but its consume queue ends at queue offset 50: ${orders1.length - 50} messages cannot be consumed`,
      `${lost.rel} @${lost.pos}: the commit log has records of payments/0 up to queue offset ${payments.length - 1}, but its consume queue ends at queue offset ${payments.length - 5}: 5 messages cannot be consumed`,
    ])
    expect(r.commitLog.problems).toEqual([])
    expect(r.index.problems).toEqual([])

    // After a crash (abort file present) a lagging queue is what recovery repairs: a note, not a problem.
    fs.writeFileSync(join(dir, 'abort'), '')
    const crashed = await verify()
    expect(crashed.cleanShutdown).toBe(false)
    expect(crashed.consumeQueues.missing).toBe(5 + orders1.length - 50)
    expect(crashed.consumeQueues.problems).toHaveLength(1) // the stray units after the zeroed one
    expect(crashed.notes.filter((n) => n.includes('cannot be consumed'))).toHaveLength(2)
  })

  it('an index entry with a wrong phyOffset, and one whose chain links forward', async () => {
    const { puts } = await buildStore()
    const [first, second] = indexFiles()
    // Entry 5 is message 1's orders#customer-1; message 301 (orders#key-301, orders#customer-2) has other keys.
    const entry5 = ENTRIES_START + 5 * 20
    patch(join(dir, 'index', first), entry5 + 4, long(puts[301].offset))
    const entry9 = ENTRIES_START + 9 * 20
    patch(join(dir, 'index', second), entry9 + 16, int(12))

    const r = await verify()
    expect(r.commitLog.problems).toEqual([])
    expect(r.consumeQueues.problems).toEqual([])
    const wrongPhy = r.index.problems.find((p) => p.file === `index/${first}`)!
    expect(wrongPhy).toMatchObject({ offset: entry5, entry: 5, phyOffset: puts[301].offset })
    expect(wrongPhy.reason).toMatch(/key hash \d+ is not the hash of any key of the record/)
    const forward = r.index.problems.filter((p) => p.file === `index/${second}`)
    expect(forward.map((p) => p.entry)).toContain(9)
    expect(forward.find((p) => p.entry === 9)!.reason).toMatch(/links to entry 12; a chain may only link to an earlier entry/)
  })

  it('an index file whose header overlaps the file before it: a problem, as open rebuilds the index', async () => {
    await buildStore()
    const [, second] = indexFiles()
    patch(join(dir, 'index', second), 16, long(0))

    const r = await verify()
    expect(r.index.problems).toHaveLength(1)
    expect(r.index.problems[0]).toMatchObject({ file: `index/${second}`, offset: 16 })
    expect(r.index.problems[0].reason).toMatch(
      /does not follow the end \(\d+\) of the file before it: open deletes the index and rebuilds it/,
    )
    const store = await MessageStore.open(dir, SMALL)
    try {
      expect(store.stats().repairs.map((x) => x.action)).toContain('deleted the index to rebuild it')
    } finally {
      await store.close()
    }
  })

  it('a truncated commit-log file', async () => {
    const { puts } = await buildStore()
    const first = commitLogFile(0)
    fs.truncateSync(first.path, 40_000)
    const cut = puts.find((p) => p.offset + p.size > 40_000)!

    const r = await verify()
    expect(r.ok).toBe(false)
    const [size, end] = r.commitLog.problems
    expect(size).toMatchObject({ file: first.rel, offset: 40_000 })
    expect(size.reason).toMatch(/wrong size: 40000 bytes, the commit-log files are 65536/)
    expect(end).toMatchObject({ file: first.rel, offset: cut.offset, phyOffset: cut.offset })
    expect(r.commitLog.validEnd).toBe(cut.offset)
    expect(r.commitLog.endReason).toBe('damage')
  })

  it('garbage after the last record', async () => {
    const { puts } = await buildStore()
    const last = puts[puts.length - 1]
    const end = last.offset + last.size
    const where = commitLogFile(end)
    patch(where.path, where.pos, Buffer.alloc(24, 0xab))

    const r = await verify()
    expect(r.ok).toBe(false)
    expect(r.commitLog.problems).toHaveLength(1)
    expect(r.commitLog.problems[0]).toMatchObject({ file: where.rel, offset: where.pos, phyOffset: end })
    expect(r.commitLog.problems[0].reason).toMatch(/magic/)
    expect(r.commitLog.validEnd).toBe(end)
    expect(r.commitLog.records).toBe(puts.length)
    expect(r.consumeQueues.problems).toEqual([])
    expect(r.index.problems).toEqual([])
  })

  it('data after a zeroed record header', async () => {
    const { puts } = await buildStore()
    const victim = puts[puts.length - 5]
    const where = commitLogFile(victim.offset)
    patch(where.path, where.pos, Buffer.alloc(8))

    const r = await verify()
    expect(r.commitLog.validEnd).toBe(victim.offset)
    expect(r.commitLog.problems).toHaveLength(1)
    expect(r.commitLog.problems[0].file).toBe(where.rel)
    expect(r.commitLog.problems[0].reason).toMatch(/non-zero bytes after the end of the data/)
  })

  it('noise after the end of the data that holds no record is a note, not a problem (open ignores it)', async () => {
    const { puts } = await buildStore()
    const last = puts[puts.length - 1]
    const where = commitLogFile(last.offset + last.size + 500)
    patch(where.path, where.pos, Buffer.from([0x5a]))

    const r = await verify()
    expect(r.ok).toBe(true)
    expect(r.commitLog.validEnd).toBe(last.offset + last.size)
    expect(r.notes.some((n) => n.includes(`${where.rel} @${where.pos}: non-zero bytes after the end of the data`))).toBe(true)
  })

  // Regression: verify used to report this and walk on, where recovery stops.
  it('a record whose PHYSICALOFFSET names another position stops the walk, where recovery stops', async () => {
    const { puts } = await buildStore()
    const victim = puts[200]
    const where = commitLogFile(victim.offset)
    patch(where.path, where.pos + 28, long(victim.offset + 1))

    const r = await verify()
    expect(r.commitLog.validEnd).toBe(victim.offset)
    expect(r.commitLog.damage).toMatchObject({ kind: 'corrupt', offset: victim.offset })
    expect(r.commitLog.problems[0]).toMatchObject({ file: where.rel, offset: where.pos, phyOffset: victim.offset })
    expect(r.commitLog.problems[0].reason).toMatch(new RegExp(`physical offset ${victim.offset + 1} at position ${victim.offset}.*corrupt`))
    fs.writeFileSync(join(dir, 'abort'), '')
    const store = await MessageStore.open(dir, SMALL)
    try {
      expect(store.stats().recovery).toMatchObject({ processOffset: victim.offset, damage: { kind: 'corrupt', offset: victim.offset } })
    } finally {
      await store.close()
    }
  })

  // Regression: verify used to call this torn (zeros follow the claimed extent), where recovery
  // calls it corrupt (the extent hides a valid record: the length field is the damage).
  it('a TOTALSIZE grown over the last record is corruption, not a torn write, as recovery classes it', async () => {
    const { puts } = await buildStore()
    const [victim, last] = puts.slice(-2)
    const where = commitLogFile(victim.offset)
    expect(commitLogFile(last.offset).path).toBe(where.path)
    patch(where.path, where.pos, int(victim.size + last.size))

    const r = await verify()
    expect(r.commitLog.validEnd).toBe(victim.offset)
    expect(r.commitLog.damage).toMatchObject({ kind: 'corrupt', offset: victim.offset, length: victim.size + last.size })
    expect(r.commitLog.problems[0].reason).toMatch(/corrupt: data follows/)
    fs.writeFileSync(join(dir, 'abort'), '')
    await expect(MessageStore.open(dir, { ...SMALL, corruptionPolicy: 'strict' })).rejects.toMatchObject({ code: 'CORRUPTION' })
    const store = await MessageStore.open(dir, SMALL)
    try {
      expect(store.stats().recovery).toMatchObject({ processOffset: victim.offset, damage: { kind: 'corrupt', offset: victim.offset } })
    } finally {
      await store.close()
    }
  })

  it('a record torn at the tail: torn, as recovery classes it', async () => {
    const { puts } = await buildStore()
    const last = puts[puts.length - 1]
    const where = commitLogFile(last.offset)
    patch(where.path, where.pos + 60, Buffer.alloc(last.size - 60))

    const r = await verify()
    expect(r.commitLog.validEnd).toBe(last.offset)
    expect(r.commitLog.damage).toMatchObject({ kind: 'torn', offset: last.offset })
    expect(r.commitLog.problems[0].reason).toMatch(/a torn write: only zeros follow; open truncates here/)
  })

  it('keeps at most 100 problems per section and counts the rest', async () => {
    const { puts } = await buildStore()
    const where = commitLogFile(puts[10].offset)
    patch(where.path, where.pos + 4, int(0x12345678))
    const r = await verify()
    expect(r.consumeQueues.problems).toHaveLength(100)
    expect(r.consumeQueues.moreProblems).toBe(puts.length - 10 - 100)
    expect(r.problemCount).toBe(allProblems(r).length + r.consumeQueues.moreProblems + r.index.moreProblems)
  })
})

describe('mqstore verify (the command)', () => {
  const main = join(repoRoot, 'dist', 'lib', 'cli', 'main.js')
  const run = (...args: string[]) => spawnSync(process.execPath, [main, 'verify', ...args], { encoding: 'utf8', timeout: 60_000 })
  const dimArgs = ['--max-hash-slot-num', '64', '--max-index-num=256']

  it('prints the report as JSON and exits 0 on a clean store', async () => {
    const { puts } = await buildStore(120)
    const p = run(dir, '--json', ...dimArgs)
    expect(p.stderr).toBe('')
    expect(p.status).toBe(0)
    const report = JSON.parse(p.stdout) as VerifyReport
    expect(report.ok).toBe(true)
    expect(report.commitLog.records).toBe(120)
    expect(report.consumeQueues.units).toBe(120)
    expect(report.index.entries).toBe(puts.reduce((sum, x) => sum + x.keyCount, 0))

    const human = run(dir, ...dimArgs)
    expect(human.status).toBe(0)
    expect(human.stdout).toMatch(/: OK \(/)
    expect(human.stdout).toMatch(/120 records/)
  })

  it('exits 1 and names the problem when the store is damaged', async () => {
    const { puts } = await buildStore(120)
    const a = unitLocation('orders', 0, 2)
    patch(a.path, a.pos + 8, int(puts[4].size + 7))
    const p = run(dir, ...dimArgs)
    expect(p.status).toBe(1)
    expect(p.stdout).toMatch(/1 problem found/)
    expect(p.stdout).toContain(`${a.rel} @40, queue offset 2:`)
    const json = run(dir, '--json', ...dimArgs)
    expect(json.status).toBe(1)
    expect((JSON.parse(json.stdout) as VerifyReport).consumeQueues.problems[0]).toMatchObject({ file: a.rel, offset: 40 })
  })

  it('exits 2 for a directory that is not a store and for usage errors', () => {
    fs.mkdirSync(join(dir, 'something'))
    const notStore = run(dir)
    expect(notStore.status).toBe(2)
    expect(notStore.stderr).toMatch(/not a store/)
    expect(run().status).toBe(2)
    expect(run(dir, '--bogus').status).toBe(2)
    expect(run(dir, '--max-hash-slot-num', '64').status).toBe(2)
    expect(run(dir, '--max-index-num', 'x', '--max-hash-slot-num', '1').status).toBe(2)
    expect(fs.readdirSync(dir)).toEqual(['something'])
  })
})
