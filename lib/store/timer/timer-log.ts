// The timer log (<store>/timerlog/): append-only 52-byte units in RocketMQ 5's layout, one per
// timer entry, each pointing back to the previous unit of the same slot (a chain per slot, whose
// head the wheel holds). A unit that does not fit (with room for a blank) ends its file with a
// 16-byte blank, as RocketMQ writes it.
import { Buffer } from 'node:buffer'
import { MappedFileQueue } from '../mapped/mapped-file-queue.js'

export const TIMER_LOG_UNIT_SIZE = 52
/** RocketMQ's mappedFileSizeTimerLog. */
export const TIMER_LOG_FILE_SIZE = 104_857_600
/** The end-of-file blank: int free length, long 0, int magic (the commit log's blank magic). */
export const TIMER_LOG_BLANK_SIZE = 16
export const TIMER_LOG_BLANK_MAGIC = 0xcbd43194 | 0

export const TimerMagic = { DEFAULT: 1, ROLL: 2, DELETE: 4 } as const

// Byte offsets inside a unit (big-endian).
const SIZE = 0
const PREV_POS = 4
const MAGIC = 12
const WRITE_TIME = 16
const DELAY = 24
const OFFSET_PY = 28
const SIZE_PY = 36
const TOPIC_HASH = 40

export interface TimerUnit {
  prevPos: number
  magic: number
  /** The slot time (ms) the unit was placed in: write time + delay. */
  slotTime: number
  writeTime: number
  offsetPy: number
  sizePy: number
  topicHash: number
}

export function readLong(buffer: Buffer, at: number): number {
  return buffer.readInt32BE(at) * 2 ** 32 + buffer.readUInt32BE(at + 4)
}

export function writeLong(buffer: Buffer, at: number, value: number): void {
  buffer.writeInt32BE(Math.floor(value / 2 ** 32), at)
  buffer.writeUInt32BE(value >>> 0, at + 4)
}

/** Java's String.hashCode, which RocketMQ stores for the real topic. */
export function javaStringHash(text: string): number {
  let hash = 0
  for (let i = 0; i < text.length; i++) hash = (Math.imul(hash, 31) + text.charCodeAt(i)) | 0
  return hash
}

/** What a scan found at `buffer[at]`: a unit, the file's blank, or the end of what is valid. */
export function unitKind(buffer: Buffer, at: number): 'unit' | 'blank' | 'end' {
  if (at + TIMER_LOG_BLANK_SIZE <= buffer.length && buffer.readInt32BE(at + 12) === TIMER_LOG_BLANK_MAGIC && buffer.readInt32BE(at) > 0) {
    return 'blank'
  }
  if (at + TIMER_LOG_UNIT_SIZE > buffer.length) return 'end'
  const magic = buffer.readInt32BE(at + MAGIC)
  if (buffer.readInt32BE(at + SIZE) !== TIMER_LOG_UNIT_SIZE || (magic | 0xf) !== 0xf || (magic & TimerMagic.DEFAULT) === 0) return 'end'
  return 'unit'
}

export function decodeUnit(buffer: Buffer, at: number): TimerUnit {
  const writeTime = readLong(buffer, at + WRITE_TIME)
  return {
    prevPos: readLong(buffer, at + PREV_POS),
    magic: buffer.readInt32BE(at + MAGIC),
    writeTime,
    slotTime: writeTime + buffer.readInt32BE(at + DELAY),
    offsetPy: readLong(buffer, at + OFFSET_PY),
    sizePy: buffer.readInt32BE(at + SIZE_PY),
    topicHash: buffer.readInt32BE(at + TOPIC_HASH),
  }
}

export class TimerLog {
  readonly queue: MappedFileQueue
  readonly fileSize: number
  private readonly scratch = Buffer.alloc(TIMER_LOG_UNIT_SIZE)

  constructor(dir: string, fileSize = TIMER_LOG_FILE_SIZE) {
    this.fileSize = fileSize
    this.queue = new MappedFileQueue(dir, fileSize)
  }

  load(): void {
    this.queue.load()
  }

  /** The position after the last unit. */
  get end(): number {
    return this.queue.getMaxOffset()
  }

