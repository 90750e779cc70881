// The queue-ends file: every consume queue's end (max offset) at the last clean close, written by
// close() next to the checkpoint's shutdown record (mqstore only; RocketMQ ignores the file). A
// clean reopen defers each queue to its first use and finds its end by bisection; comparing that
// end with this table notices units lost behind zeros at a queue's tail since the close, which the
// record's store-wide figures cannot pin to a queue (docs/recovery.md, Q6).
//
//   offset  width  field
//   0       4      magic 'MQQE'
//   4       8      commit-log end offset of the shutdown record it belongs to
//   12      8      offset of the last record, as in that record
//   20      4      number of consume queues, as in that record
//   24      8      sum of their max offsets, as in that record
//   32      8      physicMsgTimestamp, as in that record
//   40      8      logicsMsgTimestamp, as in that record
//   48      8      indexMsgTimestamp, as in that record
//   56      4      number of topic blocks
//   60      ...    topic blocks: 1-byte topic length L, L bytes of topic (ASCII), 4-byte number of
//                  queues n, then n entries of (4-byte queueId, 8-byte max offset), ids ascending
//   end-4   4      CRC-32 of every byte before it
//
// Bytes 4..55 (the seal) repeat the shutdown record's figures: the table is trusted only with the
// record it was written with, never one left by an earlier close. It may list fewer queues than
// the record counts (a queue whose end was not known at close); those are checked by count only.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import * as zlib from 'node:zlib'

import { readInt64BE, writeInt64BE } from '../bytes.js'
import { validateTopic } from '../commitlog/record.js'
import { writeFileDurably } from '../mapped/directory.js'

const MAGIC = 0x4d515145 // 'MQQE'
const OFFSET_SEAL = 4
const OFFSET_TOPIC_COUNT = 56
const HEADER_SIZE = 60
const CRC_SIZE = 4
const ENTRY_SIZE = 12
/** A table larger than this is not read (about 5 million queues): it cannot be one mqstore wrote. */
const MAX_FILE_BYTES = 64 * 1024 * 1024

/** The shutdown record's figures a table is bound to. */
export interface QueueEndsSeal {
  endOffset: number
  lastRecordOffset: number
  queueCount: number
  queueUnitSum: number
  physicMsgTimestamp: number
  logicsMsgTimestamp: number
  indexMsgTimestamp: number
}

/** Max offsets by topic and queue id, as the store knows them at a close. */
export class QueueEnds {
  private readonly topics = new Map<string, Map<number, number>>()
  private count = 0

  set(topic: string, queueId: number, maxOffset: number): void {
    let ids = this.topics.get(topic)
    if (ids === undefined) this.topics.set(topic, (ids = new Map()))
    if (!ids.has(queueId)) this.count++
    ids.set(queueId, maxOffset)
  }

  /** The recorded end of a queue, or null when the table does not list it. */
  get(topic: string, queueId: number): number | null {
    return this.topics.get(topic)?.get(queueId) ?? null
  }

  get size(): number {
    return this.count
  }

  *entries(): Generator<[topic: string, queueId: number, maxOffset: number]> {
    for (const [topic, ids] of this.topics) for (const [queueId, max] of ids) yield [topic, queueId, max]
  }
}

/**
 * A table as read back. Open only checks its CRC and seal and indexes its topic blocks; a queue's
 * entry is found by bisection in its topic's block when the queue is opened, so a clean reopen of
 * 20,000 queues reads one file and decodes no entry.
 */
export class RecordedQueueEnds {
  private constructor(
    private readonly bytes: Buffer,
    /** Per topic: where its entries start, and how many. */
    private readonly blocks: Map<string, { at: number; count: number }>,
    readonly size: number,
  ) {}

  /** Indexes the topic blocks of a table whose CRC was checked; null when they do not fill it exactly. */
  static index(b: Buffer, from: number, end: number, topicCount: number): RecordedQueueEnds | null {
    const blocks = new Map<string, { at: number; count: number }>()
    let size = 0
    let at = from
    for (let t = topicCount; t > 0; t--) {
      if (at + 1 > end) return null
      const length = b.readUInt8(at)
      if (at + 1 + length + 4 > end) return null
      const topic = b.toString('latin1', at + 1, at + 1 + length)
      if (validateTopic(topic) !== null || blocks.has(topic)) return null
      at += 1 + length
      const count = b.readInt32BE(at)
      at += 4
      if (count < 0 || at + count * ENTRY_SIZE > end) return null
      blocks.set(topic, { at, count })
      size += count
      at += count * ENTRY_SIZE
    }
    return at === end && topicCount >= 0 ? new RecordedQueueEnds(b, blocks, size) : null
  }

  /** The recorded end of a queue, or null when the table does not list it. */
  get(topic: string, queueId: number): number | null {
    const block = this.blocks.get(topic)
    if (block === undefined) return null
    // Ids are ascending within a block (encodeQueueEnds sorts them).
    let low = 0
    let high = block.count
    while (low < high) {
      const mid = (low + high) >>> 1
      const id = this.bytes.readInt32BE(block.at + mid * ENTRY_SIZE)
      if (id === queueId) {
        const max = readInt64BE(this.bytes, block.at + mid * ENTRY_SIZE + 4)
        return Number.isSafeInteger(max) && max >= 0 ? max : null
      }
      if (id < queueId) low = mid + 1
      else high = mid
    }
    return null
  }

