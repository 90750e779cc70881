// The checkpoint file: 4 KiB, three big-endian longs, forced to disk when written.
//
//   offset  width  field
//   0       8      physicMsgTimestamp  store time of the last message in flushed commit-log data
//   8       8      logicsMsgTimestamp  store time of the last message whose consume-queue unit is flushed
//   16      8      indexMsgTimestamp   end time of the last index file known complete and flushed
//   24..63  -      zeros (RocketMQ 5 uses 24 and 32)
//   64      4      shutdown record magic 'MQS2' (mqstore only; RocketMQ ignores these bytes)
//   68      8      commit-log end offset at the last clean close
//   76      8      offset of the last record then (-1: empty log)
//   84      4      number of consume queues then
//   88      8      sum of their max offsets (units written)
//   96      8      physicMsgTimestamp as written at that close
//   104     8      logicsMsgTimestamp as written then
//   112     8      indexMsgTimestamp as written then
//   120     4      CRC-32 of bytes 64..119
//   124..   -      zeros
//
// The shutdown record lets a clean open trust the commit log's end without scanning. It is
// written by close() after everything is flushed and erased by open(). Another writer (a RocketMQ
// broker given the directory) leaves it in place, so open trusts it only while the checkpoint's
// timestamps are still the ones it recorded and no record follows its end (recovery/
// shutdown-record.ts). Records of the first layout ('MQSD', no timestamps) are not trusted.
//
// Next to the record, close() writes the queue-ends file (queue/queue-ends.ts): each queue's end,
// sealed with the record's figures, so that a queue opened on first use is checked on its own.
import * as fs from 'node:fs'
import * as zlib from 'node:zlib'

import { readInt64BE, writeInt64BE } from './bytes.js'
import { MappedFile } from './mapped/mapped-file.js'
import { type QueueEnds, type QueueEndsSeal, type RecordedQueueEnds, readQueueEndsFile, writeQueueEndsFile } from './queue/queue-ends.js'

export const CHECKPOINT_FILE_SIZE = 4096
const OFFSET_PHYSIC_MSG_TIMESTAMP = 0
export const OFFSET_LOGICS_MSG_TIMESTAMP = 8
const OFFSET_INDEX_MSG_TIMESTAMP = 16
const OFFSET_SHUTDOWN_MAGIC = 64
const OFFSET_SHUTDOWN_END = 68
const OFFSET_SHUTDOWN_LAST_RECORD = 76
const OFFSET_SHUTDOWN_QUEUE_COUNT = 84
const OFFSET_SHUTDOWN_UNIT_SUM = 88
const OFFSET_SHUTDOWN_PHYSIC_TIMESTAMP = 96
const OFFSET_SHUTDOWN_LOGICS_TIMESTAMP = 104
const OFFSET_SHUTDOWN_INDEX_TIMESTAMP = 112
const OFFSET_SHUTDOWN_CRC = 120
const SHUTDOWN_RECORD_END = 124
const SHUTDOWN_MAGIC = 0x4d515332 // 'MQS2'
/** The bytes that hold the three timestamps. */
export const CHECKPOINT_TIMESTAMPS_SIZE = 24

export interface ShutdownRecord {
  endOffset: number
  lastRecordOffset: number
  /** How many consume queues there were, and the sum of their max offsets. */
  queueCount: number
  queueUnitSum: number
}

/** The checkpoint's three timestamps, as a shutdown record saw them written. */
export interface CheckpointTimestamps {
  physicMsgTimestamp: number
  logicsMsgTimestamp: number
  indexMsgTimestamp: number
}

/**
 * The three timestamps from the first 24 bytes of a checkpoint. A value that is not a positive
 * safe integer (a damaged or fresh file) reads as 0, which makes recovery start from the beginning.
 */
export function decodeCheckpointTimestamps(buffer: Buffer): CheckpointTimestamps {
  return {
    physicMsgTimestamp: readTimestamp(buffer, OFFSET_PHYSIC_MSG_TIMESTAMP),
    logicsMsgTimestamp: readTimestamp(buffer, OFFSET_LOGICS_MSG_TIMESTAMP),
    indexMsgTimestamp: readTimestamp(buffer, OFFSET_INDEX_MSG_TIMESTAMP),
  }
}

/** A shutdown record as read back, with the checkpoint it was written with. */
export interface StoredShutdownRecord extends ShutdownRecord {
  checkpointAtClose: CheckpointTimestamps
  /** Each queue's end at that close (the queue-ends file), or null when it is missing, damaged or not this record's. */
  queueEnds?: RecordedQueueEnds | null
}

