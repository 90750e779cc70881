// RocketMQ 5's timer store, in one service: records put in rmq_sys_wheel_timer (timer-messages.ts)
// are enqueued, in their queue's order, as units of the timer log chained per slot of the wheel;
// a loop reads each slot once its time has come and puts its messages back to their real topics.
// Memory does not grow with pending timers: they live in the log, the wheel and the commit log.
//
// Enqueue and delivery run on one loop (never both at once), woken at least every 100 ms. A slot
// delivered is flagged in the wheel (its unused int), not cleared, so that after a crash the flags
// of the slots past the saved read time are reset and delivered again (at least once). A clock set
// back rewinds the read time to it: flagged slots are skipped, and entries put meanwhile land in
// their own slots rather than wait for the old time.
//
// Progress (config/timercheck) is saved every second and at close, covering only deliveries whose
// copies the commit log has flushed, as the schedule service does for its levels; a progress note
// (schedule/progress-note.ts) after each batch lets a reopen after a process crash repeat only the
// batch in flight. A clock set back saves the rewound read time at once: no note or checkpoint
// may then say that slots which take new entries were delivered.
import * as fs from 'node:fs'
import { join } from 'node:path'

import { javaStringHashCode } from '../bytes.js'
import type { PutMessageResult } from '../commitlog/commit-log.js'
import { PropertyName, SCHEDULE_TOPIC, validateTopic } from '../commitlog/record.js'
import type { Clock } from '../environment.js'
import type { ConsumeQueueTable } from '../queue/queue-table.js'
import { noteWriter, readProgressNote, TIMER_PROGRESS_FILE } from '../schedule/progress-note.js'
import type { StoreLog } from '../store-logger.js'
import type { Message, MessageExt } from '../types.js'
import { loadTimerCheckpoint, saveTimerCheckpoint } from './timer-checkpoint.js'
import { TimerLog, TimerMagic, type TimerUnit } from './timer-log.js'
import { neededLogPosition, pendingInRange } from './timer-retention.js'
import { cancelMarker, deliveredCopy, readQueueUnit, TIMER_TOPIC, TimerProperty } from './timer-messages.js'
import type { TimerStats } from './timer-stats.js'
import { TIMER_WHEEL_SLOTS, TimerWheel, type TimerSlot } from './timer-wheel.js'

export type { TimerStats } from './timer-stats.js'

export const TIMER_LOG_DIR = 'timerlog'
export const TIMER_WHEEL_FILE = 'timerwheel'
export const TIMER_CHECKPOINT_FILE = 'timercheck'

/** The longest sleep of the loop: new entries and a moved clock are noticed this fast. */
const POLL_MS = 100
/** Retry after a refused put. */
const RETRY_MS = 100
/** Progress is saved this often (RocketMQ's timerFlushIntervalMs). */
const FLUSH_INTERVAL_MS = 1000
/** Units enqueued per turn of the loop before it yields. */
const TURN_LIMIT = 20_000
/** Slots walked per turn (an empty one costs a read of 32 bytes). */
const WALK_LIMIT = 200_000
const DELIVERY_BATCH = 32
const PERMANENT_REFUSALS: ReadonlySet<string> = new Set(['MESSAGE_ILLEGAL', 'PROPERTIES_SIZE_EXCEEDED'])
const NEVER_DELIVERED_TO: ReadonlySet<string> = new Set([TIMER_TOPIC, SCHEDULE_TOPIC, 'RMQ_SYS_TRANS_HALF_TOPIC'])

export interface TimerDeps {
  /** The store's folder: timerlog/ and timerwheel live there, timercheck in config/. */
  root: string
  configDir: string
  precisionMs: number
  /** Size of each timer-log file (mappedFileSizeTimerLog). */
  logFileSize: number
  queues: ConsumeQueueTable
  lookMessage(commitLogOffset: number): MessageExt | null
  /** Records of `topic` indexed under `key` (UNIQ_KEY). */
  findByKey(topic: string, key: string): readonly MessageExt[]
  commitLogMinOffset(): number
  commitLogMaxOffset(): number
  commitLogFlushedOffset(): number
  catchUp(): void
  clock: Clock
  log: StoreLog
  repair(action: string, reason: string): void
}

