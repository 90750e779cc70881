// The cleanup service: every cleanResourceInterval it reads the disk (setting or clearing
// DISK_FULL), plans a commit-log pass with the pure policy, carries it out with the file-level
// expiry calls, then lets the consume queues and the index follow the commit log's new minimum.
// Each deletion is logged with its reason; totals and the last pass are kept for stats().
import { basename } from 'node:path'
import { setImmediate as yieldToEvents, setTimeout as sleep } from 'node:timers/promises'

import type { CommitLog } from '../commitlog/commit-log.js'
import type { MessageStoreConfig } from '../config.js'
import type { StoreEnvironment } from '../environment.js'
import type { IndexService } from '../index/index-service.js'
import type { ConsumeQueue } from '../queue/consume-queue.js'
import type { RunningFlags } from '../running-flags.js'
import { MANUAL_DELETE_PASSES, planCommitLogCleanup, type CleanupReason, type CommitLogPlan } from './commit-log-policy.js'
import { planDerivedCleanup, type DerivedPlan } from './derived-policy.js'
import { judgeDisk, type DiskJudgement, type DiskReading } from './disk-policy.js'
import { allConsumeQueueFiles, commitLogFiles, indexFiles, readDisk } from './snapshot.js'

/** What cleanup works on; getters, because the facade may replace the index after a rebuild. */
export interface CleanupTargets {
  commitLog: CommitLog
  consumeQueues: () => Iterable<ConsumeQueue>
  indexService: () => IndexService | null
  /** Commit-log offset up to which records reached the consume queues and the index. */
  dispatchedOffset: () => number
  commitLogPath: string
  consumeQueuePath: string
  /**
   * Makes the files derived from the commit log durable (consume queues, compaction logs) before
   * commit-log files go: once the records are deleted, a power cut could not rebuild them, and a
   * compacted topic's compaction log is then their only copy.
   */
  syncDerived?: () => void | Promise<void>
}

export type CleanupLogger = (level: 'info' | 'warn' | 'error', message: string) => void

export interface CleanupPlan {
  at: number
  disk: DiskJudgement
  readings: DiskReading[]
  commitLog: CommitLogPlan
  /** Consume-queue and index files that follow, judged against the min offset the plan leaves. */
  derived: DerivedPlan
}

export interface CleanupPass {
  at: number
  /** What made the pass delete (null: nothing triggered; derived files may still have gone). */
  reason: CleanupReason | null
  commitLogFiles: number
  consumeQueueFiles: number
  indexFiles: number
  bytes: number
  commitLogMinOffset: number
}

export interface CleanupStats {
  /** Usage of the partitions holding the commit log and the consume queues, as last read. */
  diskUsage: DiskReading[]
  /** The last disk judgement, e.g. "commitLog 91.0% > warning level 90.0%". */
  diskPressure: string
  filesDeleted: { commitLog: number; consumeQueue: number; index: number }
  bytesDeleted: number
  /** Passes left of the last executeDeleteFilesManually(). */
  manualPassesLeft: number
  lastPass: CleanupPass | null
}

/** Flags under which nothing is deleted: the store's state is not known to be sound. */
const UNSOUND_FLAGS = ['NOT_WRITEABLE', 'WRITE_LOGICS_QUEUE_ERROR', 'WRITE_INDEX_FILE_ERROR'] as const

/** Queues a cleanup pass visits before it lets other work run. */
const QUEUES_PER_TURN = 64

export class CleanupService {
  private manualPassesLeft = 0
  private lastHangedRetryMs = 0
  /** The commit-log min offset the consume queues and index were last cut to. */
  private lastMinPhyOffset = -1
  private readings: DiskReading[] = []
  private disk: DiskJudgement | null = null
  private running: Promise<CleanupPass> | null = null
  private stopped = false
  private readonly totals = { commitLog: 0, consumeQueue: 0, index: 0, bytes: 0 }
  private lastPass: CleanupPass | null = null

  constructor(
    private readonly targets: CleanupTargets,
    private readonly config: MessageStoreConfig,
    private readonly env: StoreEnvironment,
    private readonly flags: RunningFlags,
    private readonly log: CleanupLogger,
  ) {}

