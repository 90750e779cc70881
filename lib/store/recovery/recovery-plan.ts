// The decisions of docs/recovery.md as pure functions of what open() found: each takes figures read
// from the files and returns what to do. StoreRecovery gathers the figures and carries them out.
import type { RecoveryDamage } from '../commitlog/commit-log.js'
import type { DispatchRequest } from '../commitlog/record.js'
import type { ShutdownRecord } from '../store-checkpoint.js'
import type { Repair } from '../types.js'

export type CorruptionPolicy = 'strict' | 'tolerant'

/** What to do about the record that stopped the commit-log scan: refuse to open, or truncate and say so. */
export type DamageDecision = { refuse: string } | { repair: Repair } | null

/** C-rows: torn tails are always truncated; corruption refuses under 'strict', truncates under 'tolerant'. */
export function judgeDamage(damage: RecoveryDamage | null, policy: CorruptionPolicy): DamageDecision {
  if (damage === null) return null
  const where = `commit-log bytes [${damage.offset}, ${damage.offset + damage.length})`
  if (damage.kind === 'corrupt' && policy === 'strict') {
    return {
      refuse:
        `${where} fail their checks (${damage.reason}) and data follows them; ` +
        `refusing to open (corruptionPolicy 'strict'). Run mqstore verify, or open with corruptionPolicy 'tolerant' to truncate there.`,
    }
  }
  return {
    repair: {
      action: `truncated the commit log at ${damage.offset}`,
      reason: `${damage.kind === 'torn' ? 'a torn write' : 'corruption'} at ${where}: ${damage.reason}`,
    },
  }
}

/**
 * Q-rows after a clean close: the queues must hold what the shutdown record counted. When they do
 * not (a queue lost files or units), the whole log is dispatched again (replays are no-ops).
 */
export function judgeQueueSummary(record: ShutdownRecord, now: { queueCount: number; queueUnitSum: number }): Repair | null {
  if (now.queueCount === record.queueCount && now.queueUnitSum === record.queueUnitSum) return null
  return {
    action: 're-dispatching the whole commit log',
    reason: `the consume queues hold ${now.queueUnitSum} units in ${now.queueCount} queues; the last clean close left ${record.queueUnitSum} in ${record.queueCount}`,
  }
}

/** Only units that end past the log need cutting; after a crash RocketMQ always cuts. */
export function mustTruncateQueues(maxPhyOffsetOfQueues: number, commitLogEnd: number, lastExitOK: boolean): boolean {
  return maxPhyOffsetOfQueues > commitLogEnd || !lastExitOK
}

/** A queue's last unit is trusted when it points at a valid record of that queue with that queue offset. */
export function lastUnitMatches(
  record: DispatchRequest | null,
  unit: { size: number; topic: string; queueId: number; queueOffset: number },
): boolean {
  return (
    record !== null &&
    record.status === 'OK' &&
    record.size === unit.size &&
    record.topic === unit.topic &&
    record.queueId === unit.queueId &&
    record.queueOffset === unit.queueOffset
  )
}

/**
 * I-rows: an index whose newest file indexes records at or past the log's end is rebuilt. So is
 * one whose end only records how far dispatch got (keyless records, no entries): left in place it
 * would make the index skip the records written again below it.
 */
export function indexEndsPastLog(lastFile: { endPhyOffset: number; indexCount: number } | null, commitLogEnd: number): boolean {
  return lastFile !== null && lastFile.endPhyOffset >= commitLogEnd && (lastFile.indexCount > 1 || lastFile.endPhyOffset > 0)
}

/**
 * Where dispatch starts after open: the furthest point every consume queue reached, but no later
 * than the index's end (after a crash its newer files are dropped; replayed consume-queue writes
 * are no-ops), and from the log's start when something is rebuilt.
 */
export function reputStart(input: {
  commitLogMinOffset: number
  queuesMaxPhyOffset: number
  /** The index's end, or null when indexing is off. */
  indexEnd: number | null
  rebuild: boolean
}): number {
  const minOffset = Math.max(0, input.commitLogMinOffset)
  if (input.rebuild) return minOffset
  let from = Math.max(minOffset, input.queuesMaxPhyOffset)
  if (input.indexEnd !== null) from = Math.min(from, Math.max(minOffset, input.indexEnd))
  return from
}