type Put = (messages: Message[]) => Promise<PutMessageResult[]>

/** The delivered flag in a slot's unused int. */
const DELIVERED = 1

export class TimerService {
  private readonly deps: TimerDeps
  private readonly p: number
  /** How far ahead of the read time a unit may be placed; later ones roll (RocketMQ's roll window). */
  private readonly rollWindow: number
  private readonly checkpointPath: string
  private readonly notePath: string
  private readonly note: ReturnType<typeof noteWriter>
  private readonly log: TimerLog
  private wheel: TimerWheel | null = null
  /** The next slot to deliver. */
  private readTime = 0
  /** The next unit of the timer topic's queue to enqueue. */
  private queueOffset = 0
  private pending = 0
  private delivered = 0
  private cancelled = 0
  private skipped = 0
  private lostToRetention = 0
  private retentionDeletedPending = 0
  /** The commit log's min offset when retention was last looked at. */
  private retentionSeen = 0
  /** The read time and log position of the last checkpoint (what a reopen starts from). */
  private saved = { readTime: 0, flushPos: 0 }
  /** Timer-log files when they were last trimmed, and saves since. */
  private trimmed = { files: 0, saves: 0 }
  private logFilesDeleted = 0
  private put: Put | null = null
  private stopped = false
  private running: Promise<void> | null = null
  private wake: NodeJS.Timeout | null = null
  private flushTimer: NodeJS.Timeout | null = null
  /** Units of the slot being delivered already done, when a refused put interrupted it. */
  private resume: { slotTime: number; done: number } | null = null
  private snapshots: { readTime: number; logEnd: number }[] = []
  private version = 0
  private refusing = false
  private nextDueCache: number | null | undefined = undefined

  constructor(deps: TimerDeps) {
    this.deps = deps
    this.p = deps.precisionMs
    this.rollWindow = (TIMER_WHEEL_SLOTS / 2) * this.p
    this.checkpointPath = join(deps.configDir, TIMER_CHECKPOINT_FILE)
    this.notePath = join(deps.configDir, TIMER_PROGRESS_FILE)
    this.note = noteWriter(this.notePath, deps.log)
    this.log = new TimerLog(join(deps.root, TIMER_LOG_DIR), deps.logFileSize)
  }

  private floorTime(time: number): number {
    return Math.floor(time / this.p) * this.p
  }

  // ---- load and recovery --------------------------------------------------------------------

  /**
   * Opens the files and recovers: the units written after the last flush re-point their slots; a
   * missing or damaged wheel or checkpoint, or a wheel that disagrees with the log, is rebuilt
   * from the whole log (a repair); the log is cut at its first damaged unit (a repair), and the
   * timer topic's records past the last unit are enqueued again.
   */
  load(): void {
    const { deps } = this
    // A store that never had a timed message has no timer files: its first one makes them.
    const files = [join(deps.root, TIMER_WHEEL_FILE), join(deps.root, TIMER_LOG_DIR), this.checkpointPath]
    if (files.some((file) => fs.existsSync(file))) this.open()
  }