  *entries(): Generator<[topic: string, queueId: number, maxOffset: number]> {
    for (const [topic, { at, count }] of this.blocks) {
      for (let i = 0; i < count; i++) {
        const queueId = this.bytes.readInt32BE(at + i * ENTRY_SIZE)
        const max = readInt64BE(this.bytes, at + i * ENTRY_SIZE + 4)
        if (Number.isSafeInteger(max) && max >= 0) yield [topic, queueId, max]
      }
    }
  }
}

export function encodeQueueEnds(seal: QueueEndsSeal, ends: QueueEnds): Buffer {
  const byTopic = new Map<string, [number, number][]>()
  for (const [topic, queueId, max] of ends.entries()) {
    let list = byTopic.get(topic)
    if (list === undefined) byTopic.set(topic, (list = []))
    list.push([queueId, max])
  }
  let size = HEADER_SIZE + CRC_SIZE
  for (const [topic, list] of byTopic) size += 1 + topic.length + 4 + list.length * ENTRY_SIZE
  const b = Buffer.alloc(size)
  b.writeUInt32BE(MAGIC, 0)
  writeSeal(b, seal)
  b.writeInt32BE(byTopic.size, OFFSET_TOPIC_COUNT)
  let at = HEADER_SIZE
  for (const [topic, list] of byTopic) {
    b.writeUInt8(topic.length, at)
    at += 1 + b.write(topic, at + 1, 'latin1')
    b.writeInt32BE(list.length, at)
    at += 4
    list.sort((x, y) => x[0] - y[0])
    for (const [queueId, max] of list) {
      b.writeInt32BE(queueId, at)
      writeInt64BE(b, at + 4, max)
      at += ENTRY_SIZE
    }
  }
  b.writeUInt32BE(zlib.crc32(b.subarray(0, at)), at)
  return b
}

/** The table and its seal, or null when the bytes are not a whole, valid table. */
export function decodeQueueEnds(b: Buffer): { seal: QueueEndsSeal; ends: RecordedQueueEnds } | null {
  if (b.length < HEADER_SIZE + CRC_SIZE || b.readUInt32BE(0) !== MAGIC) return null
  const crcAt = b.length - CRC_SIZE
  if (zlib.crc32(b.subarray(0, crcAt)) !== b.readUInt32BE(crcAt)) return null
  const seal = readSeal(b)
  if (seal === null) return null
  const ends = RecordedQueueEnds.index(b, HEADER_SIZE, crcAt, b.readInt32BE(OFFSET_TOPIC_COUNT))
  return ends === null ? null : { seal, ends }
}

/** True when a table's seal names exactly this shutdown record. */
export function sealMatches(seal: QueueEndsSeal, record: QueueEndsSeal): boolean {
  return (
    seal.endOffset === record.endOffset &&
    seal.lastRecordOffset === record.lastRecordOffset &&
    seal.queueCount === record.queueCount &&
    seal.queueUnitSum === record.queueUnitSum &&
    seal.physicMsgTimestamp === record.physicMsgTimestamp &&
    seal.logicsMsgTimestamp === record.logicsMsgTimestamp &&
    seal.indexMsgTimestamp === record.indexMsgTimestamp
  )
}

/**
 * Writes the table so that a crash leaves the old file or the new one (temp file, sync, rename,
 * directory sync). Throws on failure (the caller goes on without a table).
 */
export function writeQueueEndsFile(path: string, seal: QueueEndsSeal, ends: QueueEnds): void {
  writeFileDurably(path, encodeQueueEnds(seal, ends))
}

/** The table at `path` if it is valid and sealed with `record`; null otherwise (missing, damaged, stale). */
export function readQueueEndsFile(path: string, record: QueueEndsSeal): RecordedQueueEnds | null {
  let bytes: Buffer
  try {
    if (fs.statSync(path).size > MAX_FILE_BYTES) return null
    bytes = fs.readFileSync(path)
  } catch {
    return null
  }
  const table = decodeQueueEnds(bytes)
  return table !== null && sealMatches(table.seal, record) ? table.ends : null
}

function writeSeal(b: Buffer, seal: QueueEndsSeal): void {
  writeInt64BE(b, OFFSET_SEAL, seal.endOffset)
  writeInt64BE(b, OFFSET_SEAL + 8, seal.lastRecordOffset)
  b.writeInt32BE(seal.queueCount, OFFSET_SEAL + 16)
  writeInt64BE(b, OFFSET_SEAL + 20, seal.queueUnitSum)
  writeInt64BE(b, OFFSET_SEAL + 28, seal.physicMsgTimestamp)
  writeInt64BE(b, OFFSET_SEAL + 36, seal.logicsMsgTimestamp)
  writeInt64BE(b, OFFSET_SEAL + 44, seal.indexMsgTimestamp)
}

function readSeal(b: Buffer): QueueEndsSeal | null {
  const seal = {
    endOffset: readInt64BE(b, OFFSET_SEAL),
    lastRecordOffset: readInt64BE(b, OFFSET_SEAL + 8),
    queueCount: b.readInt32BE(OFFSET_SEAL + 16),
    queueUnitSum: readInt64BE(b, OFFSET_SEAL + 20),
    physicMsgTimestamp: readInt64BE(b, OFFSET_SEAL + 28),
    logicsMsgTimestamp: readInt64BE(b, OFFSET_SEAL + 36),
    indexMsgTimestamp: readInt64BE(b, OFFSET_SEAL + 44),
  }
  for (const value of Object.values(seal)) if (!Number.isSafeInteger(value)) return null
  return seal
}
