// Walks every row of docs/recovery.md: each test leaves a store in one state on disk (by closing,
// "crashing" — an abort file left behind — and damaging real files), opens it, and checks the
// decision: keep, truncate, rebuild or refuse.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore, type OpenOptions, type PutMessageResult } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'

const FILE = 64 * 1024
const CQ_FILE = 20 * 100
const OPTIONS: OpenOptions = {
  mappedFileSizeCommitLog: FILE,
  mappedFileSizeConsumeQueue: CQ_FILE,
  maxHashSlotNum: 64,
  maxIndexNum: 256,
}

interface Put {
  i: number
  topic: string
  queueId: number
  key: string
  result: PutMessageResult
}

let dir: string
const stores: MessageStore[] = []
beforeEach(() => {
  dir = tempDir('mqstore-recovery-')
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

async function close(store: MessageStore): Promise<void> {
  await store.close()
  stores.splice(stores.indexOf(store), 1)
}

/** Puts `count` messages over 2 topics × 2 queues, each with a unique key, then closes cleanly. */
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
      puts.push({ i: j, topic: `t${j % 2}`, queueId: (j >> 1) % 2, key: `key-${j}`, result })
    })
  }
  await close(store)
  return puts
}

const crash = () => fs.writeFileSync(join(dir, 'abort'), '')
const commitLogFile = (offset: number) => join(dir, 'commitlog', formatOffsetName(offset - (offset % FILE)))
const cqFile = (topic: string, queueId: number, queueOffset: number) => {
  const logic = queueOffset * 20
  return join(dir, 'consumequeue', topic, String(queueId), formatOffsetName(logic - (logic % CQ_FILE)))
}

/** Writes `bytes` into a file at `position` (damage through the file system, not the store). */
function patch(path: string, position: number, bytes: Buffer): void {
  const fd = fs.openSync(path, 'r+')
  fs.writeSync(fd, bytes, 0, bytes.length, position)
  fs.closeSync(fd)
}

function zeroFrom(path: string, position: number, length?: number): void {
  const size = fs.statSync(path).size
  patch(path, position, Buffer.alloc(length ?? size - position))
}

function flipByte(offset: number): void {
  const path = commitLogFile(offset)
  const fd = fs.openSync(path, 'r+')
  const byte = Buffer.alloc(1)
  fs.readSync(fd, byte, 0, 1, offset % FILE)
  byte[0] ^= 0xff
  fs.writeSync(fd, byte, 0, 1, offset % FILE)
  fs.closeSync(fd)
}

/** Every put in `kept` is readable by offset, queue and key; every queue is gap-free. */
function expectAll(store: MessageStore, kept: Put[]): void {
  for (const put of kept) {
    const byOffset = store.lookMessageByOffset(put.result.wroteOffset)
    expect(byOffset?.keys).toEqual([put.key])
    const byQueue = store.getMessage('check', put.topic, put.queueId, put.result.queueOffset, 1).messages[0]
    expect(byQueue?.commitLogOffset).toBe(put.result.wroteOffset)
    const byKey = store.queryMessage(put.topic, put.key, 4, 0, Date.now() + 1000).messages
    expect(byKey.map((m) => m.commitLogOffset)).toEqual([put.result.wroteOffset])
  }
  for (const topic of ['t0', 't1']) {
    for (const queueId of [0, 1]) {
      const max = store.getMaxOffsetInQueue(topic, queueId)
      expect(max).toBe(kept.filter((p) => p.topic === topic && p.queueId === queueId).length)
      let next = store.getMinOffsetInQueue(topic, queueId)
      while (next < max) {
        const got = store.getMessage('check', topic, queueId, next, 32)
        got.messages.forEach((m, n) => expect(m.queueOffset).toBe(next + n))
        next = got.nextBeginOffset
      }
    }
  }
}

const repairs = (store: MessageStore) =>
  store
    .stats()
    .repairs.map((r) => `${r.action}: ${r.reason}`)
    .join('\n')