  private open(): void {
    const { deps } = this
    const wheelPath = join(deps.root, TIMER_WHEEL_FILE)
    const stat = fs.statSync(wheelPath, { throwIfNoEntry: false })
    this.log.load()
    const hadLog = this.log.queue.mappedFiles.length > 0
    const opened = TimerWheel.open(wheelPath, this.p, stat !== undefined, stat?.size ?? 0)
    this.wheel = opened.wheel
    let checkpoint = loadTimerCheckpoint(this.checkpointPath)
    let rebuild = false
    if (checkpoint !== null && 'damage' in checkpoint) {
      deps.repair('rebuilt the timer wheel from the timer log', `config/${TIMER_CHECKPOINT_FILE}: ${checkpoint.damage}`)
      checkpoint = null
      rebuild = true
    } else if (opened.recreated && hadLog) {
      deps.repair(
        'rebuilt the timer wheel from the timer log',
        `${TIMER_WHEEL_FILE} was ${stat === undefined ? 'missing' : `${stat.size} bytes`}`,
      )
      rebuild = true
    } else if (checkpoint === null && hadLog) {
      deps.repair('rebuilt the timer wheel from the timer log', `config/${TIMER_CHECKPOINT_FILE} was missing`)
      rebuild = true
    }
    const now = deps.clock.now()
    // Without a checkpoint, what the log holds for the last 7 days may be undelivered: it goes again.
    this.readTime = checkpoint?.lastReadTimeMs ?? (hadLog ? this.floorTime(now) - TIMER_WHEEL_SLOTS * this.p : this.floorTime(now))
    this.queueOffset = checkpoint?.lastTimerQueueOffset ?? 0
    this.saved = { readTime: this.readTime, flushPos: checkpoint?.lastTimerLogFlushPos ?? 0 }
    let lastRecord = this.recoverFrom(rebuild ? 0 : (checkpoint?.lastTimerLogFlushPos ?? 0), rebuild)
    const broken = this.checkWheel()
    if (broken !== null) {
      deps.repair('rebuilt the timer wheel from the timer log', broken)
      lastRecord = this.recoverFrom(0, true)
    }
    if (lastRecord >= 0) {
      const record = deps.lookMessage(lastRecord)
      if (record !== null && record.queueOffset + 1 > this.queueOffset) this.queueOffset = record.queueOffset + 1
    }
    this.resetFlagsAndCount()
    // A new timer gets its checkpoint now, so that a crash before the first periodic save is not
    // taken for a lost one (which would deliver again all the log holds).
    if (checkpoint === null && !hadLog) this.save(this.readTime)
  }

  /** Scans the log from `from`, re-pointing slots; returns the commit-log offset of the last entry's record (−1: none). */
  private recoverFrom(from: number, clearFirst: boolean): number {
    const wheel = this.wheel as TimerWheel
    if (clearFirst) wheel.clearAll()
    let lastRecord = -1
    const damaged = this.log.recover(from, (pos, unit) => {
      if ((unit.magic & TimerMagic.ROLL) === 0 && unit.offsetPy > lastRecord) lastRecord = unit.offsetPy
      if (unit.slotTime < this.readTime) return
      const slot = wheel.get(unit.slotTime)
      const count = (unit.magic & TimerMagic.DELETE) !== 0 ? -1 : 1
      if (slot === null) wheel.set(unit.slotTime, { firstPos: pos, lastPos: pos, num: count }, 0)
      else if (slot.lastPos < pos) wheel.set(unit.slotTime, { firstPos: slot.firstPos, lastPos: pos, num: slot.num + count }, 0)
    })
    if (damaged) {
      this.deps.repair(`cut the timer log at ${this.log.end}`, 'a damaged unit; the timer topic is enqueued again from the last good one')
      // The checkpoint's queue offset may lie past the damage: enqueue again from the last good unit.
      this.queueOffset = 0
    }
    return lastRecord
  }

  /** Why the wheel disagrees with the log (a slot past its end, or at a unit of another slot), or null. */
  private checkWheel(): string | null {
    const end = this.log.end
    let broken: string | null = null
    ;(this.wheel as TimerWheel).forEach((slotTime, slot) => {
      if (broken !== null || slotTime < this.readTime) return
      const unit = slot.lastPos >= 0 && slot.lastPos < end ? this.log.read(slot.lastPos) : null
      if (slot.firstPos > slot.lastPos || unit === null || unit.slotTime !== slotTime) {
        broken = `${TIMER_WHEEL_FILE}: the slot for ${new Date(slotTime).toISOString()} points at ${slot.lastPos}, not a unit of its own (the log ends at ${end})`
      }
    })
    return broken
  }

