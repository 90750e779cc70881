// A seeded, model-based simulator of a store's life: puts (single and batch, keys, tags,
// properties), reads with tag filters, consumer offsets, file rolls, clock advances (which run the
// flush services), retention passes (simulator-retention.ts), keyed puts, tombstones and
// compaction passes on a compacted topic (simulator-compaction.ts), clean reopens, process
// crashes, power cuts (at a random storage event: during puts, flushes, cleanup and compaction
// passes, recovery, close, and twice in a row) and damage. After every step that reopens
// the store, what it serves is checked against a model of what must hold:
//
// - durable prefix: every put acknowledged under SYNC_FLUSH (under ASYNC_FLUSH: every put that
//   ended at or below the commit log's flushed offset when the power went), and everything a
//   previous open served, is readable at its commit-log offset, in its queue at its queue offset
//   and by its key;
// - may-be-lost window: anything else may be missing, but what is served is a message that was
//   put, byte for byte (body, topic, queue, tags, keys, properties), and served once;
// - every queue is gap-free with increasing commit-log offsets, every index hit is the record of
//   that key, committed consumer offsets are values the group committed, and `mqstore verify`
//   finds the closed store clean.
// After damage (bytes flipped in the image) only the second half holds: a repair may drop
// records, never change one or serve one twice. A process crash keeps the page cache but not
// durability (power-loss.ts crashNow): the next disk starts from what was durable before it, so a
// later cut may still lose what the crashed process never synced, and the model requires after
// a crash what it requires after a cut (what the reopened store serves becomes durable only
// because recovery syncs it before open returns).
//
// Everything random comes from the seed; time is the caller's fake clock (advance()), and cuts
// are chosen by storage event, never by wall-clock timing, so a failing schedule replays exactly.
import * as fs from 'node:fs'
import { join } from 'node:path'

import { verifyStore as verifyStoreDir } from '../../lib/cli/verify/index.js'
import { MessageStore, type Message, type MessageExt, type OpenOptions } from '../../lib/index.js'
import { PowerLossDisk, prng, type CrashCarry, type PowerCut } from './power-loss.js'
import { CompactionModel, SIM_ID } from './simulator-compaction.js'
import { type ModelMessage, type SimHost, simulationStoreOptions } from './simulator-model.js'
import { newPlainMessage, QUEUES, readQueue, TOPICS, walkQueues } from './simulator-queues.js'
import { RetentionModel } from './simulator-retention.js'

export { type ModelMessage, type SimHost, simulationStoreOptions } from './simulator-model.js'

export type FlushMode = 'SYNC_FLUSH' | 'ASYNC_FLUSH'

export interface SimulationOptions {
  seed: number
  flushMode: FlushMode
  /** Steps to run (each is one operation or one failure). */
  steps: number
  /** A scratch directory of the caller's (removed by the caller). */
  dir: string
  /** Advances the fake clock, running the timers that fall due (vi.advanceTimersByTimeAsync). */
  advance: (ms: number) => Promise<unknown>
  /** Moves the fake clock without running timers (vi.setSystemTime); retention steps need it. */
  jump?: (ms: number) => void
  /** Relative weights of the failure steps (default: power cuts dominate). */
  failures?: { powerCut?: number; crash?: number; cleanReopen?: number; damage?: number; cutInClose?: number }
  /** Make the store's data syncs no-ops (to show the oracle catches a store that does not sync). */
  disableDataSyncs?: boolean
  /** Keep a copy of every cut image as the cut left it (`<image>-as-cut`), for replays. */
  keepImages?: boolean
}

export interface SimulationReport {
  seed: number
  flushMode: FlushMode
  steps: number
  puts: number
  acked: number
  reads: number
  powerCuts: number
  cutsDuringRecovery: number
  cutsDuringClose: number
  crashes: number
  cleanReopens: number
  damages: number
  /** Cleanup passes run as steps, power cuts inside them, commit-log files they deleted. */
  retentionPasses: number
  cutsDuringRetention: number
  filesDeletedByRetention: number
  /** Compaction passes run as steps, power cuts inside them, records they dropped. */
  compactionPasses: number
  cutsDuringCompaction: number
  recordsCompactedAway: number
  /** Messages the model required after a cut that the reopened store still had. */
  requiredChecked: number
  /** Messages lost in the may-be-lost window (allowed). */
  lostUnflushed: number
  failures: string[]
  /** Failures of a KNOWN_OPEN kind (found, not fixed yet). */
  knownOpen: string[]
  log: string[]
}

