// The report of `mqstore verify`: what it found, per structure, with every problem located by
// file and byte position. Its JSON form is the `--json` output.
import type { RecoveryDamage } from '../../store/commitlog/recovery-scan.js'

export interface VerifyProblem {
  /** The file, relative to the store directory, with '/' separators. */
  file: string
  /** Byte position in that file. */
  offset: number
  reason: string
  /** The commit-log (physical) offset concerned, when there is one. */
  phyOffset?: number
  /** Queue offset of a consume-queue unit. */
  queueOffset?: number
  /** Number of an index entry. */
  entry?: number
}

export interface ProblemList {
  /** The first problems found (at most `maxProblems`). */
  problems: VerifyProblem[]
  /** How many more were found and left out. */
  moreProblems: number
}

export interface CommitLogReport extends ProblemList {
  files: number
  /** The size of the commit-log files (taken from the files found). */
  fileSize: number
  /** Valid records walked, and the sum of their sizes. */
  records: number
  bytes: number
  /** Start of the first file: offsets below it have expired. */
  minOffset: number
  /** Where valid data ends: the offset after the last valid record (or blank). */
  validEnd: number
  /** Why the walk stopped. */
  endReason: 'empty' | 'end-of-data' | 'end-of-files' | 'damage' | 'gap'
  /** Store time of the last valid record, 0 when there is none. */
  lastStoreTimestamp: number
  /**
   * The bad record that stopped the walk, classified as the store's recovery classifies it: torn
   * (a recovery truncates here under every policy) or corrupt (corruptionPolicy 'tolerant'
   * truncates here, 'strict' refuses to open). Null when the walk did not stop at damage.
   */
  damage: RecoveryDamage | null
}

export interface ConsumeQueueReport extends ProblemList {
  queues: number
  files: number
  fileSize: number
  /** Valid units read (expired ones included), pre-fill blanks not counted. */
  units: number
  /** Units pointing below the commit log's first file (informational). */
  expired: number
  /** Pre-fill blank units skipped. */
  blanks: number
  /**
   * Records in the commit log past the end of their queue: messages no consumer can reach. A
   * problem after a clean shutdown; otherwise a note (the store's next open dispatches them).
   */
  missing: number
}

export interface IndexFileReport {
  file: string
  /** 0 when the dimensions could not be determined. */
  hashSlotNum: number
  indexNum: number
  entries: number
}

export interface IndexReport extends ProblemList {
  files: number
  /** Entries checked (indexCount - 1 per file of known dimensions). */
  entries: number
  /** Entries pointing below the commit log's first file (informational). */
  expired: number
  details: IndexFileReport[]
}

export interface CheckpointReport extends ProblemList {
  present: boolean
  size: number
  physicMsgTimestamp: number
  logicsMsgTimestamp: number
  indexMsgTimestamp: number
}

export interface VerifyReport {
  /** True when no problem was found anywhere. */
  ok: boolean
  /** Total number of problems, including those left out of the lists. */
  problemCount: number
  dir: string
  commitLog: CommitLogReport
  consumeQueues: ConsumeQueueReport
  index: IndexReport
  checkpoint: CheckpointReport
  /** False when the abort file is present: the store is open, or was not shut down cleanly. */
  cleanShutdown: boolean
  /** Informational remarks (ignored files, data written during the check, ...). */
  notes: string[]
  elapsedMs: number
}

export interface VerifyOptions {
  /** Called now and then with commit-log bytes checked so far and the total. */
  onProgress?: (done: number, total: number) => void
  /** The store's index dimensions; without them the embedded and RocketMQ defaults are tried. */
  maxHashSlotNum?: number
  maxIndexNum?: number
  /** Problems kept per section (default 100); the rest are only counted. */
  maxProblems?: number
}

/** The directory does not exist or does not look like a store. */
export class NotAStoreError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'NotAStoreError'
  }
}

/** A list that keeps the first `max` problems and counts the rest. */
export class Problems implements ProblemList {
  problems: VerifyProblem[] = []
  moreProblems = 0
  constructor(private readonly max: number) {}

  add(problem: VerifyProblem): void {
    if (this.problems.length < this.max) this.problems.push(problem)
    else this.moreProblems++
  }

  get count(): number {
    return this.problems.length + this.moreProblems
  }
}
