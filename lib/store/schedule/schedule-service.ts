// RocketMQ's ScheduleMessageService: delivers the messages parked in SCHEDULE_TOPIC_XXXX queue
// level − 1 to their real topic and queue once due. Each level is a FIFO with its own timer, woken
// for its head's due time (the unit's tagsCode), on a put to an idle level, or by a poll. Progress
// (next offset per level) lives in config/delayOffset.json (delay-offsets.ts).
//
// Delivery is at least once. Progress is written every flushDelayOffsetInterval and at close, and
// a periodic write only covers deliveries whose copies the commit log has flushed, so that no
// power cut can leave progress past a delivered copy that was lost; after a crash the messages
// past the written progress are delivered again (same UNIQ_KEY, new offset msgId). A progress note
// (progress-note.ts) written after each batch narrows that, after a process crash, to the batches
// in flight.
import { dirname, join } from 'node:path'

import type { PutMessageResult } from '../commitlog/commit-log.js'
import { PropertyName, SCHEDULE_TOPIC, validateTopic } from '../commitlog/record.js'
import { storedCopy } from './stored-copy.js'
import type { Clock } from '../environment.js'
import type { ConsumeQueue } from '../queue/consume-queue.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import type { StoreLog } from '../store-logger.js'
import { readQueueUnit, TIMER_TOPIC } from '../timer/timer-messages.js'
import { TimerService, type TimerDeps } from '../timer/timer-service.js'
import type { Message, MessageExt } from '../types.js'
import type { DelayLevels } from './delay-level-table.js'
import { asksForDelay, delayedMessage, isDelayRefusal } from './delay-levels.js'
import { loadDelayOffsets, saveDelayOffsets } from './delay-offsets.js'
import { DELAY_PROGRESS_FILE, isOffset, noteWriter, readProgressNote } from './progress-note.js'
import type { ScheduleLevelStats, ScheduleStats } from './schedule-stats.js'

export type { ScheduleLevelStats, ScheduleStats } from './schedule-stats.js'

/** RocketMQ's transaction half topic: a delayed message is never delivered there. */
const TRANSACTION_HALF_TOPIC = 'RMQ_SYS_TRANS_HALF_TOPIC'
/** Due messages of one level put in one call. */
const DELIVERY_BATCH = 32
/** Statuses a put gives a message whatever the time: delivery skips it rather than retry. */
const PERMANENT_REFUSALS: ReadonlySet<string> = new Set(['MESSAGE_ILLEGAL', 'PROPERTIES_SIZE_EXCEEDED'])
/** Retry after a refused put, and RocketMQ's pause between passes. */
const RETRY_MS = 100
/** An idle level (nothing pending) looks again this often; a put to it wakes it at once. */
const IDLE_POLL_MS = 1000
/** The longest sleep before a head's due time, so that a clock set forward is noticed. */
const MAX_SLEEP_MS = 5000

export interface ScheduleDeps {
  levels: DelayLevels
  queues: ConsumeQueueTable
  /** The record at a commit-log offset, or null when it is gone or unreadable. */
  lookMessage(commitLogOffset: number): MessageExt | null
  commitLogMinOffset(): number
  commitLogMaxOffset(): number
  commitLogFlushedOffset(): number
  /** Dispatches what the commit log holds beyond the consume queues. */
  catchUp(): void
  clock: Clock
  log: StoreLog
  repair(action: string, reason: string): void
  /** config/delayOffset.json */
  path: string
  flushDelayOffsetInterval: number
  /** What the timer (any delivery time, timer/) needs besides the above. */
  timer: Pick<TimerDeps, 'root' | 'configDir' | 'precisionMs' | 'findByKey' | 'logFileSize'>
}

type Put = (messages: Message[]) => Promise<PutMessageResult[]>

interface Snapshot {
  readonly table: Map<number, number>
  /** The commit log's end when it was taken: every delivery it counts lies below. */
  readonly logEnd: number
}

