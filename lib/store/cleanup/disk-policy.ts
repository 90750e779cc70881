// Disk pressure: how full the partitions under the commit log and the consume queues are, judged
// against RocketMQ's three ratios (§11.2). Pure: readings in, a judgement out.

/**
 * Above this share of a partition, cleanup deletes commit-log files regardless of their age (when
 * cleanFileForciblyEnable). RocketMQ 4.x reads it from a JVM property; here it is fixed.
 */
export const DISK_SPACE_CLEAN_FORCIBLY_RATIO = 0.85
/** Above this share the store is "disk full": puts answer SERVICE_NOT_AVAILABLE until it drops. */
export const DISK_SPACE_WARNING_LEVEL_RATIO = 0.9

/** One partition's usage as read for a path; usedRatio is -1 when it could not be read. */
export interface DiskReading {
  /** What the path holds: 'commitLog' or 'consumeQueue'. */
  role: 'commitLog' | 'consumeQueue'
  path: string
  usedRatio: number
  totalBytes: number
  availableBytes: number
  /** Why the reading failed, when usedRatio is -1. */
  error?: string
}

export interface DiskJudgement {
  /** Above diskMaxUsedSpaceRatio on some path: files old enough may go at any hour. */
  spaceToDelete: boolean
  /** Above the clean-forcibly ratio (or the warning level): age does not matter. */
  cleanImmediately: boolean
  /** Above the warning level: writes must stop. */
  diskFull: boolean
  /** The fullest readable path, or null when none could be read. */
  fullest: DiskReading | null
  /** One line for the log and stats, e.g. "commitLog 91.0% > 90%". */
  why: string
}

/**
 * Judges the readings. Unreadable paths are left out (RocketMQ counts a negative ratio as "space
 * to delete"; here a path we cannot read is not evidence that the disk is full).
 * `diskMaxUsedSpaceRatio` is in percent, already clamped to 10..95 by the config.
 */
export function judgeDisk(readings: readonly DiskReading[], diskMaxUsedSpaceRatio: number): DiskJudgement {
  let fullest: DiskReading | null = null
  for (const reading of readings) {
    if (reading.usedRatio < 0) continue
    if (fullest === null || reading.usedRatio > fullest.usedRatio) fullest = reading
  }
  const ratio = fullest?.usedRatio ?? 0
  const maxUsed = diskMaxUsedSpaceRatio / 100
  const diskFull = ratio > DISK_SPACE_WARNING_LEVEL_RATIO
  const cleanImmediately = ratio > DISK_SPACE_CLEAN_FORCIBLY_RATIO
  const spaceToDelete = cleanImmediately || ratio > maxUsed
  let why = 'no readable path'
  if (fullest !== null) {
    const used = `${fullest.role} ${percent(ratio)}`
    if (diskFull) why = `${used} > warning level ${percent(DISK_SPACE_WARNING_LEVEL_RATIO)}`
    else if (cleanImmediately) why = `${used} > clean-forcibly ratio ${percent(DISK_SPACE_CLEAN_FORCIBLY_RATIO)}`
    else if (spaceToDelete) why = `${used} > diskMaxUsedSpaceRatio ${percent(maxUsed)}`
    else why = `${used} <= diskMaxUsedSpaceRatio ${percent(maxUsed)}`
  }
  return { spaceToDelete, cleanImmediately, diskFull, fullest, why }
}

export function percent(ratio: number): string {
  return `${(ratio * 100).toFixed(1)}%`
}