  /** Deliveries past the saved read time may be lost: their slots go again. Counts what is pending. */
  private resetFlagsAndCount(): void {
    const wheel = this.wheel as TimerWheel
    let pending = 0
    wheel.forEach((slotTime, slot, flags) => {
      if (slotTime < this.readTime) return
      if ((flags & DELIVERED) !== 0) wheel.set(slotTime, slot, 0)
      pending += slot.num
    })
    this.pending = pending
  }

  // ---- the loop -----------------------------------------------------------------------------

  start(put: Put): void {
    if (this.put !== null || this.stopped) return
    this.put = put
    this.retentionSeen = this.deps.commitLogMinOffset()
    this.applyNote()
    this.arm(0)
    this.flushTimer = setInterval(() => this.persist(), FLUSH_INTERVAL_MS)
    this.flushTimer.unref()
  }

  private arm(ms: number): void {
    if (this.stopped) return
    if (this.wake !== null) clearTimeout(this.wake)
    this.wake = setTimeout(() => {
      this.wake = null
      this.runTurn()
    }, ms)
    this.wake.unref()
  }

  /** Runs a turn (after the one in flight) and arms the next; resolves with its pause (0: more to do). */
  private runTurn(): Promise<number> {
    const previous = this.running ?? Promise.resolve()
    const run: Promise<number> = previous
      .then(() => this.turn())
      .then(
        (next) => {
          this.arm(next)
          return next
        },
        (error: unknown) => {
          this.deps.log('error', `timer delivery: ${(error as Error)?.message ?? String(error)}`)
          this.arm(RETRY_MS * 10)
          return RETRY_MS * 10
        },
      )
    const running = run.then(() => {
      if (this.running === running) this.running = null
    })
    this.running = running
    return run
  }

  /** Runs turns now until nothing is left to do at once (a test moved the clock); the loop goes on afterwards. */
  async deliverDue(): Promise<void> {
    for (let turns = 0; turns < 1000 && this.put !== null && !this.stopped; turns++) {
      if (this.wake !== null) clearTimeout(this.wake)
      this.wake = null
      if ((await this.runTurn()) !== 0) return
    }
  }

  /** One turn: enqueue what the timer topic got, deliver the due slots; returns when to turn again. */
  private async turn(): Promise<number> {
    const { deps } = this
    deps.catchUp()
    if (this.wheel === null) {
      if (this.stopped || deps.queues.find(TIMER_TOPIC, 0) === null) return POLL_MS
      this.open()
    }
    this.checkRetention()
    const more = this.enqueue()
    const now = deps.clock.now()
    // The clock went back: read from its time again (delivered slots are flagged and skipped).
    if (this.readTime > this.floorTime(now) + this.p) this.rewind(this.floorTime(now))
    let walked = 0
    while (!this.stopped && this.readTime + this.p <= now && walked < WALK_LIMIT) {
      const slotTime = this.readTime
      const found = (this.wheel as TimerWheel).getWithFlags(slotTime)
      if (found !== null && (found.flags & DELIVERED) === 0) {
        if (!(await this.deliverSlot(slotTime, found.slot))) return RETRY_MS
        ;(this.wheel as TimerWheel).set(slotTime, found.slot, DELIVERED)
        this.pending -= found.slot.num
        if (this.nextDueCache === slotTime + this.p) this.nextDueCache = undefined
      }
      if (this.readTime === slotTime) this.readTime += this.p
      walked++
    }
    if (this.stopped) return POLL_MS
    if (more || walked >= WALK_LIMIT) return 0
    return Math.min(POLL_MS, Math.max(0, this.readTime + this.p - deps.clock.now()))
  }