export class ScheduleService {
  private readonly deps: ScheduleDeps
  /** Delivery at any time (RocketMQ 5's timer store): it shares the put rewrite and the lifetime. */
  readonly timer: TimerService
  /** Level → next offset to deliver. */
  private readonly progress = new Map<number, number>()
  private readonly timers = new Map<number, NodeJS.Timeout>()
  /** Levels sleeping with nothing pending: a put to them wakes them at once. */
  private readonly idle = new Set<number>()
  private readonly passes = new Map<number, Promise<void>>()
  /** Levels whose head's put is being refused (said once per run). */
  private readonly refusing = new Set<number>()
  private put: Put | null = null
  private persistTimer: NodeJS.Timeout | null = null
  private stopped = false
  /** Progress tables taken by the periodic save, waiting for the commit log to be flushed past them. */
  private snapshots: Snapshot[] = []
  /** The table last written (or read back), so that an unchanged table is not written again; none yet is an empty one. */
  private savedText = '[]'
  private delivered = 0
  private lostToRetention = 0
  private skipped = 0
  private retentionDeletedPending = 0
  /** Per level, the queue offset up to which pending units lost to retention were counted. */
  private readonly retentionCounted = new Map<number, number>()
  /** The commit log's min offset when retention was last looked at. */
  private retentionSeen = 0
  private readonly notePath: string
  private readonly note: ReturnType<typeof noteWriter>

  constructor(deps: ScheduleDeps) {
    this.deps = deps
    this.notePath = join(dirname(deps.path), DELAY_PROGRESS_FILE)
    this.note = noteWriter(this.notePath, deps.log)
    this.timer = new TimerService({ ...deps, ...deps.timer, log: deps.log.child('timer') })
    const { clock } = deps
    this.timerSettings = { now: () => clock.now(), precisionMs: deps.timer.precisionMs }
  }

  private readonly timerSettings: { now(): number; precisionMs: number }

  /** Whether rewrite would look at `message` (it asks for a delay): a put copies its batch only then. */
  rewrites(message: Message): boolean {
    return message !== null && typeof message === 'object' && asksForDelay(message)
  }