const GROUPS = ['g1', 'g2']

class Failure extends Error {}

/**
 * Failures these schedules find that are not fixed yet. They end the schedule and are counted in
 * `knownOpen` instead of `failures`; POWERCUT_STRICT=1 makes them failures again.
 */
export const KNOWN_OPEN: readonly { name: string; pattern: RegExp; afterDamageOnly?: boolean }[] = [
  // Damage the record checks cannot see: RocketMQ's CRC covers the body only, so a flip in a
  // record's properties (keys, tags) that leaves them well-formed (UTF-8, every pair with its
  // 0x01) is served; only a format change could catch it.
  {
    name: 'damage outside the body CRC served',
    pattern: /^served (a message that was never put|k-\d+-\d+ changed)/,
    afterDamageOnly: true,
  },
  // The same for a compaction-log copy's commit-log position (no CRC covers it): reads serve a
  // copy only when the position is one the log has had and, while the consume queue still holds
  // the unit, the unit's; a flip that lands on another such position after retention dropped the
  // unit is not seen.
  {
    name: "damage to a compaction-log copy's commit-log position served",
    pattern: /^served k-\d+-\d+ at \d+\/\d+, put at \d+\/\d+/,
    afterDamageOnly: true,
  },
]

export async function simulate(options: SimulationOptions): Promise<SimulationReport> {
  const sim = new Simulation(options)
  try {
    await sim.run()
  } catch (error) {
    if (!(error instanceof Failure)) sim.report.failures.push(`threw: ${(error as Error)?.stack ?? String(error)}`)
  } finally {
    await sim.dispose()
  }
  return sim.report
}

class Simulation implements SimHost {
  readonly report: SimulationReport
  private readonly o: SimulationOptions
  readonly random: () => number
  private readonly storeOptions: OpenOptions
  store: MessageStore | null = null
  disk: PowerLossDisk | null = null
  storeDir: string
  private generation = 0
  private nextMessage = 0
  readonly messages = new Map<string, ModelMessage>()
  /** Messages retention deleted (kept to recognise one a cut brought back with its file). */
  private readonly retired = new Map<string, ModelMessage>()
  readonly topics = TOPICS
  readonly queues = QUEUES
  private readonly retention: RetentionModel
  private readonly compaction = new CompactionModel()
  /** Offsets each group may find committed per queue after a failure. */
  private readonly offsets = new Map<string, Set<number>>()
  private flushedAtCut = -1
  /** Damage leaves residue a repair need not clean (bytes past a queue's end): verify is skipped. */
  damaged = false
  /** The consumer offsets file was damaged since the last reopen: any value may come back. */
  private offsetsDamaged = false
  /** The image the last process crash left, and the durable state behind it (power-loss.ts). */
  private crashCarry: { dir: string; carry: CrashCarry } | null = null

  constructor(options: SimulationOptions) {
    this.o = options
    this.random = prng(options.seed)
    this.storeOptions = simulationStoreOptions(options.flushMode)
    this.retention = new RetentionModel(this.storeOptions.mappedFileSizeCommitLog!)
    this.storeDir = join(options.dir, 'store-0')
    this.report = {
      seed: options.seed,
      flushMode: options.flushMode,
      steps: 0,
      puts: 0,
      acked: 0,
      reads: 0,
      powerCuts: 0,
      cutsDuringRecovery: 0,
      cutsDuringClose: 0,
      crashes: 0,
      cleanReopens: 0,
      damages: 0,
      retentionPasses: 0,
      cutsDuringRetention: 0,
      filesDeletedByRetention: 0,
      compactionPasses: 0,
      cutsDuringCompaction: 0,
      recordsCompactedAway: 0,
      requiredChecked: 0,
      lostUnflushed: 0,
      failures: [],
      knownOpen: [],
      log: [],
    }
  }