describe('recovery decision table: the commit log', () => {
  it('C1 keep: a clean open trusts the shutdown record and scans nothing', async () => {
    const puts = await fill(300)
    const store = await open()
    expect(store.stats().lastExitOK).toBe(true)
    expect(store.stats().recovery).toMatchObject({ scannedBytes: 0, damage: null })
    expect(store.stats().repairs).toEqual([])
    expectAll(store, puts)
  })

  it('C2 keep after a scan: without a shutdown record open checks the last files', async () => {
    const puts = await fill(300)
    zeroFrom(join(dir, 'checkpoint'), 64, 36)
    const store = await open()
    expect(store.stats().recovery?.scannedBytes).toBeGreaterThan(0)
    expect(store.stats().repairs).toEqual([])
    expectAll(store, puts)
  })

  it('C2 a shutdown record that does not match the files is not trusted', async () => {
    const puts = await fill(300)
    const last = puts[puts.length - 1]
    flipByte(last.result.wroteOffset + last.result.wroteBytes - 40) // inside the last record's body
    const store = await open({ corruptionPolicy: 'strict' })
    expect(repairs(store)).toContain('scanned the commit log tail')
    // The damaged last record has only zeros after it: a torn write, cut off under both policies.
    expect(store.stats().recovery?.damage).toMatchObject({ kind: 'torn', offset: last.result.wroteOffset })
    expectAll(store, puts.slice(0, -1))
    expect(store.lookMessageByOffset(last.result.wroteOffset)).toBeNull()
  })

  it('C3 after a crash open scans with CRC checks, re-dispatches, and reports progress', async () => {
    const puts = await fill(300)
    crash()
    const progress: number[][] = []
    const store = await open({ onProgress: (p) => progress.push([p.scannedBytes, p.totalBytes]) })
    expect(store.stats().lastExitOK).toBe(false)
    expect(store.stats().recovery?.scannedBytes).toBeGreaterThan(0)
    expect(progress.length).toBeGreaterThanOrEqual(2)
    const [scanned, total] = progress[progress.length - 1]
    expect(scanned).toBe(total)
    expectAll(store, puts)
  })

  it('C5 truncate: a torn last record (half of it zeros) is cut off, even under strict', async () => {
    const puts = await fill(300)
    const last = puts[puts.length - 1]
    zeroFrom(commitLogFile(last.result.wroteOffset), (last.result.wroteOffset % FILE) + 100)
    crash()
    const store = await open({ corruptionPolicy: 'strict' })
    expect(store.stats().recovery?.damage).toMatchObject({ kind: 'torn', offset: last.result.wroteOffset })
    expect(repairs(store)).toMatch(/truncated the commit log .* a torn write/)
    expectAll(store, puts.slice(0, -1))
  })

  it('C5 a last record without its magic code (a writer killed before finishing it) is a torn write, even under strict', async () => {
    const puts = await fill(300)
    const last = puts[puts.length - 1]
    // writeRecord stores the magic code last; everything else of the record is in place.
    patch(commitLogFile(last.result.wroteOffset), (last.result.wroteOffset % FILE) + 4, Buffer.alloc(4))
    crash()
    const store = await open({ corruptionPolicy: 'strict' })
    expect(store.stats().recovery?.damage).toMatchObject({ kind: 'torn', offset: last.result.wroteOffset })
    expectAll(store, puts.slice(0, -1))
  })

  it('C5 a last record whose properties page never reached the disk (zeros in the properties) is a torn write', async () => {
    const puts = await fill(300)
    const last = puts[puts.length - 1]
    const propsLength = 5 + last.key.length
    patch(
      commitLogFile(last.result.wroteOffset),
      (last.result.wroteOffset % FILE) + last.result.wroteBytes - propsLength + 2,
      Buffer.alloc(propsLength - 2),
    )
    crash()
    const store = await open({ corruptionPolicy: 'strict' })
    expect(store.stats().recovery?.damage).toMatchObject({ kind: 'torn', offset: last.result.wroteOffset })
    expect(store.stats().recovery?.damage?.reason).toMatch(/NUL/)
    expectAll(store, puts.slice(0, -1))
  })

  it('C6 refuse under strict: a bad record with data after it is corruption, reported with its byte range', async () => {
    const puts = await fill(300)
    const bad = puts[250]
    flipByte(bad.result.wroteOffset + bad.result.wroteBytes - 30)
    crash()
    const error = await MessageStore.open(dir, { ...OPTIONS, corruptionPolicy: 'strict' }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'CORRUPTION' })
    expect((error as Error).message).toContain(`[${bad.result.wroteOffset}, ${bad.result.wroteOffset + bad.result.wroteBytes})`)
    expect((error as Error).message).toMatch(/crc/i)
    // Refusing changed nothing: a tolerant open still finds the same damage.
    crash()
    const store = await open()
    expect(store.stats().recovery?.damage).toMatchObject({ kind: 'corrupt', offset: bad.result.wroteOffset })
    expect(repairs(store)).toMatch(/corruption/)
    // C6 truncate under tolerant: everything before the bad record is kept, nothing after is served.
    expectAll(store, puts.slice(0, 250))
    for (const put of puts.slice(250)) expect(store.lookMessageByOffset(put.result.wroteOffset)).toBeNull()
  })

  const headerDamage: [string, (p: Put) => [number, Buffer], RegExp][] = [
    ['queue id', () => [12, Buffer.from([0x80])], /queue id/],
    // The topic sits before the properties length (2 bytes) and 'KEYS\u0001' + key.
    ['topic', (p) => [p.result.wroteBytes - (5 + p.key.length) - 2 - 2, Buffer.from('/')], /topic/],
    ['physical offset', () => [35, Buffer.from([0x55])], /physical offset/],
  ]
  for (const [field, damage, reason] of headerDamage) {
    it(`C6 a damaged ${field} (a header field the body CRC does not cover) is corruption too`, async () => {
      const puts = await fill(300)
      const bad = puts[100]
      const [at, bytes] = damage(bad)
      patch(commitLogFile(bad.result.wroteOffset), (bad.result.wroteOffset % FILE) + at, bytes)
      crash()
      const store = await open()
      expect(store.stats().recovery?.damage).toMatchObject({ kind: 'corrupt', offset: bad.result.wroteOffset })
      expect(store.stats().recovery?.damage?.reason).toMatch(reason)
      expectAll(store, puts.slice(0, 100))
    })
  }

  it('C7 refuse: a commit-log segment of the wrong size', async () => {
    const puts = await fill(300)
    fs.truncateSync(commitLogFile(puts[0].result.wroteOffset), FILE - 1)
    await expect(MessageStore.open(dir, OPTIONS)).rejects.toMatchObject({ code: 'BAD_FILE_SIZE' })
  })

  it('C8 refuse: a segment missing in the middle', async () => {
    const puts = await fill(600)
    expect(fs.readdirSync(join(dir, 'commitlog')).length).toBeGreaterThanOrEqual(4)
    fs.rmSync(commitLogFile(FILE))
    await expect(MessageStore.open(dir, OPTIONS)).rejects.toMatchObject({ code: 'NON_CONTIGUOUS' })
    expect(puts.length).toBe(600)
  })

  it('C9 refuse: a foreign file among the segments', async () => {
    await fill(10)
    fs.writeFileSync(join(dir, 'commitlog', 'notes.txt'), 'hello')
    await expect(MessageStore.open(dir, OPTIONS)).rejects.toMatchObject({ code: 'BAD_FILE_NAME' })
  })

  it('C10 a file creation cut short leaves a .tmp that open deletes', async () => {
    const puts = await fill(50)
    fs.writeFileSync(join(dir, 'commitlog', `${formatOffsetName(FILE * 7)}.tmp`), 'partial')
    const store = await open()
    expect(fs.readdirSync(join(dir, 'commitlog')).some((name) => name.endsWith('.tmp'))).toBe(false)
    expectAll(store, puts)
  })

  it('C11 no commit log at all: the consume queues are deleted', async () => {
    await fill(50)
    fs.rmSync(join(dir, 'commitlog'), { recursive: true })
    const store = await open()
    expect(store.getMaxOffsetInQueue('t0', 0)).toBe(0)
    expect(repairs(store)).toContain('deleted every consume queue')
    expect((await store.putMessage({ topic: 't0', queueId: 0, body: 'fresh' })).queueOffset).toBe(0)
  })
})

