// Damage in files recovery does not scan (the commit log's and consume queues' older files) is
// found by reads: a record is served only when its header names the commit-log offset the read
// looked for, its properties are what a writer makes, and, read through a queue, it is that
// queue's record at that queue offset (lib/store/read/record-identity.ts).
import { isUtf8 } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { checkRecord, propertiesAreWellFormed } from '../lib/store/commitlog/record.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import type { PutMessageResult } from '../lib/store/types.js'
import { tempDir } from './helpers/tmp.js'

// Small files: the first commit-log file and the first file of each queue are not scanned at open.
const LOG_FILE_BYTES = 16 * 1024
const OPTIONS: OpenOptions = { mappedFileSizeCommitLog: LOG_FILE_BYTES, mappedFileSizeConsumeQueue: 20 * 4 }
const MESSAGES = 80
/** Pads every body, so that the log rolls several times. */
const PAD = `|${'x'.repeat(1000)}`
const UNIT = 20

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-read-identity-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

async function build(): Promise<PutMessageResult[]> {
  const store = await MessageStore.open(dir, OPTIONS)
  const results: PutMessageResult[] = []
  for (let i = 0; i < MESSAGES; i++) {
    results.push(
      await store.putMessage({ topic: `t${i % 2}`, queueId: 0, body: `body-${i}${PAD}`, keys: `k${i}`, properties: { p: `value-${i}` } }),
    )
  }
  await store.close()
  expect(fs.readdirSync(join(dir, 'commitlog')).length).toBeGreaterThan(4)
  return results
}

/** Edits the bytes of the commit log at absolute offset `offset`. */
function editLog(offset: number, edit: (bytes: Buffer, at: number) => void): void {
  const start = offset - (offset % LOG_FILE_BYTES)
  const file = join(dir, 'commitlog', String(start).padStart(20, '0'))
  const bytes = fs.readFileSync(file)
  edit(bytes, offset - start)
  fs.writeFileSync(file, bytes)
}

async function reopen(): Promise<MessageStore> {
  return MessageStore.open(dir, OPTIONS)
}

function queueBodies(store: MessageStore, topic: string): string[] {
  const bodies: string[] = []
  for (let next = 0; next < store.getMaxOffsetInQueue(topic, 0); ) {
    const got = store.getMessage('g', topic, 0, next, 8)
    bodies.push(...got.messages.map((m) => m.body.toString().split('|')[0]))
    expect(got.nextBeginOffset).toBeGreaterThan(next)
    next = got.nextBeginOffset
  }
  return bodies
}

