// The timer wheel (<store>/timerwheel): one file of 2 × 604,800 slots of 32 bytes in RocketMQ 5's
// layout, whatever the precision. The slot of time t is (t / p) mod the slot count; a slot holds
// the time it is for (in precision units: another time reads as empty), the first and last unit
// of its chain in the timer log, and a count of entries (+1 per entry, −1 per cancel marker).
import * as fs from 'node:fs'

import { MappedFile } from '../mapped/mapped-file.js'
import { readLong, writeLong } from './timer-log.js'

export const TIMER_WHEEL_SLOTS = 2 * 7 * 86_400
export const TIMER_WHEEL_SLOT_SIZE = 32
export const TIMER_WHEEL_FILE_SIZE = TIMER_WHEEL_SLOTS * TIMER_WHEEL_SLOT_SIZE

// Byte offsets inside a slot (big-endian).
const TIME = 0
const FIRST_POS = 8
const LAST_POS = 16
const NUM = 24
/** RocketMQ leaves this int unused; here it holds flags (1: the slot was delivered). */
const FLAGS = 28

export interface TimerSlot {
  firstPos: number
  lastPos: number
  num: number
}

export class TimerWheel {
  private readonly file: MappedFile
  private readonly buffer: Buffer
  private readonly precisionMs: number
  private changed = false

  private constructor(file: MappedFile, precisionMs: number) {
    this.file = file
    this.precisionMs = precisionMs
    this.buffer = file.mappedBuffer()
  }

  /**
   * Opens the wheel file, or makes a new empty one; `recreated` says the file was missing or of
   * another length (its slots must then be rebuilt from the timer log).
   */
  static open(fileName: string, precisionMs: number, exists: boolean, length: number): { wheel: TimerWheel; recreated: boolean } {
    const options = { fileFromOffset: 0, reserveChunkBytes: TIMER_WHEEL_FILE_SIZE, reserveFirstBytes: TIMER_WHEEL_FILE_SIZE }
    if (exists && length === TIMER_WHEEL_FILE_SIZE) {
      return { wheel: new TimerWheel(MappedFile.open(fileName, TIMER_WHEEL_FILE_SIZE, options), precisionMs), recreated: false }
    }
    if (exists) fs.rmSync(fileName, { force: true })
    const file = MappedFile.create(fileName, TIMER_WHEEL_FILE_SIZE, options)
    file.setPositions(TIMER_WHEEL_FILE_SIZE)
    return { wheel: new TimerWheel(file, precisionMs), recreated: true }
  }

  private at(slotTime: number): number {
    const units = Math.floor(slotTime / this.precisionMs)
    return (((units % TIMER_WHEEL_SLOTS) + TIMER_WHEEL_SLOTS) % TIMER_WHEEL_SLOTS) * TIMER_WHEEL_SLOT_SIZE
  }

  /** The slot for `slotTime`, or null when it is empty (or holds another time). */
  get(slotTime: number): TimerSlot | null {
    return this.getWithFlags(slotTime)?.slot ?? null
  }

  getWithFlags(slotTime: number): { slot: TimerSlot; flags: number } | null {
    const at = this.at(slotTime)
    if (readLong(this.buffer, at + TIME) !== Math.floor(slotTime / this.precisionMs)) return null
    return { slot: this.slotAt(at), flags: this.buffer.readInt32BE(at + FLAGS) }
  }

  private slotAt(at: number): TimerSlot {
    return {
      firstPos: readLong(this.buffer, at + FIRST_POS),
      lastPos: readLong(this.buffer, at + LAST_POS),
      num: this.buffer.readInt32BE(at + NUM),
    }
  }

  set(slotTime: number, slot: TimerSlot, flags: number): void {
    const at = this.at(slotTime)
    writeLong(this.buffer, at + TIME, Math.floor(slotTime / this.precisionMs))
    writeLong(this.buffer, at + FIRST_POS, slot.firstPos)
    writeLong(this.buffer, at + LAST_POS, slot.lastPos)
    this.buffer.writeInt32BE(slot.num, at + NUM)
    this.buffer.writeInt32BE(flags, at + FLAGS)
    this.changed = true
  }

  /** Empties every slot (before a rebuild from the timer log). */
  clearAll(): void {
    this.buffer.fill(0)
    this.changed = true
  }

  /** Calls `visit` for every non-empty slot with its time (ms). */
  forEach(visit: (slotTime: number, slot: TimerSlot, flags: number) => void): void {
    for (let at = 0; at < TIMER_WHEEL_FILE_SIZE; at += TIMER_WHEEL_SLOT_SIZE) {
      const units = readLong(this.buffer, at + TIME)
      if (units === 0) continue
      visit(units * this.precisionMs, this.slotAt(at), this.buffer.readInt32BE(at + FLAGS))
    }
  }

  /** Forces changed slots to disk (msync writes only the dirty pages). */
  flush(): void {
    if (!this.changed) return
    this.changed = false
    this.file.flushedPosition = 0
    this.file.flush(0)
  }

  shutdown(): void {
    this.file.shutdown(0)
  }
}
