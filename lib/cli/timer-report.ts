// The timer part of `mqstore inspect`: timers pending in the wheel, read from the files without
// opening the store (timerwheel, timerlog/, config/timercheck, and the parked records in the
// commit log): how many, when the next is due, and the earliest few with their destinations.
// Pending are the wheel's slots from the checkpoint's read time on that are not flagged delivered,
// as an open store counts them (cancel markers count −1).
import * as fs from 'node:fs'
import { join } from 'node:path'

import { PropertyName } from '../store/commitlog/record.js'
import { loadTimerCheckpoint } from '../store/timer/timer-checkpoint.js'
import { decodeUnit, readLong, TIMER_LOG_UNIT_SIZE, TimerMagic, type TimerUnit, unitKind } from '../store/timer/timer-log.js'
import { TimerProperty } from '../store/timer/timer-messages.js'
import { TIMER_CHECKPOINT_FILE, TIMER_LOG_DIR, TIMER_WHEEL_FILE } from '../store/timer/timer-service.js'
import { TIMER_WHEEL_FILE_SIZE, TIMER_WHEEL_SLOT_SIZE } from '../store/timer/timer-wheel.js'
import type { StoreReader } from './store-reader.js'

/** Pending timers listed (the count covers them all). */
const LISTED = 20
/** The wheel's delivered flag (timer-service.ts). */
const DELIVERED = 1

export interface PendingTimer {
  /** When it is delivered: the end of its slot (epoch ms). */
  dueTime: number
  commitLogOffset: number
  /** REAL_TOPIC / REAL_QID / UNIQ_KEY of the parked record, null when it cannot be read. */
  topic: string | null
  queueId: number | null
  uniqKey: string | null
}

export interface TimerReport {
  /** False when the store has no timer files (it never had a timed message). */
  present: boolean
  /** The checkpoint's read time: slots before it are delivered; null without a readable checkpoint. */
  readTimeMs: number | null
  /** What was wrong with the files (the open store repairs it), or null. */
  damage: string | null
  pending: number
  nextDueTime: number | null
  logFiles: number
  /** The earliest pending timers, in due order. */
  timers: PendingTimer[]
}

/** The timer log's files, read whole on first use, by position. */
class LogFiles {
  private readonly files: { from: number; path: string; bytes: Buffer | null }[]

  constructor(dir: string) {
    const names = fs.existsSync(dir) ? fs.readdirSync(dir).filter((name) => /^\d{20}$/.test(name)) : []
    this.files = names.sort().map((name) => ({ from: Number(name), path: join(dir, name), bytes: null }))
  }

  get count(): number {
    return this.files.length
  }

  unit(pos: number): TimerUnit | null {
    const file = this.files.findLast((f) => f.from <= pos)
    if (file === undefined) return null
    file.bytes ??= fs.readFileSync(file.path)
    const at = pos - file.from
    return at + TIMER_LOG_UNIT_SIZE <= file.bytes.length && unitKind(file.bytes, at) === 'unit' ? decodeUnit(file.bytes, at) : null
  }
}