describe('reads serve a record only where it says it is', () => {
  it('a record whose PHYSICALOFFSET was damaged is not served by offset, by key or by its queue', async () => {
    const results = await build()
    const victim = results[2] // t0, queue offset 1, in the first commit-log file
    editLog(victim.wroteOffset, (bytes, at) => {
      bytes[at + 28 + 7] ^= 0x10 // the low byte of PHYSICALOFFSET
    })
    const store = await reopen()
    try {
      expect(store.lookMessageByOffset(victim.wroteOffset)).toBeNull()
      expect(store.queryMessage('t0', 'k2', 8).messages).toEqual([])
      const bodies = queueBodies(store, 't0')
      expect(bodies).not.toContain('body-2')
      expect(bodies).toContain('body-0')
      expect(bodies).toContain('body-4')
    } finally {
      await store.close()
    }
  })

  it("a unit damaged to point at another queue's record is skipped, not served as that record", async () => {
    await build()
    const own = join(dir, 'consumequeue', 't0', '0', '0'.repeat(20))
    const other = join(dir, 'consumequeue', 't1', '0', '0'.repeat(20))
    const units = fs.readFileSync(own)
    fs.readFileSync(other).copy(units, UNIT, UNIT, 2 * UNIT) // unit 1 of t0 := unit 1 of t1
    fs.writeFileSync(own, units)
    const store = await reopen()
    try {
      const bodies = queueBodies(store, 't0')
      expect(bodies).not.toContain('body-3') // t1's record at its queue offset 1
      expect(bodies).not.toContain('body-2') // t0's own record at queue offset 1 has no unit now
      expect(bodies.slice(0, 2)).toEqual(['body-0', 'body-4'])
    } finally {
      await store.close()
    }
  })

  for (const [what, edit] of [
    ['a byte that is not UTF-8', (bytes: Buffer, end: number) => (bytes[end - 2] = 0xc3)],
    ['a lost name-value separator', (bytes: Buffer, end: number) => (bytes[bytes.lastIndexOf(1, end)] = 0x03)],
  ] as const) {
    it(`a record whose properties hold ${what} is not served, and the checked scan calls it bad`, async () => {
      const results = await build()
      const victim = results[2]
      let size = 0
      editLog(victim.wroteOffset, (bytes, at) => {
        size = bytes.readInt32BE(at)
        edit(bytes, at + size)
        expect(checkRecord(bytes, at, bytes.length, true).status).toBe('BAD')
      })
      expect(size).toBeGreaterThan(0)
      const store = await reopen()
      try {
        expect(store.lookMessageByOffset(victim.wroteOffset)).toBeNull()
        expect(queueBodies(store, 't0')).not.toContain('body-2')
      } finally {
        await store.close()
      }
    })
  }

  it('well-formed properties: UTF-8, a 0x01 in every non-empty pair; empty values and a trailing 0x02 pass', () => {
    const wellFormed = (b: Buffer, from = 0, to = b.length) =>
      propertiesAreWellFormed(b, new DataView(b.buffer, b.byteOffset, b.length), from, to)
    const ok = (s: string) => wellFormed(Buffer.from(s, 'latin1'))
    expect(ok('')).toBe(true)
    expect(ok('a\u0001b\u0002c\u0001d')).toBe(true)
    expect(ok('a\u0001b\u0002')).toBe(true)
    expect(ok('a\u0001\u0002c\u0001d')).toBe(true)
    expect(ok('a\u0001b\u0002cd')).toBe(false)
    expect(ok('ab')).toBe(false)
    // A pair without 0x01 in the middle of a word, at the end, after a long clean run.
    expect(ok('KEYS\u0001k1\u0002UNIQ_KEY\u0001AC1234567890\u0002TAGS\u0001a')).toBe(true)
    expect(ok('KEYS\u0001k1\u0002UNIQ_KEYAC1234567890\u0002TAGS\u0001a')).toBe(false)
    expect(ok('KEYS\u0001k1\u0002UNIQ_KEY\u0001AC1234567890\u0002TAGSab')).toBe(false)
    const utf8 = Buffer.from('n\u0001é', 'utf8')
    expect(wellFormed(utf8)).toBe(true)
    expect(wellFormed(utf8, 0, utf8.length - 1)).toBe(false) // é cut in half
    const high = Buffer.from('name\u0001valu\u00e9', 'latin1') // 0xe9 alone: not UTF-8, in the last word
    expect(wellFormed(high)).toBe(false)
  })

  it('well-formed properties: four bytes at a time agrees with the byte-by-byte rule, at every offset and length', () => {
    // The rule spelled out one byte at a time, as the reference.
    const reference = (b: Buffer, from: number, to: number) => {
      let pairAt = from
      let named = false
      for (let i = from; i < to; i++) {
        if (b[i] === 2) {
          if (i > pairAt && !named) return false
          pairAt = i + 1
          named = false
        } else if (b[i] === 1) named = true
      }
      if (to > pairAt && !named) return false
      return isUtf8(b.subarray(from, to))
    }
    // Bytes drawn mostly from the separators and their neighbours, some letters, and a few high ones.
    const alphabet = [0, 1, 2, 3, 4, 0x41, 0x61, 0x7f, 0x80, 0xc3, 0xa9, 0xff]
    let seed = 12345
    const next = () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 16
    const b = Buffer.alloc(64)
    const dv = new DataView(b.buffer, b.byteOffset, b.length)
    let disagreements = 0
    let passed = 0
    for (let round = 0; round < 20_000; round++) {
      for (let i = 0; i < b.length; i++) b[i] = next() % 4 === 0 ? alphabet[next() % alphabet.length] : 0x61 + (next() % 26)
      const from = next() % 16
      const to = from + (next() % 48)
      const expected = reference(b, from, to)
      if (propertiesAreWellFormed(b, dv, from, to) !== expected) disagreements++
      if (expected) passed++
    }
    expect(disagreements).toBe(0)
    expect(passed).toBeGreaterThan(1000)
  })
})
