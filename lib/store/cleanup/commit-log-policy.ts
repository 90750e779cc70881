// Which commit-log files a cleanup pass deletes, and why (RocketMQ's CleanCommitLogService, §11.1).
// Pure: a snapshot of the files, the disk judgement, the clock reading and the config go in; a plan
// comes out. The service carries the plan out; `mqstore clean --dry-run` prints it.
import { DELETE_FILES_BATCH_MAX } from '../mapped/mapped-file-queue.js'
import type { DiskJudgement } from './disk-policy.js'

/**
 * Why a file goes: its age at a deleteWhen hour (`time`), its age while the disk is above
 * diskMaxUsedSpaceRatio (`disk`), its age after executeDeleteFilesManually (`manual`), or the disk
 * above the clean-forcibly ratio whatever its age (`forced`).
 */
export type CleanupReason = 'time' | 'disk' | 'manual' | 'forced'

/** executeDeleteFilesManually() makes this many passes delete regardless of the hour. */
export const MANUAL_DELETE_PASSES = 20

const HOUR_MS = 3_600_000

/** What the policy needs to know of one commit-log file. */
export interface CommitLogFileInfo {
  name: string
  startOffset: number
  sizeBytes: number
  /** Modification time (ms since the epoch), the age RocketMQ judges by. */
  lastModifiedMs: number
  /** Readers holding the file now. */
  holders: number
  /** False once an earlier pass shut it down (it waits for its readers). */
  available: boolean
  /** When an earlier pass shut it down (0 while available). */
  shutdownAtMs: number
}

export interface CommitLogPolicyConfig {
  fileReservedTime: number
  deleteWhen: string
  cleanFileForciblyEnable: boolean
  destroyMapedFileIntervalForcibly: number
  redeleteHangedFileInterval: number
}

export interface CommitLogSnapshot {
  nowMs: number
  /** The local hour of nowMs (0..23), taken by whoever read the clock. */
  localHour: number
  /** Oldest first; the last one is being written. */
  files: readonly CommitLogFileInfo[]
  disk: DiskJudgement
  manualPassesLeft: number
  /** When the hanged first file was last retried (0: never). */
  lastHangedRetryMs: number
  /** Commit-log offset up to which records reached the consume queues; files ending past it stay. */
  dispatchedOffset: number
}

export interface PlannedDeletion {
  file: CommitLogFileInfo
  reason: CleanupReason
  ageMs: number
  /** Readers it will be taken from (a forced destroy after destroyMapedFileIntervalForcibly). */
  forcedFromHolders: number
}

export interface CommitLogPlan {
  /** A pass runs: deleteWhen hour, disk above diskMaxUsedSpaceRatio, or a manual request. */
  runs: boolean
  timeUp: boolean
  manual: boolean
  /** Age is ignored this pass (disk above the clean-forcibly ratio and cleanFileForciblyEnable). */
  cleanAtOnce: boolean
  /** The pass's reason (the first deletion's, or what triggered it when nothing goes). */
  reason: CleanupReason | null
  expiredMs: number
  /** Files deleted now, oldest first, at most DELETE_FILES_BATCH_MAX. */
  deletions: PlannedDeletion[]
  /** The first file kept and why, or null when every candidate goes. */
  stop: { file: CommitLogFileInfo; why: 'young' | 'held' | 'batch' | 'undispatched' } | null
  /** A held file this pass shuts down (it is destroyed once its readers let go, or by force). */
  shutdown: CommitLogFileInfo | null
  /** The first file, shut down earlier, that the hanged-file retry destroys now. */
  retryHanged: CommitLogFileInfo | null
  /** Bytes the deletions free. */
  bytes: number
}

/** deleteWhen's hours ("04", "04;16"); the config has already checked that each is 0..23. */
export function parseDeleteWhen(deleteWhen: string): number[] {
  return deleteWhen
    .split(';')
    .map((hour) => hour.trim())
    .filter((hour) => hour !== '')
    .map((hour) => Number(hour))
}