  /**
   * Walks the units from `from` (a unit boundary) to the end of what is valid, calling `visit`
   * for each, and truncates there; returns whether something invalid was cut off (damage).
   */
  recover(from: number, visit: (pos: number, unit: TimerUnit) => void): boolean {
    const files = this.queue.mappedFiles
    // The scan starts at the beginning of the file holding `from`, so that file's end is found.
    const last = files.length === 0 ? null : files[files.length - 1]
    from = last === null ? 0 : Math.min(from - (from % this.fileSize), last.fileFromOffset)
    let end = files.length === 0 ? 0 : files[0].fileFromOffset
    let damaged = false
    for (const file of files) {
      if (file.fileFromOffset + this.fileSize <= from) {
        end = file.fileFromOffset + this.fileSize
        continue
      }
      const buffer = file.readableBuffer()
      let at = Math.max(0, from - file.fileFromOffset)
      let kind: 'unit' | 'blank' | 'end' = 'end'
      while (at < buffer.length) {
        kind = unitKind(buffer, at)
        if (kind !== 'unit') break
        visit(file.fileFromOffset + at, decodeUnit(buffer, at))
        at += TIMER_LOG_UNIT_SIZE
      }
      if (kind === 'blank') {
        end = file.fileFromOffset + this.fileSize
        continue
      }
      end = file.fileFromOffset + at
      // Zeros after the last unit are the file's unwritten rest; anything else is damage.
      damaged = buffer.subarray(at).some((byte) => byte !== 0) || file !== files[files.length - 1]
      break
    }
    this.queue.committedWhere = end
    // Stale bytes past a damaged end are zeroed, so that no later scan takes them for units.
    this.queue.truncateDirtyFiles(end, damaged ? 0 : -1)
    this.queue.flushedWhere = end
    return damaged
  }

  /** Appends a unit; returns its position. Throws when no file can be made. */
  append(prevPos: number, magic: number, slotTime: number, writeTime: number, offsetPy: number, sizePy: number, topicHash: number): number {
    let file = this.queue.getLastMappedFile(this.end)
    if (file !== null && this.fileSize - file.readPosition < TIMER_LOG_UNIT_SIZE + TIMER_LOG_BLANK_SIZE) {
      const blank = Buffer.alloc(TIMER_LOG_BLANK_SIZE)
      blank.writeInt32BE(this.fileSize - file.readPosition, 0)
      blank.writeInt32BE(TIMER_LOG_BLANK_MAGIC, 12)
      file.appendMessage(blank)
      file.wrotePosition = this.fileSize
      file.committedPosition = this.fileSize
      file = this.queue.getLastMappedFile(this.end)
    }
    if (file === null) throw new Error(`cannot create a timer log file at ${this.end}`)
    const unit = this.scratch
    unit.fill(0)
    unit.writeInt32BE(TIMER_LOG_UNIT_SIZE, SIZE)
    writeLong(unit, PREV_POS, prevPos)
    unit.writeInt32BE(magic, MAGIC)
    writeLong(unit, WRITE_TIME, writeTime)
    unit.writeInt32BE(slotTime - writeTime, DELAY)
    writeLong(unit, OFFSET_PY, offsetPy)
    unit.writeInt32BE(sizePy, SIZE_PY)
    unit.writeInt32BE(topicHash, TOPIC_HASH)
    const pos = file.fileFromOffset + file.readPosition
    if (!file.appendMessage(unit)) throw new Error(`cannot append to the timer log at ${pos} (disk full?)`)
    return pos
  }

  /** The unit at `pos`, or null when it is not a valid unit. */
  read(pos: number): TimerUnit | null {
    const file = this.queue.findMappedFileByOffset(pos)
    if (file === null) return null
    const view = file.selectMappedBuffer(pos - file.fileFromOffset, TIMER_LOG_UNIT_SIZE)
    if (view === null) return null
    try {
      return unitKind(view.buffer, 0) === 'unit' ? decodeUnit(view.buffer, 0) : null
    } finally {
      view.release()
    }
  }

  /** Forces what was appended to disk; returns the position flushed to. */
  flush(): number {
    for (let i = 0; i <= this.queue.mappedFiles.length; i++) if (this.queue.flush(0)) break
    return this.queue.flushedWhere
  }

  shutdown(): void {
    this.queue.shutdown(0)
  }
}