  /** Retention deleted commit-log files: says how many pending timers lost their record (they are not held back). */
  private checkRetention(): void {
    const min = this.deps.commitLogMinOffset()
    if (min <= this.retentionSeen) return
    const lost =
      this.pending > 0 ? pendingInRange(this.wheel as TimerWheel, this.log, this.readTime, DELIVERED, this.retentionSeen, min) : 0
    this.retentionSeen = min
    if (lost === 0) return
    this.retentionDeletedPending += lost
    this.deps.log(
      'warn',
      `retention deleted the records of ${lost} pending timers (commit log now starts at ${min}); they will be skipped when due (keep fileReservedTime above the longest delay)`,
    )
  }

  /** Enqueues the timer topic's new records; returns whether more are waiting. */
  private enqueue(): boolean {
    const { deps } = this
    const queue = deps.queues.find(TIMER_TOPIC, 0)
    if (queue === null) return false
    const min = queue.getMinOffsetInQueue()
    const max = queue.getMaxOffsetInQueue()
    if (this.queueOffset < min) {
      this.lostToRetention += min - this.queueOffset
      deps.log('error', `retention deleted ${min - this.queueOffset} timer records before they were enqueued; skipped`)
      this.queueOffset = min
    }
    if (this.queueOffset > max) this.queueOffset = max
    let at = this.queueOffset
    for (let n = 0; at < max && n < TURN_LIMIT; at++, n++) {
      const unit = readQueueUnit(queue, at)
      if (unit === null) break
      if (unit.offset < deps.commitLogMinOffset()) {
        this.lostToRetention++
        continue
      }
      const record = deps.lookMessage(unit.offset)
      const out = Number(record?.properties[TimerProperty.OUT_MS])
      if (record === null || !Number.isSafeInteger(out)) {
        this.skipped++
        deps.log(
          'error',
          `timer record at commit-log offset ${unit.offset}: ${record === null ? 'unreadable' : 'no valid TIMER_OUT_MS'}; skipped`,
        )
        continue
      }
      const marker = record.properties[TimerProperty.DEL_UNIQKEY] !== undefined
      this.place(out, unit.offset, unit.size, record.properties[PropertyName.REAL_TOPIC] ?? '', marker ? TimerMagic.DELETE : 0)
    }
    this.queueOffset = at
    return at < max
  }

  /** Appends a unit for slot time `out` (rolled when beyond the window) and points its slot at it. */
  private place(out: number, offsetPy: number, sizePy: number, realTopic: string, flags: number): void {
    const wheel = this.wheel as TimerWheel
    let slotTime = Math.max(this.floorTime(out), this.readTime)
    let magic = TimerMagic.DEFAULT | flags
    if (slotTime - this.readTime >= this.rollWindow) {
      slotTime = this.readTime + this.rollWindow - this.p
      magic |= TimerMagic.ROLL
    }
    const found = wheel.getWithFlags(slotTime)
    // A slot delivered before the clock went back starts a new chain.
    const slot = found === null || (found.flags & DELIVERED) !== 0 ? null : found.slot
    const hash = realTopic === '' ? 0 : javaStringHashCode(realTopic)
    const pos = this.log.append(slot?.lastPos ?? -1, magic, slotTime, this.readTime, offsetPy, sizePy, hash)
    const count = (flags & TimerMagic.DELETE) !== 0 ? -1 : 1
    wheel.set(slotTime, { firstPos: slot?.firstPos ?? pos, lastPos: pos, num: (slot?.num ?? 0) + count }, 0)
    this.pending += count
    // An entry can only bring the next due time nearer: no walk of the wheel needed.
    if (this.nextDueCache !== undefined && count > 0 && (this.nextDueCache === null || slotTime + this.p < this.nextDueCache)) {
      this.nextDueCache = slotTime + this.p
    }
  }