describe('recovery decision table: consume queues', () => {
  it('Q1 behind after a crash: lost units are dispatched again', async () => {
    const puts = await fill(300)
    const queue0 = puts.filter((p) => p.topic === 't0' && p.queueId === 0)
    const cut = queue0[queue0.length - 10].result.queueOffset
    zeroFrom(cqFile('t0', 0, cut), (cut * 20) % CQ_FILE)
    crash()
    const store = await open()
    expectAll(store, puts)
  })

  it('Q2 ahead: units past the end of a truncated commit log are cut back', async () => {
    const puts = await fill(300)
    const cut = puts[200]
    zeroFrom(commitLogFile(cut.result.wroteOffset), cut.result.wroteOffset % FILE)
    for (
      let offset = cut.result.wroteOffset - (cut.result.wroteOffset % FILE) + FILE;
      fs.existsSync(commitLogFile(offset));
      offset += FILE
    ) {
      zeroFrom(commitLogFile(offset), 0)
    }
    crash()
    const store = await open()
    expectAll(store, puts.slice(0, 200))
  })

  it('Q3 rebuild: a consume-queue file of the wrong size', async () => {
    const puts = await fill(300)
    fs.appendFileSync(cqFile('t1', 1, 0), 'x')
    const store = await open()
    // After a clean close a queue is checked when it is first used: reading finds it rebuilt.
    expectAll(store, puts)
    expect(repairs(store)).toContain('deleted consume queue t1/1 to rebuild it')
  })

  it('Q4 rebuild: a last unit that points at another queue’s record', async () => {
    const puts = await fill(300)
    const queue = puts.filter((p) => p.topic === 't0' && p.queueId === 1)
    const lastUnit = queue[queue.length - 1].result.queueOffset
    const other = puts.find((p) => p.topic === 't1')!
    const unit = Buffer.alloc(12)
    unit.writeBigInt64BE(BigInt(other.result.wroteOffset), 0)
    unit.writeInt32BE(other.result.wroteBytes, 8)
    patch(cqFile('t0', 1, lastUnit), (lastUnit * 20) % CQ_FILE, unit)
    const store = await open()
    // After a clean close a queue is checked when it is first used: reading finds it rebuilt.
    expectAll(store, puts)
    expect(repairs(store)).toContain('deleted consume queue t0/1 to rebuild it')
  })

  it('Q5 rebuild: records that follow units the queue lost', async () => {
    const puts = await fill(600)
    // A checkpoint that makes the crash recovery start at the last file only.
    const lastFileStart = puts[puts.length - 1].result.wroteOffset - (puts[puts.length - 1].result.wroteOffset % FILE)
    const firstInLastFile = puts.find((p) => p.result.wroteOffset >= lastFileStart)!
    const safe = Buffer.alloc(16)
    safe.writeBigInt64BE(BigInt(firstInLastFile.result.storeTimestamp + 3001), 0)
    safe.writeBigInt64BE(BigInt(firstInLastFile.result.storeTimestamp + 3001), 8)
    patch(join(dir, 'checkpoint'), 0, safe)
    // Queue t1/0 loses units from long before that point.
    const queue = puts.filter((p) => p.topic === 't1' && p.queueId === 0)
    const cut = queue[20].result.queueOffset
    zeroFrom(cqFile('t1', 0, cut), (cut * 20) % CQ_FILE)
    for (let logic = cut * 20 - ((cut * 20) % CQ_FILE) + CQ_FILE; ; logic += CQ_FILE) {
      const path = join(dir, 'consumequeue', 't1', '0', formatOffsetName(logic))
      if (!fs.existsSync(path)) break
      fs.rmSync(path)
    }
    crash()
    const store = await open()
    expect(repairs(store)).toContain('deleted consume queue t1/0 to rebuild it')
    expectAll(store, puts)
  })

  it('Q6 rebuild: after a clean close, a queue deleted from disk is dispatched again', async () => {
    const puts = await fill(300)
    fs.rmSync(join(dir, 'consumequeue', 't1', '1'), { recursive: true })
    const store = await open()
    expect(repairs(store)).toContain('re-dispatching the whole commit log')
    expectAll(store, puts)
  })

  it('Q7 truncate: a torn last unit is dropped, then rebuilt', async () => {
    const puts = await fill(300)
    const queue = puts.filter((p) => p.topic === 't0' && p.queueId === 0)
    const last = queue[queue.length - 1].result.queueOffset
    zeroFrom(cqFile('t0', 0, last), ((last * 20) % CQ_FILE) + 8, 12)
    const store = await open()
    expectAll(store, puts)
  })
})

