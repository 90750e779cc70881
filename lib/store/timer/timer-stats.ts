// What stats().timer reports (timer-service.ts).
export interface TimerStats {
  /** Entries in the wheel not delivered yet (cancel markers count −1). */
  pending: number
  /** When the next non-empty slot is due (epoch ms), or null. */
  nextDueTime: number | null
  delivered: number
  cancelled: number
  /** Entries whose record was unreadable or had no valid REAL_TOPIC / REAL_QID, or that their real topic refused for good. */
  skipped: number
  /** Entries whose record retention deleted before delivery (counted when their slot comes due). */
  lostToRetention: number
  /** Pending entries whose record retention deleted, counted when the files went (logged as a warning then). */
  retentionDeletedPending: number
  /** Timer-log files deleted since open, every entry in them delivered or cancelled. */
  logFilesDeleted: number
  /** How long the oldest due slot not delivered yet has been due, ms. */
  lagMs: number
  /** The wheel's read position: slots before it are delivered. */
  readTimeMs: number
  precisionMs: number
}