  int(n: number): number {
    return Math.floor(this.random() * n)
  }

  log(line: string): void {
    this.report.log.push(`[${this.report.steps}] ${line}`)
    if (process.env.POWERCUT_TRACE) process.stderr.write(`[${this.report.steps}] ${line}\n`)
    if (this.report.log.length > 2000) this.report.log.shift()
  }

  private fail(what: string): never {
    const known = KNOWN_OPEN.find((k) => k.pattern.test(what) && (k.afterDamageOnly !== true || this.damaged))
    if (known !== undefined && process.env.POWERCUT_STRICT === undefined) {
      // Found by these schedules, not fixed yet (see KNOWN_OPEN): counted, and the schedule stops.
      this.report.knownOpen.push(`${known.name} at step ${this.report.steps}: ${what.slice(0, 300)}`)
      throw new Failure(what)
    }
    this.report.failures.push(`step ${this.report.steps}: ${what}`)
    throw new Failure(what)
  }

  check(ok: boolean, what: () => string): void {
    if (!ok) this.fail(what())
  }

  // ---- the store and its disk -------------------------------------------------------------------

  private arm(cutAtEvent: number | null = null): PowerLossDisk {
    this.disk?.disarm()
    // The first disk on a crash image starts from what was durable before the crash.
    const after = this.crashCarry?.dir === this.storeDir ? this.crashCarry.carry : undefined
    this.crashCarry = null
    this.disk = new PowerLossDisk({
      after,
      root: this.storeDir,
      seed: (this.o.seed ^ Math.imul(++this.generation, 0x9e3779b1)) >>> 0,
      cutAtEvent,
      imageRoot: join(this.o.dir, `images-${this.generation}`),
      disableDataSyncs: this.o.disableDataSyncs,
      onCut: () => {
        // What the store claimed durable when the power went.
        this.flushedAtCut = this.store === null ? -1 : this.store.stats().commitLogFlushedOffset
      },
    }).arm()
    return this.disk
  }

  async dispose(): Promise<void> {
    const store = this.store
    this.store = null
    if (store !== null) await store.close().catch(() => {})
    this.disk?.disarm()
    this.disk = null
  }

  async run(): Promise<void> {
    fs.mkdirSync(this.storeDir, { recursive: true })
    this.arm()
    this.store = await MessageStore.open(this.storeDir, this.storeOptions)
    const weights = { powerCut: 4, crash: 2, cleanReopen: 1, damage: 1, cutInClose: 1, ...this.o.failures }
    const failureTotal = weights.powerCut + weights.crash + weights.cleanReopen + weights.damage + weights.cutInClose
    while (this.report.steps < this.o.steps) {
      this.report.steps++
      const r = this.int(100)
      if (process.env.POWERCUT_TRACE) this.log(`step ${r} events ${this.disk?.events}`)
      if (r < 34) await this.putSingle()
      else if (r < 48) await this.putBatch()
      else if (r < 57) await this.putKeyed()
      else if (r < 65) this.read()
      else if (r < 70) this.commitOffset()
      else if (r < 80) await this.advance()
      else if (r < 84 && this.o.jump !== undefined) await this.retention.step(this)
      else if (r < 88) await this.compaction.step(this)
      else {
        let pick = this.random() * failureTotal
        if ((pick -= weights.powerCut) < 0) await this.powerCut()
        else if ((pick -= weights.crash) < 0) await this.crash()
        else if ((pick -= weights.cleanReopen) < 0) await this.cleanReopen()
        else if ((pick -= weights.damage) < 0) await this.damage()
        else await this.cutInClose()
      }
    }
    // A last power cut, so that every schedule ends with one checked reopen.
    await this.powerCut()
    await this.closeAndVerify()
  }

  // ---- operations ---------------------------------------------------------------------------------

  private newMessage(): ModelMessage {
    return newPlainMessage(this, `k-${this.o.seed}-${this.nextMessage++}`)
  }

