// stats().schedule: the schedule service's figures (schedule-service.ts computes them).

/** One level of stats().schedule. */
export interface ScheduleLevelStats {
  readonly level: number
  readonly delayMs: number
  /** Messages in the level's queue not delivered yet. */
  readonly pending: number
  /** The next offset to deliver in SCHEDULE_TOPIC_XXXX queue level − 1. */
  readonly offset: number
  /** When the level's next message is due (epoch ms), or null when none is pending. */
  readonly nextDueTime: number | null
}

/** stats().schedule */
export interface ScheduleStats {
  /** Levels that have a queue or a progress entry, by level. */
  readonly levels: readonly ScheduleLevelStats[]
  readonly pending: number
  readonly nextDueTime: number | null
  /** Messages delivered to their real topic since open. */
  readonly delivered: number
  /** How long the oldest due message not yet delivered has been due (ms); 0 when none. */
  readonly lagMs: number
  /** Pending messages whose record retention deleted before delivery (skipped when due, logged). */
  readonly lostToRetention: number
  /** Pending messages whose record retention deleted, counted when the files went (logged as a warning then). */
  readonly retentionDeletedPending: number
  /** Pending records that could not be delivered (unreadable, or no valid REAL_TOPIC / REAL_QID); skipped, logged. */
  readonly skipped: number
  /** The lowest commit-log offset a pending message needs, or null when none is pending. */
  readonly oldestPendingCommitLogOffset: number | null
}