  /**
   * Delivers one slot: cancel markers first (their keys), then every other entry in the order it
   * was enqueued; an entry placed early by a roll is placed again. False when a put was refused
   * for now (the slot is resumed after what was done).
   */
  private async deliverSlot(slotTime: number, slot: TimerSlot): Promise<boolean> {
    const { deps } = this
    const units: TimerUnit[] = []
    const end = this.log.end
    for (let pos = slot.lastPos; pos >= 0 && pos < end; ) {
      const unit = this.log.read(pos)
      if (unit === null || unit.slotTime !== slotTime) {
        deps.log('error', `timer log: the chain of the slot for ${new Date(slotTime).toISOString()} breaks at ${pos}; the rest is skipped`)
        break
      }
      units.push(unit)
      if (unit.prevPos >= pos) break
      pos = unit.prevPos
    }
    units.reverse()
    const cancelledKeys = new Set<string>()
    for (const unit of units) {
      if ((unit.magic & TimerMagic.DELETE) === 0 || (unit.magic & TimerMagic.ROLL) !== 0) continue
      const key = deps.lookMessage(unit.offsetPy)?.properties[TimerProperty.DEL_UNIQKEY]
      if (key !== undefined) cancelledKeys.add(key)
    }
    let done = this.resume !== null && this.resume.slotTime === slotTime ? this.resume.done : 0
    this.resume = null
    const batch: Message[] = []
    /** Index in units after each batch message's unit. */
    const ends: number[] = []
    for (let i = done; i <= units.length; i++) {
      if (i < units.length) {
        const message = this.take(units[i], slotTime, cancelledKeys)
        if (message !== null) {
          batch.push(message)
          ends.push(i + 1)
        }
        if (batch.length < DELIVERY_BATCH) continue
      }
      if (batch.length > 0) {
        const results = await (this.put as Put)(batch)
        for (let j = 0; j < results.length; j++) {
          const result = results[j]
          if (result.status === 'PUT_OK') {
            this.delivered++
          } else if (PERMANENT_REFUSALS.has(result.status)) {
            this.skipped++
            deps.log(
              'error',
              `timer entry for ${batch[j].topic}: its real topic refuses it (${result.status}: ${result.reason ?? ''}); skipped`,
            )
          } else {
            this.resume = { slotTime, done: j === 0 ? done : ends[j - 1] }
            if (j > 0) this.writeNote(slotTime, this.resume.done)
            if (!this.refusing)
              deps.log('warn', `timer delivery refused with ${result.status} (${result.reason ?? ''}); retrying every ${RETRY_MS} ms`)
            this.refusing = true
            return false
          }
        }
        batch.length = 0
        ends.length = 0
        this.writeNote(slotTime, Math.min(i + 1, units.length))
      }
      done = i + 1
      if (this.stopped) {
        this.resume = { slotTime, done: Math.min(done, units.length) }
        return false
      }
    }
    if (this.refusing) deps.log('info', 'timer delivery resumed')
    this.refusing = false
    return true
  }

  /** The message to deliver for a unit, or null (a marker, cancelled, rolled on, or skipped). */
  private take(unit: TimerUnit, slotTime: number, cancelledKeys: ReadonlySet<string>): Message | null {
    const { deps } = this
    if (unit.offsetPy < deps.commitLogMinOffset()) {
      this.lostToRetention++
      deps.log('error', `a timer record at commit-log offset ${unit.offsetPy} was deleted by retention before its delivery; skipped`)
      return null
    }
    const record = deps.lookMessage(unit.offsetPy)
    if (record === null) {
      this.skipped++
      deps.log('error', `the timer record at commit-log offset ${unit.offsetPy} is unreadable; skipped`)
      return null
    }
    const properties = record.properties
    const out = Number(properties[TimerProperty.OUT_MS])
    if ((unit.magic & TimerMagic.ROLL) !== 0 && out >= slotTime + this.p) {
      // Not its time yet: on to a later slot (the log gets a new unit, the record stays).
      this.place(out, unit.offsetPy, unit.sizePy, properties[PropertyName.REAL_TOPIC] ?? '', unit.magic & TimerMagic.DELETE)
      return null
    }
    if ((unit.magic & TimerMagic.DELETE) !== 0) return null
    if (cancelledKeys.has(properties[PropertyName.UNIQ_KEY] ?? '')) {
      this.cancelled++
      return null
    }
    const topic = properties[PropertyName.REAL_TOPIC]
    const queueText = properties[PropertyName.REAL_QID]
    const queueId = queueText !== undefined && /^\d{1,10}$/.test(queueText) ? Number(queueText) : -1
    if (topic === undefined || validateTopic(topic) !== null || NEVER_DELIVERED_TO.has(topic) || queueId < 0 || queueId > 0x7fffffff) {
      this.skipped++
      deps.log('error', `the timer record at commit-log offset ${unit.offsetPy} has no valid REAL_TOPIC / REAL_QID; skipped`)
      return null
    }
    return deliveredCopy(record, topic, queueId, unit.writeTime, deps.clock.now())
  }