  private toMessage(m: ModelMessage): Message {
    return { topic: m.topic, queueId: m.queueId, body: m.body, tags: m.tags, keys: m.keys, properties: m.properties }
  }

  private accept(m: ModelMessage, result: { status: string; wroteOffset: number; wroteBytes: number; queueOffset: number }): void {
    if (result.wroteOffset < 0) return // refused: nothing was written
    m.wroteOffset = result.wroteOffset
    m.wroteBytes = result.wroteBytes
    m.queueOffset = result.queueOffset
    if (m.compacted === true) this.compaction.accepted(this, m)
    this.messages.set(m.key, m)
    this.retention.noteWrite(m.wroteOffset, Date.now())
    // A put that resolves after the power went is not an acknowledgement the cut must honour.
    if (result.status === 'PUT_OK' && this.disk?.cut === null) {
      m.acked = true
      this.report.acked++
    }
  }

  private async putSingle(): Promise<void> {
    const store = this.store!
    const m = this.newMessage()
    this.report.puts++
    const result = await store.putMessage(this.toMessage(m))
    this.accept(m, result)
    await this.afterOperation()
  }

  /** Keyed updates and tombstones of the compacted topic, one by one or as a batch. */
  private async putKeyed(): Promise<void> {
    const store = this.store!
    const batch = Array.from({ length: 1 + this.int(10) }, () => this.compaction.newMessage(this, `k-${this.o.seed}-${this.nextMessage++}`))
    this.report.puts += batch.length
    if (this.int(2) === 0) {
      const results = await store.putMessages(batch.map((m) => this.toMessage(m)))
      batch.forEach((m, i) => this.accept(m, results[i]))
    } else {
      for (const m of batch) {
        this.accept(m, await store.putMessage(this.toMessage(m)))
        if (this.disk?.cut != null) break
      }
    }
    await this.afterOperation()
  }

  private async putBatch(): Promise<void> {
    const store = this.store!
    const batch = Array.from({ length: 1 + this.int(12) }, () => this.newMessage())
    this.report.puts += batch.length
    const results = await store.putMessages(batch.map((m) => this.toMessage(m)))
    batch.forEach((m, i) => this.accept(m, results[i]))
    await this.afterOperation()
  }

  private read(): void {
    this.report.reads++
    if (this.int(4) === 0) this.compaction.read(this)
    else readQueue(this)
  }

  private commitOffset(): void {
    const store = this.store!
    const group = GROUPS[this.int(GROUPS.length)]
    const topic = TOPICS[this.int(TOPICS.length)]
    const queueId = this.int(QUEUES)
    const offset = this.int(store.getMaxOffsetInQueue(topic, queueId) + 1)
    store.commitOffset(group, topic, queueId, offset)
    const k = `${group}/${topic}/${queueId}`
    const possible = this.offsets.get(k) ?? new Set([-1])
    possible.add(offset)
    this.offsets.set(k, possible)
  }

  advanceClock(ms: number): Promise<unknown> {
    return this.o.advance(ms)
  }

  jumpClock(ms: number): void {
    this.o.jump!(ms)
  }

  retire(m: ModelMessage): void {
    this.messages.delete(m.key)
    this.retired.set(m.key, m)
  }

  private async advance(): Promise<void> {
    await this.o.advance(50 + this.int(2000))
    await this.afterOperation()
  }

  /** Power went during the last operation: the store is abandoned and the image reopened. */
  async afterOperation(): Promise<void> {
    if (this.disk?.cut != null) await this.recoverFromCut(this.disk.cut, false)
  }

  // ---- failures ---------------------------------------------------------------------------------

  /** Arms a cut at one of the next storage events; steps run on until it happens. */
  private async powerCut(): Promise<void> {
    const disk = this.disk!
    const within = 1 + this.int(80)
    disk.options.cutAtEvent = disk.events + within
    this.log(`power cut armed within ${within} events`)
    for (let i = 0; i < 40 && disk.cut === null; i++) {
      const r = this.int(10)
      if (r < 5) await this.putSingle()
      else if (r < 8) await this.putBatch()
      else await this.advance()
      if (disk.cut !== null) return // recoverFromCut ran
    }
    if (disk.cut === null) {
      const cut = disk.cutNow('between puts')
      await this.recoverFromCut(cut, false)
    }
  }

