// The schedule part of `mqstore inspect`: delayed messages still pending in SCHEDULE_TOPIC_XXXX,
// per level from the progress in config/delayOffset.json, with their due times and destinations.
import { PropertyName, SCHEDULE_TOPIC } from '../store/commitlog/record.js'
import { loadDelayOffsets } from '../store/schedule/delay-offsets.js'
import type { StoreReader } from './store-reader.js'

/** Pending messages listed per level (the counts cover them all). */
const LISTED_PER_LEVEL = 20

export interface PendingDelayed {
  level: number
  queueOffset: number
  commitLogOffset: number
  /** The unit's tagsCode: store time + the level's delay. */
  dueTime: number
  /** REAL_TOPIC / REAL_QID, null when the record cannot be read. */
  topic: string | null
  queueId: number | null
  uniqKey: string | null
}

export interface ScheduleReport {
  /** What was wrong with config/delayOffset.json (the open store repairs it), or null. */
  progressDamage: string | null
  levels: { level: number; deliveredTo: number; maxOffset: number; pending: number; nextDueTime: number | null }[]
  pending: number
  /** The first pending messages of each level, oldest first. */
  messages: PendingDelayed[]
}

export function scheduleReport(reader: StoreReader): ScheduleReport {
  const { table, damage } = loadDelayOffsets(reader.paths.delayOffsets)
  const levels: ScheduleReport['levels'] = []
  const messages: PendingDelayed[] = []
  let pending = 0
  for (const queue of reader.queues().filter((q) => q.topic === SCHEDULE_TOPIC)) {
    const level = queue.queueId + 1
    const min = reader.minOffset(queue)
    const maxOffset = reader.maxOffset(queue)
    const deliveredTo = Math.min(Math.max(table.get(level) ?? min, min), maxOffset)
    const units = reader.readUnits(queue, deliveredTo, Math.min(LISTED_PER_LEVEL, maxOffset - deliveredTo))
    levels.push({ level, deliveredTo, maxOffset, pending: maxOffset - deliveredTo, nextDueTime: units[0]?.tagsCode ?? null })
    pending += maxOffset - deliveredTo
    for (const unit of units) {
      const record = reader.readMessage(unit.commitLogOffset)
      const queueText = record?.properties[PropertyName.REAL_QID]
      messages.push({
        level,
        queueOffset: unit.queueOffset,
        commitLogOffset: unit.commitLogOffset,
        dueTime: unit.tagsCode,
        topic: record?.properties[PropertyName.REAL_TOPIC] ?? null,
        queueId: queueText === undefined ? null : Number(queueText),
        uniqKey: record?.properties[PropertyName.UNIQ_KEY] ?? null,
      })
    }
  }
  return { progressDamage: damage, levels, pending, messages }
}

/** The report's lines for the human form of inspect. */
export function formatSchedule(r: ScheduleReport, time: (ms: number) => string): string[] {
  const lines = [
    `delayed messages pending: ${r.pending}${r.progressDamage === null ? '' : ` (config/delayOffset.json: ${r.progressDamage})`}`,
  ]
  for (const l of r.levels) {
    lines.push(
      `  level ${l.level}: ${l.pending} pending (delivered to ${l.deliveredTo} of ${l.maxOffset}), next due ${l.nextDueTime === null ? '-' : time(l.nextDueTime)}`,
    )
  }
  for (const m of r.messages) {
    lines.push(`    due ${time(m.dueTime)}  level ${m.level}  -> ${m.topic ?? '?'}/${m.queueId ?? '?'}  ${m.uniqKey ?? ''}`.trimEnd())
  }
  return lines
}