  // ---- cancel -------------------------------------------------------------------------------

  /**
   * Cancels a pending timer by the msgId its put returned or its UNIQ_KEY: puts a cancel marker
   * into its slot (RocketMQ 5's TIMER_DEL_UNIQKEY). True when it was pending; false when no such
   * timer is known or its slot is already being delivered.
   */
  async cancel(msgId: string): Promise<boolean> {
    const { deps } = this
    const put = this.put
    if (put === null || this.stopped) return false
    deps.catchUp()
    const marker = cancelMarker(deps, msgId, this.readTime)
    if (marker === null) return false
    const [result] = await put([marker])
    if (result.status !== 'PUT_OK') throw new Error(`the cancel marker was refused: ${result.status} ${result.reason ?? ''}`)
    return true
  }

  // ---- progress -----------------------------------------------------------------------------

  private persist(): void {
    if (this.stopped || this.wheel === null) return
    this.snapshots.push({ readTime: this.readTime, logEnd: this.deps.commitLogMaxOffset() })
    const flushed = this.deps.commitLogFlushedOffset()
    let ready = -1
    for (let i = 0; i < this.snapshots.length; i++) if (this.snapshots[i].logEnd <= flushed) ready = i
    if (ready < 0) {
      if (this.snapshots.length > 4) this.snapshots.splice(1, 1)
      return
    }
    const snapshot = this.snapshots[ready]
    this.snapshots = this.snapshots.slice(ready + 1)
    try {
      this.save(snapshot.readTime)
      const files = this.log.queue.mappedFiles.length
      // After a save (what a reopen needs moved on): when the log got a file, else every 10 saves.
      if (files > 1 && (files !== this.trimmed.files || ++this.trimmed.saves >= 10)) this.trimLog()
    } catch (error) {
      this.deps.log('error', `cannot save the timer's progress: ${(error as Error).message}`)
    }
  }

  /**
   * Deletes the timer-log files before the oldest one still needed (an entry of a slot not read
   * yet, or where an open's recovery scan starts); returns how many went. Never the last file.
   */
  trimLog(): number {
    const files = this.log.queue.mappedFiles
    this.trimmed = { files: files.length, saves: 0 }
    if (this.wheel === null || files.length < 2) return 0
    const needed = neededLogPosition(this.wheel, Math.min(this.readTime, this.saved.readTime), this.saved.flushPos)
    let count = 0
    while (count < files.length - 1 && files[count].fileFromOffset + this.log.fileSize <= needed) count++
    if (count === 0) return 0
    const before = files.length
    // Nothing reads these files any more; without a pause between files the deletion is done on return.
    void this.log.queue.deleteExpiredFileByTime(0, 0, 0, true, { maxFiles: count })
    const deleted = before - this.log.queue.mappedFiles.length
    this.logFilesDeleted += deleted
    this.deps.log('info', `deleted ${deleted} timer-log files: every entry in them is delivered or cancelled`)
    return deleted
  }

  /** After a batch of slot `slotTime`: its first `done` units and the slots before it are delivered. */
  private writeNote(slotTime: number, done: number): void {
    this.note({ logEnd: this.deps.commitLogMaxOffset(), timerLogEnd: this.log.end, readTime: slotTime, done })
  }

