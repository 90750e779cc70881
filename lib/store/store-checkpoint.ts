// The checkpoint file: 4 KiB, three big-endian longs, forced to disk when written.
//
//   offset  width  field
//   0       8      physicMsgTimestamp  store time of the last message in flushed commit-log data
//   8       8      logicsMsgTimestamp  store time of the last message whose consume-queue unit is flushed
//   16      8      indexMsgTimestamp   end time of the last index file known complete and flushed
//   24..    -      zeros (RocketMQ 5 uses 24 and 32)
import * as fs from 'node:fs'

import { MappedFile } from './mapped-file.js'

export const CHECKPOINT_FILE_SIZE = 4096
const OFFSET_PHYSIC_MSG_TIMESTAMP = 0
const OFFSET_LOGICS_MSG_TIMESTAMP = 8
const OFFSET_INDEX_MSG_TIMESTAMP = 16

export class StoreCheckpoint {
  physicMsgTimestamp = 0
  logicsMsgTimestamp = 0
  indexMsgTimestamp = 0
  private readonly file: MappedFile

  /** Opens the checkpoint, creating it zero-filled when absent or of the wrong size. */
  constructor(path: string, readOnly = false) {
    let existed = false
    try {
      existed = fs.statSync(path).size === CHECKPOINT_FILE_SIZE
    } catch {
      existed = false
    }
    if (!existed && !readOnly) fs.rmSync(path, { force: true })
    this.file = existed
      ? MappedFile.open(path, CHECKPOINT_FILE_SIZE, { fileFromOffset: 0, readOnly })
      : MappedFile.create(path, CHECKPOINT_FILE_SIZE, { fileFromOffset: 0 })
    this.file.setPositions(CHECKPOINT_FILE_SIZE)
    const view = this.file.selectMappedBuffer(0, 24)!
    try {
      this.physicMsgTimestamp = readLong(view.buffer, OFFSET_PHYSIC_MSG_TIMESTAMP)
      this.logicsMsgTimestamp = readLong(view.buffer, OFFSET_LOGICS_MSG_TIMESTAMP)
      this.indexMsgTimestamp = readLong(view.buffer, OFFSET_INDEX_MSG_TIMESTAMP)
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

  /** Stores the fields into the mapping and forces them to disk. */
  flush(): void {
    const buffer = this.file.mappedBuffer()
    writeLong(buffer, OFFSET_PHYSIC_MSG_TIMESTAMP, this.physicMsgTimestamp)
    writeLong(buffer, OFFSET_LOGICS_MSG_TIMESTAMP, this.logicsMsgTimestamp)
    writeLong(buffer, OFFSET_INDEX_MSG_TIMESTAMP, this.indexMsgTimestamp)
    this.file.flushedPosition = 0
    this.file.flush(0)
  }

  shutdown(): void {
    this.file.shutdown(0)
  }
}

function readLong(buffer: Buffer, offset: number): number {
  const value = Number(buffer.readBigInt64BE(offset))
  return Number.isSafeInteger(value) && value > 0 ? value : 0
}

function writeLong(buffer: Buffer, offset: number, value: number): void {
  buffer.writeBigInt64BE(BigInt(Math.trunc(value)), offset)
}