  /**
   * SIGKILL: the image holds the page cache, but what was durable stays as it was until something
   * syncs it (a later cut may still lose the rest); sometimes the kernel wrote some of it back.
   */
  private async crash(): Promise<void> {
    this.report.crashes++
    const writeback = this.int(2) === 0 ? 0 : this.random()
    const cut = this.disk!.crashNow('process crash', writeback)
    this.log(`process crash (page cache kept, ${cut.newPages} unsynced pages, writeback ${writeback.toFixed(2)})`)
    this.crashCarry = { dir: cut.dir, carry: cut.carry! }
    await this.recoverFromCut(cut, false, true)
  }

  private async damage(): Promise<void> {
    this.report.damages++
    const cut = this.disk!.cutNow('power cut, then damage')
    await this.recoverFromCut(cut, true)
  }

  private async cutInClose(): Promise<void> {
    const disk = this.disk!
    disk.options.cutAtEvent = disk.events + 1 + this.int(40)
    const store = this.store!
    this.store = null
    await store.close()
    if (disk.cut === null) {
      // The close finished first: it was a clean close.
      this.markAllDurable()
      this.closedCleanly()
      this.report.cleanReopens++
      await this.reopen()
      return
    }
    this.report.cutsDuringClose++
    this.log(`power cut during close at event ${disk.cut.event} (${disk.cut.at})`)
    await this.recoverFromCut(disk.cut, false)
  }

  private async cleanReopen(): Promise<void> {
    this.report.cleanReopens++
    this.log('clean close and reopen')
    const store = this.store!
    this.store = null
    await store.close()
    this.markAllDurable()
    this.closedCleanly()
    this.disk?.disarm()
    this.disk = null
    await this.verifyClosed()
    await this.reopen()
  }

  private closedCleanly(): void {
    // A clean close persists the last committed offset of every queue.
    for (const [k, possible] of this.offsets) {
      const last = [...possible].at(-1)!
      this.offsets.set(k, new Set([last]))
    }
  }

  private markAllDurable(): void {
    for (const m of this.messages.values()) if (m.present) m.durable = true
  }

  /**
   * The store on the cut image: the old store is closed (it writes to the old directory, which is
   * no longer the disk), then the image is opened, maybe with another cut during its recovery.
   */
  private async recoverFromCut(cut: PowerCut, damage: boolean, crash = false): Promise<void> {
    if (!crash) this.report.powerCuts++
    this.log(
      `cut at event ${cut.event} (${cut.at}): ${cut.oldPages} old / ${cut.newPages} new pages, ${cut.unsyncedNames} unsynced names; flushed offset then ${this.flushedAtCut}`,
    )
    // A crash is no cut, but it leaves the same durable state behind the page cache: what the
    // recovery serves becomes durable only once it is synced (by the recovery, before open returns).
    const flushedAtCut = this.flushedAtCut
    for (const m of this.messages.values()) {
      const flushed = this.o.flushMode === 'SYNC_FLUSH' || m.wroteOffset + m.wroteBytes <= flushedAtCut
      if (m.acked && flushed) m.durable = true
      m.acked = false
    }
    const old = this.store
    this.store = null
    if (old !== null) await old.close().catch(() => {})
    this.disk?.disarm()
    this.disk = null
    this.storeDir = cut.dir
    if (damage) this.damageImage()
    if (this.o.keepImages === true) fs.cpSync(cut.dir, `${cut.dir}-as-cut`, { recursive: true })

    // Sometimes the power goes again while the image recovers (and then maybe once more).
    for (let again = 0; again < 2 && this.int(3) === 0; again++) {
      const disk = this.arm(1 + this.int(30))
      let store: MessageStore | null = null
      try {
        store = await MessageStore.open(this.storeDir, this.storeOptions)
      } catch (error) {
        if (disk.cut === null) {
          // A damaged image may be refused with a typed error: reopen() below handles that.
          if (damage && (error as { code?: unknown }).code !== undefined) {
            disk.disarm()
            this.disk = null
            break
          }
          this.fail(`open after a cut failed: ${(error as Error).message}`)
        }
      }
      if (disk.cut === null) disk.cutNow('right after recovery')
      this.report.cutsDuringRecovery++
      this.log(`power cut during recovery at event ${disk.cut!.event} (${disk.cut!.at})`)
      this.flushedAtCut = -1
      if (store !== null) await store.close().catch(() => {})
      disk.disarm()
      this.disk = null
      this.storeDir = disk.cut!.dir
    }
    await this.reopen(damage)
  }