export function timerReport(reader: StoreReader): TimerReport {
  const root = reader.paths.root
  const wheelPath = join(root, TIMER_WHEEL_FILE)
  const log = new LogFiles(join(root, TIMER_LOG_DIR))
  const report: TimerReport = {
    present: false,
    readTimeMs: null,
    damage: null,
    pending: 0,
    nextDueTime: null,
    logFiles: log.count,
    timers: [],
  }
  if (!fs.existsSync(wheelPath)) {
    if (log.count > 0) report.damage = `${TIMER_WHEEL_FILE} is missing`
    report.present = log.count > 0
    return report
  }
  report.present = true
  const checkpoint = loadTimerCheckpoint(join(reader.paths.config, TIMER_CHECKPOINT_FILE))
  if (checkpoint === null || 'damage' in checkpoint) {
    report.damage = `config/${TIMER_CHECKPOINT_FILE}${checkpoint === null ? ' is missing' : `: ${checkpoint.damage}`}`
  } else {
    report.readTimeMs = checkpoint.lastReadTimeMs
  }
  const wheel = fs.readFileSync(wheelPath)
  if (wheel.length !== TIMER_WHEEL_FILE_SIZE) {
    report.damage = `${TIMER_WHEEL_FILE} is ${wheel.length} bytes, not ${TIMER_WHEEL_FILE_SIZE}`
    return report
  }
  const readTime = report.readTimeMs ?? 0
  /** Pending slots: their time (ms), width (the precision) and last unit. */
  const slots: { slotTime: number; precision: number; lastPos: number }[] = []
  for (let at = 0; at < wheel.length; at += TIMER_WHEEL_SLOT_SIZE) {
    const units = readLong(wheel, at)
    if (units === 0 || (wheel.readInt32BE(at + 28) & DELIVERED) !== 0) continue
    const lastPos = readLong(wheel, at + 16)
    // The slot's time in ms is its last unit's (the wheel holds it in precision units).
    const unit = log.unit(lastPos)
    if (unit === null) {
      report.damage ??= `${TIMER_WHEEL_FILE}: a slot points at ${lastPos}, not an entry of ${TIMER_LOG_DIR}/`
      continue
    }
    if (unit.slotTime < readTime) continue
    report.pending += wheel.readInt32BE(at + 24)
    slots.push({ slotTime: unit.slotTime, precision: unit.slotTime / units, lastPos })
  }
  slots.sort((a, b) => a.slotTime - b.slotTime)
  for (const slot of slots) {
    if (report.timers.length >= LISTED) break
    const listed = listSlot(reader, log, slot.slotTime, slot.precision, slot.lastPos)
    if (listed.length > 0 && report.nextDueTime === null) report.nextDueTime = slot.slotTime + slot.precision
    report.timers.push(...listed)
  }
  report.timers = report.timers.sort((a, b) => a.dueTime - b.dueTime).slice(0, LISTED)
  return report
}

/** The timers of one slot (its chain, in entry order), less cancelled ones and cancel markers. */
function listSlot(reader: StoreReader, log: LogFiles, slotTime: number, precision: number, lastPos: number): PendingTimer[] {
  const units: TimerUnit[] = []
  for (let pos = lastPos; pos >= 0; ) {
    const unit = log.unit(pos)
    if (unit === null || unit.slotTime !== slotTime) break
    units.push(unit)
    if (unit.prevPos >= pos) break
    pos = unit.prevPos
  }
  units.reverse()
  const records = units.map((unit) => reader.readMessage(unit.offsetPy))
  const cancelled = new Set<string>()
  for (const [i, unit] of units.entries()) {
    const key = records[i]?.properties[TimerProperty.DEL_UNIQKEY]
    if ((unit.magic & TimerMagic.DELETE) !== 0 && key !== undefined) cancelled.add(key)
  }
  const timers: PendingTimer[] = []
  for (const [i, unit] of units.entries()) {
    const properties = records[i]?.properties
    if ((unit.magic & TimerMagic.DELETE) !== 0 || cancelled.has(properties?.[PropertyName.UNIQ_KEY] ?? '')) continue
    // An entry rolled forward (beyond the wheel's window when put) is due at its own time.
    const out = Number(properties?.[TimerProperty.OUT_MS])
    const rolled = (unit.magic & TimerMagic.ROLL) !== 0 && Number.isSafeInteger(out) && out >= slotTime + precision
    const queueText = properties?.[PropertyName.REAL_QID]
    timers.push({
      dueTime: rolled ? out + precision : slotTime + precision,
      commitLogOffset: unit.offsetPy,
      topic: properties?.[PropertyName.REAL_TOPIC] ?? null,
      queueId: queueText === undefined ? null : Number(queueText),
      uniqKey: properties?.[PropertyName.UNIQ_KEY] ?? null,
    })
  }
  return timers
}

/** The report's lines for the human form of inspect. */
export function formatTimers(r: TimerReport, time: (ms: number) => string): string[] {
  if (!r.present) return ['timers pending: 0 (no timer files)']
  const lines = [
    `timers pending: ${r.pending}, next due ${r.nextDueTime === null ? '-' : time(r.nextDueTime)}, read position ${r.readTimeMs === null ? '-' : time(r.readTimeMs)} (${TIMER_LOG_DIR}/: ${r.logFiles} file(s))${r.damage === null ? '' : ` (${r.damage}; open repairs it)`}`,
  ]
  for (const t of r.timers) lines.push(`    due ${time(t.dueTime)}  -> ${t.topic ?? '?'}/${t.queueId ?? '?'}  ${t.uniqKey ?? ''}`.trimEnd())
  return lines
}