  /** The next MANUAL_DELETE_PASSES passes delete expired files whatever the hour. */
  executeDeleteFilesManually(): void {
    this.manualPassesLeft = MANUAL_DELETE_PASSES
    this.log('info', `cleanup: manual delete requested for the next ${MANUAL_DELETE_PASSES} passes`)
  }

  /** Reads the partitions, sets or clears DISK_FULL, and returns the judgement. */
  checkDisk(): DiskJudgement {
    const source = this.env.diskUsage
    this.readings = [
      readDisk(source, 'commitLog', this.targets.commitLogPath),
      readDisk(source, 'consumeQueue', this.targets.consumeQueuePath),
    ]
    const disk = judgeDisk(this.readings, this.config.diskMaxUsedSpaceRatio)
    this.disk = disk
    if (disk.diskFull) this.flags.set('DISK_FULL', disk.why)
    else this.flags.clear('DISK_FULL', disk.why)
    return disk
  }

  /** What a pass would do now, without doing it (reads the disk, so DISK_FULL follows it). */
  async plan(): Promise<CleanupPlan> {
    await this.targets.commitLog.mappedFileQueue.settle()
    const at = this.env.clock.now()
    const disk = this.checkDisk()
    const commitLog = this.planCommitLog(at, disk)
    const files = this.targets.commitLog.mappedFileQueue.mappedFiles
    const kept = files[commitLog.deletions.length]
    const minAfter = kept === undefined ? this.targets.commitLog.getMinOffset() : kept.fileFromOffset
    const derived = planDerivedCleanup(
      allConsumeQueueFiles(this.targets.consumeQueues()),
      indexFiles(this.targets.indexService()),
      minAfter,
    )
    return { at, disk, readings: [...this.readings], commitLog, derived }
  }

  private planCommitLog(at: number, disk: DiskJudgement): CommitLogPlan {
    return planCommitLogCleanup(
      {
        nowMs: at,
        localHour: new Date(at).getHours(),
        files: commitLogFiles(this.targets.commitLog),
        disk,
        manualPassesLeft: this.manualPassesLeft,
        lastHangedRetryMs: this.lastHangedRetryMs,
        dispatchedOffset: this.targets.dispatchedOffset(),
      },
      this.config,
    )
  }

  /** One pass; a call while a pass runs shares it. */
  runPass(): Promise<CleanupPass> {
    if (this.running === null) {
      this.running = this.pass().finally(() => {
        this.running = null
      })
    }
    return this.running
  }

  /** Stops deleting (a pass in progress ends after its current file) and waits for it. */
  async stop(): Promise<void> {
    this.stopped = true
    if (this.running !== null) await this.running.catch(() => undefined)
  }