  /** Flips bytes of one file of the image. */
  private damageImage(): void {
    const files: string[] = []
    const walk = (dir: string): void => {
      for (const name of fs.readdirSync(dir)) {
        const path = join(dir, name)
        if (fs.statSync(path).isDirectory()) walk(path)
        else if (name !== 'lock' && name !== 'arrivals' && fs.statSync(path).size > 0) files.push(path)
      }
    }
    walk(this.storeDir)
    if (files.length === 0) return
    const file = files[this.int(files.length)]
    const data = fs.readFileSync(file)
    const flips = 1 + this.int(4)
    for (let i = 0; i < flips; i++) {
      const at = this.int(Math.min(data.length, 8192))
      data[at] ^= 1 + this.int(255)
    }
    fs.writeFileSync(file, data)
    this.log(`damaged ${file.slice(this.storeDir.length)} (${flips} bytes)`)
    this.damaged = true
    // Damaged offsets fall back to the .bak copy (an older table) or read as other numbers.
    if (file.includes('consumerOffset')) this.offsetsDamaged = true
    // Damage may drop anything: nothing is required any more, what is served must still be intact.
    for (const m of this.messages.values()) m.durable = false
    for (const possible of this.offsets.values()) possible.add(-1)
  }

  private async reopen(afterDamage = false): Promise<void> {
    this.arm()
    try {
      this.store = await MessageStore.open(this.storeDir, { ...this.storeOptions, corruptionPolicy: 'tolerant' })
    } catch (error) {
      if (afterDamage) {
        // A typed refusal is an allowed answer to damage; start over on a fresh directory.
        this.check(
          (error as { code?: unknown }).code !== undefined,
          () => `open after damage threw an untyped error: ${(error as Error).stack}`,
        )
        this.log(`damaged store refused: ${(error as { code?: string }).code}`)
        this.disk?.disarm()
        this.storeDir = join(this.o.dir, `fresh-${this.generation}`)
        fs.mkdirSync(this.storeDir, { recursive: true })
        this.messages.clear()
        this.retired.clear()
        this.retention.reset()
        this.offsets.clear()
        this.arm()
        this.store = await MessageStore.open(this.storeDir, this.storeOptions)
        return
      }
      this.fail(`reopen failed: ${(error as Error).stack}`)
    }
    this.checkStore()
  }

  // ---- the oracle ---------------------------------------------------------------------------------

  /** The model message a served message is, byte for byte; fails otherwise. */
  matchServed(found: MessageExt): ModelMessage {
    const key = found.properties[SIM_ID] ?? found.keys[0]
    let m = key === undefined ? undefined : this.messages.get(key)
    const back = key === undefined ? undefined : this.retired.get(key)
    if (m === undefined && back !== undefined) {
      // Retention deleted its file and a cut brought the file back: the same bytes may be served.
      this.retired.delete(back.key)
      this.messages.set(back.key, back)
      m = back
    }
    if (m === undefined)
      return this.fail(`served a message that was never put: keys ${JSON.stringify(found.keys)} at ${found.commitLogOffset}`)
    const same =
      m.topic === found.topic &&
      m.queueId === found.queueId &&
      m.tags === found.tags &&
      JSON.stringify(m.keys) === JSON.stringify(found.keys) &&
      Buffer.from(found.body).equals(m.body) &&
      Object.entries(m.properties).every(([k, v]) => found.properties[k] === v)
    this.check(
      same,
      () =>
        `served ${m.key} changed: ${found.topic}/${found.queueId} tags ${found.tags} keys ${found.keys} body ${found.body.length} bytes (put: ${m.topic}/${m.queueId} ${m.tags} ${m.keys} ${m.body.length} bytes)`,
    )
    this.check(
      found.commitLogOffset === m.wroteOffset && found.queueOffset === m.queueOffset,
      () => `served ${m.key} at ${found.commitLogOffset}/${found.queueOffset}, put at ${m.wroteOffset}/${m.queueOffset}`,
    )
    return m
  }

