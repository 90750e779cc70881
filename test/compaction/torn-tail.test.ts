// A compaction log's files are scanned at open up to the first bytes that are not a record (a
// record torn by a power cut, or damage). What lies past that point must not come back: new
// records are appended there, and a stale record behind one of the same size would be read again
// at the next open, under an offset handed out since. A sealed file cut short that way is damage
// (it was complete once), and is reported.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { CompactionService } from '../../lib/store/compaction/compaction-service.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { TOPIC_CONFIG_DEFAULTS, type TopicConfig } from '../../lib/store/topics/topic-table.js'
import { formatOffsetName } from '../../lib/store/mapped/segment-name.js'
import { ManualClock, makeRecord, readAll, smallStoreOptions } from '../helpers/compaction.js'
import { tempDir } from '../helpers/tmp.js'

const T = 'kv'
let dir: string
let clock: ManualClock
let config: TopicConfig
const services: CompactionService[] = []

beforeEach(() => {
  dir = tempDir('mqstore-compaction-tail-')
  clock = new ManualClock()
  config = { ...TOPIC_CONFIG_DEFAULTS, cleanupPolicy: 'compact', segmentBytes: 4096, minCleanableDirtyRatio: 0 }
})
afterEach(async () => {
  for (const s of services.splice(0)) await s.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

function open(afterCrash = false): CompactionService {
  const s = new CompactionService(join(dir, 'compaction'), clock, () => config, { enabled: false, fileDeleteDelayMs: 0 })
  s.open(afterCrash)
  services.push(s)
  return s
}

async function close(s: CompactionService): Promise<void> {
  services.splice(services.indexOf(s), 1)
  await s.close()
}

/** Puts key `k<i>` with a value of the same length each time, so that every record has one size. */
function put(s: CompactionService, values: string[]): void {
  for (const value of values) {
    const offset = s.maxOffset(T, 0)
    const { request, bytes } = makeRecord(T, 0, offset, `k${offset}`, value, clock.now())
    s.dispatch(request, bytes)
    clock.advance(1)
  }
}

function fileOf(base: number): string {
  return join(dir, 'compaction', T, '0', formatOffsetName(base))
}

/** Zeroes `length` bytes at `position` (a page a power cut took back to what was synced). */
function zero(file: string, position: number, length: number): void {
  const fd = fs.openSync(file, 'r+')
  try {
    fs.writeSync(fd, Buffer.alloc(length), 0, length, position)
  } finally {
    fs.closeSync(fd)
  }
}

/** Breaks the magic code of the record at `position` (as a torn write or damage would). */
function tear(file: string, position: number): void {
  const fd = fs.openSync(file, 'r+')
  try {
    fs.writeSync(fd, Buffer.from([0xde, 0xad, 0xbe, 0xef]), 0, 4, position + 4)
  } finally {
    fs.closeSync(fd)
  }
}

describe('a compaction log file cut short by a bad record', () => {
  it('active file: what lies past the bad record does not come back behind new appends', async () => {
    let s = open()
    put(s, ['aaaa', 'bbbb', 'cccc'])
    const size = s.logOf(T, 0)!.segments[0].sizeAt(0)
    await close(s)
    // The second record is torn; the third stays whole behind it.
    tear(fileOf(0), size)

    s = open()
    expect(s.maxOffset(T, 0)).toBe(1)
    // A new record of the same size takes the torn one's place (offset 1).
    put(s, ['dddd'])
    await close(s)

    s = open()
    expect(readAll(s, T, 0).map((r) => [r.offset, r.value])).toEqual([
      [0, 'aaaa'],
      [1, 'dddd'],
    ])
    expect(s.maxOffset(T, 0)).toBe(2)
  })

  it('active file after a crash: records past a lost one (zeros) do not come back behind new appends', async () => {
    let s = open()
    put(s, ['aaaa', 'bbbb', 'cccc', 'dddd'])
    const size = s.logOf(T, 0)!.segments[0].sizeAt(0)
    await close(s)
    // The second record was lost (its bytes are zeros again); the two after it were kept.
    zero(fileOf(0), size, size)

    s = open(true)
    expect(s.maxOffset(T, 0)).toBe(1)
    expect(s.openReports).toEqual([])
    put(s, ['eeee', 'ffff'])
    await close(s)

    s = open()
    expect(readAll(s, T, 0).map((r) => [r.offset, r.value])).toEqual([
      [0, 'aaaa'],
      [1, 'eeee'],
      [2, 'ffff'],
    ])
    expect(s.maxOffset(T, 0)).toBe(3)
  })

  it('sealed file: the records dropped are reported at open', async () => {
    let s = open()
    put(s, ['aaaa', 'bbbb', 'cccc'])
    const log = s.logOf(T, 0)!
    const size = log.segments[0].sizeAt(0)
    log.roll(3, config.segmentBytes, clock.now())
    put(s, ['eeee'])
    await close(s)
    tear(fileOf(0), size)

    s = open()
    expect(readAll(s, T, 0).map((r) => r.offset)).toEqual([0, 3])
    expect(s.openReports).toEqual([
      { topic: T, queueId: 0, report: expect.objectContaining({ cutShort: [{ file: fileOf(0), position: size, sealed: true }] }) },
    ])
  })

  it('a store reports a sealed file it found cut short as a repair, and serves what is left', async () => {
    const storeDir = join(dir, 'store')
    const options = smallStoreOptions({ topics: { [T]: { cleanupPolicy: 'compact', segmentBytes: 4096 } } })
    let store = await MessageStore.open(storeDir, options)
    for (let i = 0; i < 60; i++) {
      expect((await store.putMessage({ topic: T, queueId: 0, body: 'x'.repeat(200), keys: `k${i}` })).status).toBe('PUT_OK')
    }
    await store.close()
    const logDir = join(storeDir, 'compaction', T, '0')
    const files = fs.readdirSync(logDir).sort()
    expect(files.length).toBeGreaterThan(2)
    tear(join(logDir, files[0]), 0)

    store = await MessageStore.open(storeDir, options)
    try {
      expect(store.stats().repairs).toEqual([
        {
          action: expect.stringContaining(`dropped what follows byte 0 of ${join(logDir, files[0])}`),
          reason: expect.stringContaining('damaged'),
        },
      ])
      const got = store.getMessage('g', T, 0, 0, 64)
      expect(got.messages.length).toBeGreaterThan(0)
      expect(got.messages[0].queueOffset).toBe(Number(files[1]))
    } finally {
      await store.close()
    }
  })
})