/** The clean-shutdown record of a whole checkpoint file's bytes, or null when there is none or it fails its CRC. */
export function decodeShutdownRecord(b: Buffer): StoredShutdownRecord | null {
  if (b.length < SHUTDOWN_RECORD_END) return null
  if (b.readInt32BE(OFFSET_SHUTDOWN_MAGIC) !== SHUTDOWN_MAGIC) return null
  const crc = zlib.crc32(b.subarray(OFFSET_SHUTDOWN_MAGIC, OFFSET_SHUTDOWN_CRC))
  if (b.readUInt32BE(OFFSET_SHUTDOWN_CRC) !== crc) return null
  const endOffset = readInt64BE(b, OFFSET_SHUTDOWN_END)
  const lastRecordOffset = readInt64BE(b, OFFSET_SHUTDOWN_LAST_RECORD)
  const queueCount = b.readInt32BE(OFFSET_SHUTDOWN_QUEUE_COUNT)
  const queueUnitSum = readInt64BE(b, OFFSET_SHUTDOWN_UNIT_SUM)
  if (!Number.isSafeInteger(endOffset) || endOffset < 0 || !Number.isSafeInteger(lastRecordOffset)) return null
  const checkpointAtClose = {
    physicMsgTimestamp: readTimestamp(b, OFFSET_SHUTDOWN_PHYSIC_TIMESTAMP),
    logicsMsgTimestamp: readTimestamp(b, OFFSET_SHUTDOWN_LOGICS_TIMESTAMP),
    indexMsgTimestamp: readTimestamp(b, OFFSET_SHUTDOWN_INDEX_TIMESTAMP),
  }
  return { endOffset, lastRecordOffset, queueCount, queueUnitSum, checkpointAtClose }
}

export class StoreCheckpoint {
  physicMsgTimestamp = 0
  logicsMsgTimestamp = 0
  /**
   * Store time of the last record dispatched to a consume queue, in memory only. It becomes
   * logicsMsgTimestamp once every queue is flushed past it: a checkpoint written in between (an
   * index roll, the commit-log flush) must not claim units that a power cut can still lose, or
   * the next recovery would start its scan after them.
   */
  logicsDispatchedTimestamp = 0
  indexMsgTimestamp = 0
  /** True when the file was missing or of the wrong size and was created anew. */
  readonly recreated: boolean
  private readonly file: MappedFile

  /**
   * Opens the checkpoint, creating it zero-filled when absent or of the wrong size. `queueEndsPath`
   * names the queue-ends file written with the shutdown record (null: none is written or read).
   */
  constructor(
    path: string,
    readOnly = false,
    private readonly queueEndsPath: string | null = null,
  ) {
    let existed = false
    try {
      existed = fs.statSync(path).size === CHECKPOINT_FILE_SIZE
    } catch {
      existed = false
    }
    this.recreated = !existed
    if (!existed && !readOnly) fs.rmSync(path, { force: true })
    this.file = existed
      ? MappedFile.open(path, CHECKPOINT_FILE_SIZE, { fileFromOffset: 0, readOnly })
      : MappedFile.create(path, CHECKPOINT_FILE_SIZE, { fileFromOffset: 0 })
    this.file.setPositions(CHECKPOINT_FILE_SIZE)
    const view = this.file.selectMappedBuffer(0, CHECKPOINT_TIMESTAMPS_SIZE)!
    try {
      const timestamps = decodeCheckpointTimestamps(view.buffer)
      this.physicMsgTimestamp = timestamps.physicMsgTimestamp
      this.logicsMsgTimestamp = timestamps.logicsMsgTimestamp
      this.indexMsgTimestamp = timestamps.indexMsgTimestamp
    } finally {
      view.release()
    }
  }

  /** max(0, min(physic, logics) − 3 s): recovery starts at a file whose first record is older. */
  getMinTimestamp(): number {
    return Math.max(0, Math.min(this.physicMsgTimestamp, this.logicsMsgTimestamp) - 3000)
  }

  getMinTimestampIndex(): number {
    return Math.min(this.getMinTimestamp(), this.indexMsgTimestamp)
  }

  /**
   * Called before a consume queue is deleted to be rebuilt: the checkpoint stops vouching for the
   * queues (logicsMsgTimestamp 0, forced to disk first), so that a power cut before the rebuilt
   * files are synced sends the next recovery's scan to the start of the log, which rebuilds them
   * again. Vouching for the deleted files would start it past their records for good. The next
   * flush of every queue (a thorough pass, close) makes the rebuilt files durable and vouches
   * again, for at least the time withdrawn.
   */
  withdrawLogics(): void {
    if (this.logicsMsgTimestamp === 0) return
    this.logicsDispatchedTimestamp = Math.max(this.logicsDispatchedTimestamp, this.logicsMsgTimestamp)
    this.logicsMsgTimestamp = 0
    this.flush()
  }