  private async pass(): Promise<CleanupPass> {
    // Warm-ups of new files hold them briefly; a pass that found them held would only shut the
    // files down and leave the deletion to the next pass.
    await this.targets.commitLog.mappedFileQueue.settle()
    const clock = () => this.env.clock.now()
    const at = clock()
    const disk = this.checkDisk()
    const result: CleanupPass = {
      at,
      reason: null,
      commitLogFiles: 0,
      consumeQueueFiles: 0,
      indexFiles: 0,
      bytes: 0,
      commitLogMinOffset: this.targets.commitLog.getMinOffset(),
    }
    const unsound = UNSOUND_FLAGS.filter((name) => this.flags.isSet(name))
    if (unsound.length > 0 || this.stopped) return result

    const plan = this.planCommitLog(at, disk)
    const queue = this.targets.commitLog.mappedFileQueue
    const reasons = new Map<string, CleanupReason>(plan.deletions.map((d) => [d.file.name, d.reason]))
    const onDeleted = (reason: CleanupReason | null) => (file: { fileName: string; fileSize: number }, holders: number) => {
      const name = basename(file.fileName)
      const why = reasons.get(name) ?? reason ?? 'forced'
      result.commitLogFiles++
      result.bytes += file.fileSize
      this.log(
        'info',
        `cleanup (${why}): deleted commit-log file ${name}, ${file.fileSize} bytes` +
          (holders > 0 ? `, destroyed by force under ${holders} reader(s)` : '') +
          ` (${disk.why})`,
      )
      // Writes resume as soon as usage is back under the warning level, not at the end of the pass.
      if (this.flags.isSet('DISK_FULL')) this.checkDisk()
    }

    if (plan.retryHanged !== null || plan.deletions.length > 0 || plan.stop?.why === 'held') await this.targets.syncDerived?.()
    if (plan.retryHanged !== null) {
      this.lastHangedRetryMs = at
      queue.retryDeleteFirstFile(this.config.destroyMapedFileIntervalForcibly, { clock, onDeleted: onDeleted('forced') })
    }
    if (plan.runs) {
      if (plan.manual) this.manualPassesLeft--
      result.reason = plan.reason
      // The held file the plan stops at gets its first destroy call, which starts its forced interval.
      const maxFiles = plan.deletions.length + (plan.stop?.why === 'held' ? 1 : 0)
      if (maxFiles > 0) {
        await queue.deleteExpiredFileByTime(
          plan.expiredMs,
          this.config.deleteCommitLogFilesInterval,
          this.config.destroyMapedFileIntervalForcibly,
          plan.cleanAtOnce,
          { clock, maxFiles, onDeleted: onDeleted(plan.reason), shouldStop: () => this.stopped },
        )
      }
    }
    await this.followCommitLog(result, clock)

    result.commitLogMinOffset = this.targets.commitLog.getMinOffset()
    if (result.bytes > 0 && disk.diskFull) {
      // Space came back: writes may resume now rather than at the next pass.
      const after = this.checkDisk()
      this.log('info', `cleanup: disk after the pass: ${after.why}`)
    }
    if (plan.runs && result.commitLogFiles === 0 && disk.diskFull) {
      this.log('warn', `cleanup: the disk is full (${disk.why}) and no commit-log file could be deleted`)
    }
    this.totals.commitLog += result.commitLogFiles
    this.totals.consumeQueue += result.consumeQueueFiles
    this.totals.index += result.indexFiles
    this.totals.bytes += result.bytes
    if (plan.runs || result.bytes > 0) this.lastPass = result
    return result
  }

  /** Consume queues and index lose the files wholly below the commit log's min offset (§11.3). */
  private async followCommitLog(result: CleanupPass, clock: () => number): Promise<void> {
    const minPhy = this.targets.commitLog.getMinOffset()
    if (minPhy <= this.lastMinPhyOffset) return
    let complete = true
    let visited = 0
    for (const queue of this.targets.consumeQueues()) {
      if (this.stopped) return
      // Thousands of queues (deferred ones are opened as they come) must not hold the thread.
      if (++visited % QUEUES_PER_TURN === 0) await yieldToEvents()
      const planned = planDerivedCleanup([...allConsumeQueueFiles([queue])], [], minPhy).consumeQueues[0]?.files.length ?? 0
      const deleted = queue.deleteExpiredFile(minPhy, {
        clock,
        onDeleted: (file) => {
          result.consumeQueueFiles++
          result.bytes += file.fileSize
          this.log(
            'info',
            `cleanup: deleted consume-queue file ${queue.topic}/${queue.queueId}/${basename(file.fileName)} (below ${minPhy})`,
          )
        },
      })
      if (deleted < planned) complete = false
      if (deleted > 0 && this.config.deleteConsumeQueueFilesInterval > 0) await sleep(this.config.deleteConsumeQueueFilesInterval)
    }
    const index = this.targets.indexService()
    if (index !== null && !this.stopped) {
      const planned = planDerivedCleanup([], indexFiles(index), minPhy).indexFiles.length
      const deleted = index.deleteExpiredFile(minPhy, {
        clock,
        onDeleted: (file) => {
          result.indexFiles++
          result.bytes += file.fileSize
          this.log('info', `cleanup: deleted index file ${basename(file.getFileName())} (last entry below ${minPhy})`)
        },
      })
      if (deleted < planned) complete = false
    }
    // A file a reader held is retried at the next pass instead of waiting for the next move.
    if (complete) this.lastMinPhyOffset = minPhy
  }

  stats(): CleanupStats {
    return {
      diskUsage: this.readings.map((reading) => ({ ...reading })),
      diskPressure: this.disk === null ? 'not read yet' : this.disk.why,
      filesDeleted: { commitLog: this.totals.commitLog, consumeQueue: this.totals.consumeQueue, index: this.totals.index },
      bytesDeleted: this.totals.bytes,
      manualPassesLeft: this.manualPassesLeft,
      lastPass: this.lastPass === null ? null : { ...this.lastPass },
    }
  }
}