describe('recovery decision table: index and checkpoint', () => {
  it('I1 after a crash, index files newer than the checkpoint are dropped and every key is indexed again', async () => {
    const puts = await fill(600)
    expect(fs.readdirSync(join(dir, 'index')).length).toBeGreaterThan(1)
    const zeroIndexTime = Buffer.alloc(8)
    patch(join(dir, 'checkpoint'), 16, zeroIndexTime)
    crash()
    const store = await open()
    expectAll(store, puts)
  })

  it('I2 rebuild: an index file of the wrong size', async () => {
    const puts = await fill(300)
    const name = fs.readdirSync(join(dir, 'index'))[0]
    fs.appendFileSync(join(dir, 'index', name), 'x')
    const store = await open()
    expect(repairs(store)).toContain('deleted the index to rebuild it')
    expectAll(store, puts)
  })

  it('I2 rebuild: an index header whose entry count runs past the file', async () => {
    const puts = await fill(300)
    const name = fs.readdirSync(join(dir, 'index')).sort()[0]
    patch(join(dir, 'index', name), 36, Buffer.from([0x7f, 0, 0, 0]))
    const store = await open()
    expect(repairs(store)).toMatch(/deleted the index to rebuild it: .*index count/)
    expectAll(store, puts)
  })

  it('I3 behind: an index that lost its newest file catches up from its end', async () => {
    const puts = await fill(600)
    const names = fs.readdirSync(join(dir, 'index')).sort()
    fs.rmSync(join(dir, 'index', names[names.length - 1]))
    const store = await open()
    expectAll(store, puts)
  })

  it('I4 rebuild: an index that reaches past a truncated commit log', async () => {
    const puts = await fill(300)
    const cut = puts[280]
    zeroFrom(commitLogFile(cut.result.wroteOffset), cut.result.wroteOffset % FILE)
    for (
      let offset = cut.result.wroteOffset - (cut.result.wroteOffset % FILE) + FILE;
      fs.existsSync(commitLogFile(offset));
      offset += FILE
    ) {
      zeroFrom(commitLogFile(offset), 0)
    }
    // A clean close, so the index keeps every file: its last one now reaches past the log's end.
    const store = await open()
    expect(repairs(store)).toContain('deleted the index to rebuild it')
    expectAll(store, puts.slice(0, 280))
    expect(store.queryMessage(cut.topic, cut.key, 4, 0, Date.now() + 1000).messages).toEqual([])
  })

  it('K1 a missing checkpoint is recreated; crash recovery then starts from the first file', async () => {
    const puts = await fill(300)
    fs.rmSync(join(dir, 'checkpoint'))
    crash()
    const store = await open()
    expect(repairs(store)).toContain('recreated the checkpoint')
    expectAll(store, puts)
  })
})