  /** Stores the fields into the mapping and forces them to disk. */
  flush(): void {
    const buffer = this.file.mappedBuffer()
    writeInt64BE(buffer, OFFSET_PHYSIC_MSG_TIMESTAMP, Math.trunc(this.physicMsgTimestamp))
    writeInt64BE(buffer, OFFSET_LOGICS_MSG_TIMESTAMP, Math.trunc(this.logicsMsgTimestamp))
    writeInt64BE(buffer, OFFSET_INDEX_MSG_TIMESTAMP, Math.trunc(this.indexMsgTimestamp))
    this.file.flushedPosition = 0
    this.file.flush(0)
  }

  /** The clean-shutdown record, or null when there is none or it fails its CRC. */
  readShutdownRecord(): StoredShutdownRecord | null {
    const view = this.file.selectMappedBuffer(0, CHECKPOINT_FILE_SIZE)
    if (view === null) return null
    let record: StoredShutdownRecord | null
    try {
      record = decodeShutdownRecord(view.buffer)
    } finally {
      view.release()
    }
    if (record !== null && this.queueEndsPath !== null) {
      record.queueEnds = readQueueEndsFile(this.queueEndsPath, { ...record, ...record.checkpointAtClose })
    }
    return record
  }

  /**
   * Writes the clean-shutdown record (with the timestamps) and forces it to disk; first, with
   * `ends`, the queue-ends file sealed with the same figures. A table that cannot be written is
   * removed instead (the next open then compares counts only): it is never a reason to fail close.
   */
  writeShutdownRecord(record: ShutdownRecord, ends: QueueEnds | null = null): void {
    if (this.queueEndsPath !== null && ends !== null) {
      const seal: QueueEndsSeal = {
        ...record,
        physicMsgTimestamp: Math.trunc(this.physicMsgTimestamp),
        logicsMsgTimestamp: Math.trunc(this.logicsMsgTimestamp),
        indexMsgTimestamp: Math.trunc(this.indexMsgTimestamp),
      }
      try {
        writeQueueEndsFile(this.queueEndsPath, seal, ends)
      } catch {
        removeQuietly(this.queueEndsPath)
        removeQuietly(`${this.queueEndsPath}.tmp`)
      }
    }
    const b = this.file.mappedBuffer()
    b.writeInt32BE(SHUTDOWN_MAGIC, OFFSET_SHUTDOWN_MAGIC)
    writeInt64BE(b, OFFSET_SHUTDOWN_END, record.endOffset)
    writeInt64BE(b, OFFSET_SHUTDOWN_LAST_RECORD, record.lastRecordOffset)
    b.writeInt32BE(record.queueCount, OFFSET_SHUTDOWN_QUEUE_COUNT)
    writeInt64BE(b, OFFSET_SHUTDOWN_UNIT_SUM, record.queueUnitSum)
    writeInt64BE(b, OFFSET_SHUTDOWN_PHYSIC_TIMESTAMP, Math.trunc(this.physicMsgTimestamp))
    writeInt64BE(b, OFFSET_SHUTDOWN_LOGICS_TIMESTAMP, Math.trunc(this.logicsMsgTimestamp))
    writeInt64BE(b, OFFSET_SHUTDOWN_INDEX_TIMESTAMP, Math.trunc(this.indexMsgTimestamp))
    b.writeUInt32BE(zlib.crc32(b.subarray(OFFSET_SHUTDOWN_MAGIC, OFFSET_SHUTDOWN_CRC)), OFFSET_SHUTDOWN_CRC)
    this.flush()
  }

  /** The timestamps as read at open (before this run changed any). */
  timestamps(): CheckpointTimestamps {
    return {
      physicMsgTimestamp: this.physicMsgTimestamp,
      logicsMsgTimestamp: this.logicsMsgTimestamp,
      indexMsgTimestamp: this.indexMsgTimestamp,
    }
  }

  /** Erases the clean-shutdown record and forces that to disk: the store is about to change. */
  clearShutdownRecord(): void {
    this.file.mappedBuffer().fill(0, OFFSET_SHUTDOWN_MAGIC, SHUTDOWN_RECORD_END)
    this.flush()
  }

  shutdown(): void {
    this.file.shutdown(0)
  }
}

function readTimestamp(buffer: Buffer, offset: number): number {
  const value = readInt64BE(buffer, offset)
  return Number.isSafeInteger(value) && value > 0 ? value : 0
}

/** Removes a file if it can: one left behind is rejected by its seal anyway. */
function removeQuietly(path: string): void {
  try {
    fs.rmSync(path, { force: true })
  } catch {
    // A stale queue-ends file does not match the next shutdown record.
  }
}