  /** Walks every queue of the reopened store, then resets the model to what it serves. */
  private checkStore(): void {
    const store = this.store!
    const stats = store.stats()
    this.log(`opened: lastExitOK ${stats.lastExitOK}, recovery ${JSON.stringify(stats.recovery)}, repairs ${JSON.stringify(stats.repairs)}`)
    // Retention moves the queues' minimums (checked against the model in checkBelowMin below).
    const minPhy = store.getMinPhyOffset()
    const served = walkQueues(this, minPhy)
    let lost = 0
    for (const m of [...this.messages.values()]) {
      if (served.has(m.key)) {
        if (m.durable) this.report.requiredChecked++
        m.durable = true // on the disk the reopened store started from
        m.present = true
        continue
      }
      // The compacted topic's messages are the compaction model's; below the commit log's minimum
      // retention took them (checkBelowMin checks that the policy allowed it).
      if (m.compacted === true || (m.wroteOffset < minPhy && m.wroteOffset < this.retention.mayBeGoneBelow)) continue
      // Damage stays (a damaged unit can hide later records of its queue): after it, drops are allowed.
      this.check(
        !m.durable || this.damaged,
        () =>
          `${m.key} (${m.topic}/${m.queueId} queue offset ${m.queueOffset}, commit-log ${m.wroteOffset}+${m.wroteBytes}) was durable and is lost`,
      )
      // After damage a record may be hidden (a damaged unit) and found again by a later rebuild,
      // at the same offsets: it stays in the model, no longer required.
      if (!this.damaged) this.messages.delete(m.key)
      m.present = false
      lost++
    }
    this.report.lostUnflushed += lost
    for (const [k, possible] of this.offsets) {
      const [group, topic, queueId] = k.split('/')
      const value = store.queryOffset(group, topic, Number(queueId))
      this.check(
        this.offsetsDamaged || possible.has(value),
        () => `consumer offset ${k} is ${value}, never committed (committed: ${[...possible]})`,
      )
      this.offsets.set(k, new Set([value]))
    }
    this.offsetsDamaged = false
    this.retention.checkBelowMin(this)
    this.compaction.check(this, true)
    this.log(
      `reopened: ${served.size} messages served, ${lost} lost in the may-be-lost window; repairs ${JSON.stringify(store.stats().repairs.map((r) => r.action))}`,
    )
  }

  private async closeAndVerify(): Promise<void> {
    const store = this.store!
    this.store = null
    await store.close()
    this.disk?.disarm()
    this.disk = null
    await this.verifyClosed()
  }

  /** `mqstore verify` on the closed store: clean unless the schedule damaged files. */
  private async verifyClosed(): Promise<void> {
    if (this.damaged) return
    // verify pauses on timers of its own: run the fake clock until it answers.
    let settled = false
    const pending = verifyStoreDir(this.storeDir, {
      maxHashSlotNum: this.storeOptions.maxHashSlotNum,
      maxIndexNum: this.storeOptions.maxIndexNum,
    }).finally(() => {
      settled = true
    })
    while (!settled) await this.o.advance(100)
    const report = await pending
    this.check(
      report.ok,
      () =>
        `mqstore verify: ${JSON.stringify([...report.commitLog.problems, ...report.consumeQueues.problems, ...report.index.problems, ...report.checkpoint.problems].slice(0, 5))}`,
    )
  }
}