  /** At start, after recovery: a note the recovered logs cover and not older than the checkpoint resumes where it says. */
  private applyNote(): void {
    const note = this.wheel === null ? null : readProgressNote(this.notePath, ['timerLogEnd', 'readTime', 'done'])
    if (note === null || (note.readTime as number) < this.readTime) return
    if (note.logEnd > this.deps.commitLogMaxOffset() || (note.timerLogEnd as number) > this.log.end) {
      this.deps.log('info', `config/${TIMER_PROGRESS_FILE} counts deliveries the logs lost; config/${TIMER_CHECKPOINT_FILE} decides`)
      return
    }
    this.readTime = note.readTime as number
    this.resume = { slotTime: this.readTime, done: note.done as number }
    this.resetFlagsAndCount()
  }

  /** The clock went back: reading resumes at `readTime`, and the progress on disk says so before any new entry lands. */
  private rewind(readTime: number): void {
    this.readTime = readTime
    this.snapshots = []
    this.writeNote(readTime, 0)
    try {
      this.save(readTime)
    } catch (error) {
      this.deps.log('error', `cannot save the timer's progress: ${(error as Error).message}`)
    }
  }

  /** Log, then wheel, then the checkpoint naming them. */
  private save(readTime: number): void {
    const flushPos = this.log.flush()
    ;(this.wheel as TimerWheel).flush()
    saveTimerCheckpoint(
      this.checkpointPath,
      { lastReadTimeMs: readTime, lastTimerLogFlushPos: flushPos, lastTimerQueueOffset: this.queueOffset },
      ++this.version,
    )
    this.saved = { readTime, flushPos }
  }

  async stop(): Promise<void> {
    this.stopped = true
    if (this.wake !== null) clearTimeout(this.wake)
    if (this.flushTimer !== null) clearInterval(this.flushTimer)
    this.wake = null
    this.flushTimer = null
    await this.running
  }

  /** After the commit log's flush at close: saves the progress its deliveries allow and closes the files. */
  saveAtClose(onError: (error: Error) => void): void {
    if (this.wheel === null) return
    try {
      const flushed = this.deps.commitLogFlushedOffset()
      let readTime: number | null = this.readTime
      if (flushed < this.deps.commitLogMaxOffset()) readTime = this.snapshots.filter((s) => s.logEnd <= flushed).pop()?.readTime ?? null
      if (readTime !== null) this.save(readTime)
    } catch (error) {
      onError(error instanceof Error ? error : new Error(String(error)))
    }
    this.log.shutdown()
    this.wheel.shutdown()
    this.wheel = null
  }

  // ---- stats --------------------------------------------------------------------------------

  stats(): TimerStats {
    const now = this.deps.clock.now()
    const next = this.nextDue()
    return {
      pending: this.pending,
      nextDueTime: next,
      delivered: this.delivered,
      cancelled: this.cancelled,
      skipped: this.skipped,
      lostToRetention: this.lostToRetention,
      retentionDeletedPending: this.retentionDeletedPending,
      logFilesDeleted: this.logFilesDeleted,
      lagMs: next !== null && next < now ? now - next : 0,
      readTimeMs: this.readTime,
      precisionMs: this.p,
    }
  }

  /** When the earliest undelivered slot is due: a walk of the wheel, remembered until it changes. */
  private nextDue(): number | null {
    if (this.wheel === null || this.pending <= 0) return null
    if (this.nextDueCache !== undefined) return this.nextDueCache
    let earliest: number | null = null
    this.wheel.forEach((slotTime, slot, flags) => {
      if (slotTime < this.readTime || (flags & DELIVERED) !== 0 || slot.num <= 0) return
      if (earliest === null || slotTime < earliest) earliest = slotTime
    })
    this.nextDueCache = earliest === null ? null : earliest + this.p
    return this.nextDueCache
  }
}