  /**
   * Rewrites, in place, the messages of a put that ask for a delay (delay-levels.ts); returns
   * the refusals by index (MESSAGE_ILLEGAL), or null when none was refused.
   */
  rewrite(messages: Message[]): ({ status: 'MESSAGE_ILLEGAL'; reason: string } | undefined)[] | null {
    let refusals: ({ status: 'MESSAGE_ILLEGAL'; reason: string } | undefined)[] | null = null
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i]
      if (message === null || typeof message !== 'object' || !asksForDelay(message)) continue
      // Misuse (no topic string, a bad queue id) is left for the put's own checks to throw on.
      if (typeof message.topic !== 'string') continue
      const queueId = message.queueId ?? 0
      if (!Number.isSafeInteger(queueId) || queueId < 0 || queueId > 0x7fffffff) continue
      const invalid =
        validateTopic(message.topic) ??
        (message.topic === SCHEDULE_TOPIC ? 'a delayed message cannot be bound for the schedule topic' : null) ??
        (message.topic === TIMER_TOPIC ? 'a delayed message cannot be bound for the timer topic' : null)
      const delayed =
        invalid === null ? delayedMessage(message, this.deps.levels, this.timerSettings) : { reason: `invalid topic: ${invalid}` }
      if (isDelayRefusal(delayed)) {
        refusals ??= []
        refusals[i] = { status: 'MESSAGE_ILLEGAL', reason: delayed.reason }
        continue
      }
      messages[i] = delayed
      if (delayed.topic === SCHEDULE_TOPIC) this.wakeIfIdle((delayed.queueId ?? 0) + 1)
    }
    return refusals
  }

  /**
   * Reads config/delayOffset.json (or its .bak); a damaged file is a repair: the table is rebuilt
   * from what is left (the .bak, else each schedule queue's min offset: messages delivered since
   * the last good save are delivered again).
   */
  load(): void {
    this.timer.load()
    const loaded = loadDelayOffsets(this.deps.path)
    for (const [level, offset] of loaded.table) this.progress.set(level, offset)
    if (loaded.damage === null) this.savedText = tableText(loaded.table)
    if (loaded.damage !== null) {
      this.deps.repair(
        loaded.fromBackup ? 'read config/delayOffset.json.bak instead' : 'rebuilt config/delayOffset.json from the schedule queues',
        `config/delayOffset.json: ${loaded.damage}`,
      )
    }
  }

  /** Starts delivery: `put` appends messages as the store's put does. */
  start(put: Put): void {
    if (this.put !== null || this.stopped) return
    this.put = put
    this.timer.start(put)
    this.applyNote()
    this.retentionSeen = this.deps.commitLogMinOffset()
    // A level without progress (a new store, a rebuilt file) starts at its queue's min offset.
    for (let level = 1; level <= this.deps.levels.maxLevel; level++) {
      const queue = this.deps.queues.find(SCHEDULE_TOPIC, level - 1)
      if (queue !== null && !this.progress.has(level)) this.progress.set(level, queue.getMinOffsetInQueue())
    }
    for (let level = 1; level <= this.deps.levels.maxLevel; level++) this.arm(level, 0)
    this.persistTimer = setInterval(() => this.persistPeriodically(), this.deps.flushDelayOffsetInterval)
    this.persistTimer.unref()
  }

  /**
   * Runs every level's pass now and waits for them (a test moved the clock): one batch per level;
   * the rest follows on the timers.
   */
  async deliverDue(): Promise<void> {
    if (this.put === null || this.stopped) return
    for (let level = 1; level <= this.deps.levels.maxLevel; level++) {
      await this.passes.get(level)
      const timer = this.timers.get(level)
      if (timer !== undefined) clearTimeout(timer)
      this.timers.delete(level)
      if (!this.passes.has(level)) this.runPass(level)
    }
    await Promise.allSettled([...this.passes.values()])
  }

  /** Stops the timers and waits for the passes in flight; nothing is delivered afterwards. */
  async stop(): Promise<void> {
    this.stopped = true
    for (const timer of this.timers.values()) clearTimeout(timer)
    this.timers.clear()
    if (this.persistTimer !== null) clearInterval(this.persistTimer)
    this.persistTimer = null
    await Promise.allSettled([...this.passes.values(), this.timer.stop()])
  }

  /**
   * The save at close, after the commit log's flush: the table as it is, or, when that flush
   * failed, the newest periodic table whose deliveries are on disk.
   */
  saveAtClose(onError: (error: Error) => void): void {
    this.timer.saveAtClose(onError)
    if (this.put === null) return
    try {
      const flushed = this.deps.commitLogFlushedOffset()
      if (flushed >= this.deps.commitLogMaxOffset()) {
        this.save(new Map(this.progress))
      } else {
        const covered = this.snapshots.filter((snapshot) => snapshot.logEnd <= flushed).pop()
        if (covered !== undefined) this.save(covered.table)
      }
    } catch (error) {
      onError(error instanceof Error ? error : new Error(String(error)))
    }
  }

  private persistPeriodically(): void {
    if (this.stopped) return
    this.snapshots.push({ table: new Map(this.progress), logEnd: this.deps.commitLogMaxOffset() })
    const flushed = this.deps.commitLogFlushedOffset()
    let ready = -1
    for (let i = 0; i < this.snapshots.length; i++) if (this.snapshots[i].logEnd <= flushed) ready = i
    if (ready < 0) {
      // Keep the newest few: a flush that lags for long only delays the save.
      if (this.snapshots.length > 4) this.snapshots.splice(1, 1)
      return
    }
    const snapshot = this.snapshots[ready]
    this.snapshots = this.snapshots.slice(ready + 1)
    try {
      this.save(snapshot.table)
    } catch (error) {
      this.deps.log('error', `cannot save ${this.deps.path}: ${(error as Error).message}`)
    }
  }

  private save(table: Map<number, number>): void {
    const text = tableText(table)
    if (text === this.savedText) return
    saveDelayOffsets(this.deps.path, table)
    this.savedText = text
  }

  /** The progress after this batch, for a reopen after a process crash (progress-note.ts). */
  private writeNote(): void {
    const offsets: Record<string, number> = {}
    for (const [level, offset] of this.progress) offsets[level] = offset
    this.note({ logEnd: this.deps.commitLogMaxOffset(), offsets })
  }

  /**
   * At start, after recovery: a note whose deliveries the recovered commit log holds moves each
   * level's progress up to it (a process crash); one past the log's end (a power cut) is ignored.
   */
  private applyNote(): void {
    const note = readProgressNote(this.notePath, [])
    const offsets = note?.offsets
    if (note === null || typeof offsets !== 'object' || offsets === null) return
    if (note.logEnd > this.deps.commitLogMaxOffset()) {
      this.deps.log('info', `config/${DELAY_PROGRESS_FILE} counts deliveries the commit log lost; config/delayOffset.json decides`)
      return
    }
    let moved = 0
    for (const [key, offset] of Object.entries(offsets)) {
      const level = Number(key)
      if (!Number.isSafeInteger(level) || level < 1 || !isOffset(offset)) continue
      const stored = this.progress.get(level) ?? 0
      if (offset > stored) {
        moved += offset - stored
        this.progress.set(level, offset)
      }
    }
    if (moved > 0)
      this.deps.log('info', `delivery progress after the last batch taken from config/${DELAY_PROGRESS_FILE} (${moved} messages)`)
  }

  private wakeIfIdle(level: number): void {
    if (this.put !== null && this.idle.has(level)) this.arm(level, 0)
  }

  /** Runs the level's pass after `ms` (replacing its timer); a pass in flight runs again after it. */
  private arm(level: number, ms: number, idle = false): void {
    if (this.stopped) return
    const previous = this.timers.get(level)
    if (previous !== undefined) clearTimeout(previous)
    if (idle) this.idle.add(level)
    else this.idle.delete(level)
    const timer = setTimeout(() => {
      this.timers.delete(level)
      this.runPass(level)
    }, ms)
    timer.unref()
    this.timers.set(level, timer)
  }

  private runPass(level: number): void {
    const running = this.passes.get(level)
    if (running !== undefined) {
      // One pass per level at a time: the one in flight re-arms the timer when it ends.
      void running.then(() => this.arm(level, 0))
      return
    }
    const pass = this.pass(level)
      .then(
        (next) => {
          if (next !== null) this.arm(level, next.ms, next.idle)
        },
        (error: unknown) => {
          this.deps.log('error', `delivery of delay level ${level}: ${(error as Error)?.message ?? String(error)}`)
          this.arm(level, RETRY_MS * 10)
        },
      )
      .finally(() => this.passes.delete(level))
    this.passes.set(level, pass)
  }

  /**
   * Delivers what is due at the head of one level's queue, in order; returns when to look again
   * (null once stopped).
   */
  private async pass(level: number): Promise<{ ms: number; idle: boolean } | null> {
    const { deps } = this
    deps.catchUp()
    this.checkRetention()
    const queue = deps.queues.find(SCHEDULE_TOPIC, level - 1)
    if (queue === null) return { ms: IDLE_POLL_MS, idle: true }
    const offset = this.clampedOffset(level, queue)
    const max = queue.getMaxOffsetInQueue()
    const now = deps.clock.now()
    const delay = deps.levels.delayOf(level)
    const batch: Message[] = []
    /** Per unit read: the index in batch of its message, or -1 for a unit skipped. */
    const units: number[] = []
    let wait = -1
    for (let at = offset; at < max && batch.length < DELIVERY_BATCH; at++) {
      const unit = readQueueUnit(queue, at)
      if (unit === null) break
      // RocketMQ's correctDeliverTimestamp: a due time further than the level's delay ahead means
      // the clock went back; deliver now rather than hold the message for that long.
      const due = unit.tagsCode > now + delay ? now : unit.tagsCode
      if (due > now) {
        wait = due - now
        break
      }
      const message = this.rebuilt(level, at, unit.offset)
      units.push(message === null ? -1 : batch.length)
      if (message !== null) batch.push(message)
    }
    /** Messages of the batch done with, in order: delivered, or refused for good (skipped). */
    let done = 0
    let delivered = 0
    let refused: PutMessageResult | null = null
    if (batch.length > 0) {
      const put = this.put
      if (put === null) return null
      const results = await put(batch)
      for (const result of results) {
        if (result.status === 'PUT_OK') {
          delivered++
        } else if (PERMANENT_REFUSALS.has(result.status)) {
          // The real topic will never take it (a compacted topic and no key, ...): holding the
          // level behind it for ever would stop every message after it.
          this.skipped++
          deps.log(
            'error',
            `delay level ${level}, offset ${offset + unitOf(units, done)}: its real topic refuses it (${result.status}: ${result.reason ?? ''}); skipped`,
          )
        } else {
          refused = result
          break
        }
        done++
      }
    }
    // Progress covers the units before the first refused put; skipped ones go with them.
    let advanced = 0
    for (const index of units) {
      if (index >= done) break
      advanced++
    }
    this.delivered += delivered
    if (advanced > 0) {
      this.progress.set(level, offset + advanced)
      this.writeNote()
    }
    if (this.stopped) return null
    if (refused !== null) {
      // Said once per run of refusals, not every 100 ms.
      if (!this.refusing.has(level)) {
        this.refusing.add(level)
        deps.log(
          'warn',
          `delivery of delay level ${level} refused with ${refused.status} (${refused.reason ?? ''}); retrying every ${RETRY_MS} ms`,
        )
      }
      return { ms: RETRY_MS, idle: false }
    }
    if (this.refusing.delete(level)) deps.log('info', `delivery of delay level ${level} resumed`)
    if (advanced < units.length || (wait < 0 && offset + advanced < max && units.length === DELIVERY_BATCH)) return { ms: 0, idle: false }
    if (wait >= 0) return { ms: Math.min(wait, MAX_SLEEP_MS), idle: false }
    if (offset + advanced < max) return { ms: RETRY_MS * 10, idle: false } // a unit that could not be read yet
    return { ms: IDLE_POLL_MS, idle: true }
  }

  /**
   * Retention deleted commit-log files (the min offset moved): counts and logs the pending
   * messages whose record went with them. They are not held back: as in RocketMQ, retention
   * follows its own rules (holding files for a message due in days could fill the disk).
   */
  private checkRetention(): void {
    const min = this.deps.commitLogMinOffset()
    if (this.put === null || min <= this.retentionSeen) return
    this.retentionSeen = min
    const perLevel: string[] = []
    let lost = 0
    for (let level = 1; level <= this.deps.levels.maxLevel; level++) {
      const queue = this.deps.queues.find(SCHEDULE_TOPIC, level - 1)
      if (queue === null) continue
      const queueMin = queue.getMinOffsetInQueue()
      const max = queue.getMaxOffsetInQueue()
      const from = Math.max(this.progress.get(level) ?? queueMin, this.retentionCounted.get(level) ?? 0)
      // Units below the queue's min went with their files; the others are read until one is kept.
      let at = Math.min(Math.max(from, queueMin), max)
      for (; at < max; at++) {
        const unit = readQueueUnit(queue, at)
        if (unit === null || unit.offset >= min) break
      }
      this.retentionCounted.set(level, at)
      if (at > from) {
        lost += at - from
        perLevel.push(`level ${level}: ${at - from}`)
      }
    }
    if (lost === 0) return
    this.retentionDeletedPending += lost
    this.deps.log(
      'warn',
      `retention deleted the records of ${lost} pending delayed messages (${perLevel.join(', ')}; commit log now starts at ${min}); they will be skipped when due (keep fileReservedTime above the longest delay)`,
    )
  }

  /** The level's progress, moved into [min, max] of its queue (retention trims queues; RocketMQ clamps too). */
  private clampedOffset(level: number, queue: ConsumeQueue): number {
    const stored = this.progress.get(level) ?? 0
    const min = queue.getMinOffsetInQueue()
    const max = queue.getMaxOffsetInQueue()
    const offset = Math.min(Math.max(stored, min), max)
    if (offset !== stored || !this.progress.has(level)) {
      if (stored < min) {
        this.lostToRetention += min - stored
        this.deps.log('error', `delay level ${level}: retention deleted ${min - stored} pending messages before their delivery; skipped`)
      }
      this.progress.set(level, offset)
    }
    return offset
  }

  /** The message to put for the schedule record at `commitLogOffset`, or null to skip it (logged). */
  private rebuilt(level: number, queueOffset: number, commitLogOffset: number): Message | null {
    const { deps } = this
    const where = `delay level ${level}, offset ${queueOffset} (commit-log offset ${commitLogOffset})`
    if (commitLogOffset < deps.commitLogMinOffset()) {
      this.lostToRetention++
      deps.log('error', `${where}: retention deleted the record before its delivery; skipped`)
      return null
    }
    const record = deps.lookMessage(commitLogOffset)
    const topic = record?.properties[PropertyName.REAL_TOPIC]
    const queueText = record?.properties[PropertyName.REAL_QID]
    const queueId = queueText !== undefined && /^\d{1,10}$/.test(queueText) ? Number(queueText) : -1
    if (record === null || topic === undefined || validateTopic(topic) !== null || queueId < 0 || queueId > 0x7fffffff) {
      this.skipped++
      deps.log('error', `${where}: ${record === null ? 'the record is unreadable' : 'no valid REAL_TOPIC / REAL_QID'}; skipped`)
      return null
    }
    // Never back into the schedule topic (it would come round again at once), nor, as RocketMQ
    // refuses, into the transaction half topic.
    if (topic === SCHEDULE_TOPIC || topic === TRANSACTION_HALF_TOPIC) {
      this.skipped++
      deps.log('error', `${where}: REAL_TOPIC is ${topic}, where a delayed message is never delivered; skipped`)
      return null
    }
    // What RocketMQ's messageTimeup keeps: body (as stored), flag, sysFlag, born time and host,
    // reconsume count and every property but DELAY (REAL_TOPIC / REAL_QID stay, as in its bytes).
    const { [PropertyName.DELAY]: _delay, ...properties } = record.properties
    return storedCopy(record, topic, queueId, properties)
  }

  stats(): ScheduleStats {
    const { deps } = this
    this.checkRetention()
    const now = deps.clock.now()
    const levels: ScheduleLevelStats[] = []
    let pending = 0
    let nextDueTime: number | null = null
    let lagMs = 0
    let oldest: number | null = null
    for (let level = 1; level <= Math.max(deps.levels.maxLevel, ...this.progress.keys()); level++) {
      const queue = deps.queues.find(SCHEDULE_TOPIC, level - 1)
      if (queue === null && !this.progress.has(level)) continue
      const min = queue?.getMinOffsetInQueue() ?? 0
      const max = queue?.getMaxOffsetInQueue() ?? 0
      const offset = Math.min(Math.max(this.progress.get(level) ?? 0, min), max)
      const head = queue === null || offset >= max ? null : readQueueUnit(queue, offset)
      const delay = deps.levels.delayOf(level)
      const due = head === null ? null : head.tagsCode > now + delay ? now : head.tagsCode
      levels.push({ level, delayMs: delay, pending: max - offset, offset, nextDueTime: due })
      pending += max - offset
      if (due !== null) {
        if (nextDueTime === null || due < nextDueTime) nextDueTime = due
        if (due < now && now - due > lagMs) lagMs = now - due
      }
      if (head !== null && (oldest === null || head.offset < oldest)) oldest = head.offset
    }
    return {
      levels,
      pending,
      nextDueTime,
      delivered: this.delivered,
      lagMs,
      lostToRetention: this.lostToRetention,
      retentionDeletedPending: this.retentionDeletedPending,
      skipped: this.skipped,
      oldestPendingCommitLogOffset: oldest,
    }
  }
}

/** The position in the pass's units of the batch's message `index` (units hold -1 for skipped ones). */
function unitOf(units: readonly number[], index: number): number {
  return units.indexOf(index)
}

function tableText(table: ReadonlyMap<number, number>): string {
  return JSON.stringify([...table].sort((a, b) => a[0] - b[0]))
}