/** True for the whole of each listed local hour. */
export function isTimeToDelete(localHour: number, deleteWhen: string): boolean {
  return parseDeleteWhen(deleteWhen).includes(localHour)
}

export function planCommitLogCleanup(snapshot: CommitLogSnapshot, config: CommitLogPolicyConfig): CommitLogPlan {
  const { nowMs, files, disk } = snapshot
  const timeUp = isTimeToDelete(snapshot.localHour, config.deleteWhen)
  const manual = snapshot.manualPassesLeft > 0
  const runs = timeUp || disk.spaceToDelete || manual
  const cleanAtOnce = config.cleanFileForciblyEnable && disk.cleanImmediately
  const expiredMs = config.fileReservedTime * HOUR_MS
  // The reason for files that are old enough: what made this pass run.
  const ageReason: CleanupReason = manual ? 'manual' : disk.spaceToDelete ? 'disk' : 'time'
  const plan: CommitLogPlan = {
    runs,
    timeUp,
    manual,
    cleanAtOnce,
    reason: runs ? (cleanAtOnce ? 'forced' : ageReason) : null,
    expiredMs,
    deletions: [],
    stop: null,
    shutdown: null,
    retryHanged: null,
    bytes: 0,
  }
  const first = files[0]
  if (
    first !== undefined &&
    files.length > 1 &&
    !first.available &&
    nowMs - snapshot.lastHangedRetryMs >= config.redeleteHangedFileInterval &&
    (first.holders === 0 || nowMs - first.shutdownAtMs >= config.destroyMapedFileIntervalForcibly)
  ) {
    plan.retryHanged = first
  }
  if (!runs) return plan

  // Never the last file (it is being written); oldest first; stop at the first that stays.
  const candidates = files.slice(0, -1)
  for (const file of candidates) {
    const ageMs = nowMs - file.lastModifiedMs
    const expired = nowMs >= file.lastModifiedMs + expiredMs
    if (plan.deletions.length >= DELETE_FILES_BATCH_MAX) {
      plan.stop = { file, why: 'batch' }
      break
    }
    if (!expired && !cleanAtOnce) {
      plan.stop = { file, why: 'young' }
      break
    }
    if (file.startOffset + file.sizeBytes > snapshot.dispatchedOffset) {
      plan.stop = { file, why: 'undispatched' }
      break
    }
    if (file.holders > 0) {
      // The first destroy drops the owner's reference; readers keep the file until they let go
      // or until the forced interval has passed since that first call.
      const forced = !file.available && nowMs - file.shutdownAtMs >= config.destroyMapedFileIntervalForcibly
      if (!forced) {
        plan.stop = { file, why: 'held' }
        plan.shutdown = file.available ? file : null
        break
      }
    }
    const reason: CleanupReason = expired ? ageReason : 'forced'
    plan.deletions.push({ file, reason, ageMs, forcedFromHolders: file.holders })
    plan.bytes += file.sizeBytes
  }
  if (plan.deletions.length > 0) plan.reason = plan.deletions[0].reason
  return plan
}

/** One line per planned deletion and the stop, for logs and the CLI. */
export function describeCommitLogPlan(plan: CommitLogPlan): string[] {
  if (!plan.runs) return ['commit log: no pass (not a deleteWhen hour, disk below the ratios, no manual request)']
  const lines = plan.deletions.map(
    (d) =>
      `commit log: delete ${d.file.name} (${d.file.sizeBytes} bytes, age ${hours(d.ageMs)}) for ${d.reason}` +
      (d.forcedFromHolders > 0 ? `, taken from ${d.forcedFromHolders} reader(s)` : ''),
  )
  if (plan.stop !== null) {
    const why = {
      young: 'younger than fileReservedTime',
      held: 'held by a reader',
      batch: `at most ${DELETE_FILES_BATCH_MAX} files a pass`,
      undispatched: 'holds records not yet in the consume queues',
    }[plan.stop.why]
    lines.push(`commit log: keep ${plan.stop.file.name} and later files (${why})`)
  }
  return lines
}

function hours(ms: number): string {
  return `${(ms / HOUR_MS).toFixed(1)} h`
}
