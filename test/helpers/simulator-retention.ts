// Retention as a step of the simulator (test/helpers/simulator.ts): the clock jumps, a cleanup pass
// runs (sometimes with a power cut armed inside it), and the model learns which records may now be
// gone, from the store's own pure policy (planCommitLogCleanup) applied to the model's view of the
// commit-log files.
//
// File ages: the policy judges a commit-log file by its modification time, which the file system
// sets from the real clock while the store runs on the simulator's fake one. So before a pass the
// step sets every commit-log file's modification time to the simulated time of its last write (the
// model knows it from the puts); files the model has no time for are stamped "now" (young). After
// its pass the step stamps the files left "now", and files written later keep real (future) times,
// so until the next step no file is old enough to go: the manual passes still pending and passes at
// the deleteWhen hour delete nothing the step's bound did not allow.
import * as fs from 'node:fs'
import { join } from 'node:path'

import {
  planCommitLogCleanup,
  type CommitLogFileInfo,
  type CommitLogPlan,
  type CommitLogPolicyConfig,
} from '../../lib/store/cleanup/commit-log-policy.js'
import { judgeDisk } from '../../lib/store/cleanup/disk-policy.js'
import type { MessageStore } from '../../lib/index.js'
import type { SimHost } from './simulator-model.js'

const HOUR_MS = 3_600_000

/** The retention settings the simulated store runs with (its options take them from here). */
export const SIM_RETENTION = {
  fileReservedTime: 1,
  deleteWhen: '04',
  cleanResourceInterval: 10_000,
  deleteCommitLogFilesInterval: 0,
  deleteConsumeQueueFilesInterval: 0,
  cleanFileForciblyEnable: true,
  destroyMapedFileIntervalForcibly: 120_000,
  redeleteHangedFileInterval: 120_000,
} as const

const POLICY: CommitLogPolicyConfig = {
  fileReservedTime: SIM_RETENTION.fileReservedTime,
  deleteWhen: SIM_RETENTION.deleteWhen,
  cleanFileForciblyEnable: SIM_RETENTION.cleanFileForciblyEnable,
  destroyMapedFileIntervalForcibly: SIM_RETENTION.destroyMapedFileIntervalForcibly,
  redeleteHangedFileInterval: SIM_RETENTION.redeleteHangedFileInterval,
}

/** The simulated disk is never under pressure (its usage is a constant 50 %). */
const QUIET_DISK = judgeDisk([{ role: 'commitLog', path: '', usedRatio: 0.5, totalBytes: 2 ** 40, availableBytes: 2 ** 39 }], 75)

const NAME = /^\d{20}$/

export class RetentionModel {
  /** Simulated time (ms, whole seconds) of the last write into each commit-log file, by start offset. */
  private readonly lastWriteMs = new Map<number, number>()
  /**
   * Commit-log offset below which records may be gone: the end of the files the policy would
   * delete given the ages the last steps stamped. Only grows (a fresh store resets it).
   */
  mayBeGoneBelow = 0
  /** Storage events the last direct pass that deleted files made (where an armed cut is placed). */
  private deletingPassEvents = 60

  constructor(private readonly fileSize: number) {}

  reset(): void {
    this.lastWriteMs.clear()
    this.mayBeGoneBelow = 0
  }

  /** A put landed at `offset` at simulated time `nowMs`; the file it rolled from got its end marker then. */
  noteWrite(offset: number, nowMs: number): void {
    const start = offset - (offset % this.fileSize)
    const t = Math.floor(nowMs / 1000) * 1000
    if (!this.lastWriteMs.has(start) && start >= this.fileSize) this.lastWriteMs.set(start - this.fileSize, t)
    this.lastWriteMs.set(start, t)
  }

  /** The commit-log files as the policy sees them, with the model's ages written to the files. */
  private stamp(storeDir: string, nowMs: number, young = false): CommitLogFileInfo[] {
    const dir = join(storeDir, 'commitlog')
    if (!fs.existsSync(dir)) return []
    const names = fs
      .readdirSync(dir)
      .filter((n) => NAME.test(n))
      .sort()
    return names.map((name) => {
      const path = join(dir, name)
      const startOffset = Number(name)
      const t = (young ? undefined : this.lastWriteMs.get(startOffset)) ?? Math.floor(nowMs / 1000) * 1000
      fs.utimesSync(path, t / 1000, t / 1000)
      return {
        name,
        startOffset,
        sizeBytes: fs.statSync(path).size,
        lastModifiedMs: t,
        holders: 0,
        available: true,
        shutdownAtMs: 0,
      }
    })
  }

  private plan(files: CommitLogFileInfo[], nowMs: number, store: MessageStore): CommitLogPlan {
    return planCommitLogCleanup(
      {
        nowMs,
        localHour: new Date(nowMs).getHours(),
        files,
        disk: QUIET_DISK,
        manualPassesLeft: 1,
        lastHangedRetryMs: 0,
        dispatchedOffset: store.getMaxPhyOffset(),
      },
      POLICY,
    )
  }

  /**
   * The step: jump the clock, request a manual delete, run a pass (by itself, or as the timed pass
   * when the clock reaches it), maybe with a power cut armed inside; then check what is left.
   */
  async step(host: SimHost): Promise<void> {
    const store = host.store!
    host.report.retentionPasses++
    const jumpMs = Math.floor((0.25 + host.random() * 1.25) * HOUR_MS)
    host.jumpClock(jumpMs)
    const nowMs = Date.now()
    const files = this.stamp(host.storeDir, nowMs)
    const onePass = this.plan(files, nowMs, store)
    const timed = host.int(2) === 0
    // A timed pass runs up to one interval later (files are older then), and with the second pass
    // below goes on past a batch stop: what it may delete is what repeated passes at that time do.
    const latestMs = timed ? nowMs + SIM_RETENTION.cleanResourceInterval : nowMs
    let rest = files
    let plan = this.plan(files, latestMs, store)
    let bound = 0
    for (;;) {
      const last = plan.deletions.at(-1)
      if (last !== undefined) bound = last.file.startOffset + last.file.sizeBytes
      if (!timed || plan.stop?.why !== 'batch') break
      rest = rest.slice(plan.deletions.length)
      plan = this.plan(rest, latestMs, store)
    }
    this.mayBeGoneBelow = Math.max(this.mayBeGoneBelow, bound)
    const kept = files[onePass.deletions.length]
    const expectedMin = onePass.deletions.length === 0 ? store.getMinPhyOffset() : kept.startOffset
    host.log(
      `retention: clock +${(jumpMs / HOUR_MS).toFixed(2)} h, ${files.length} commit-log files, the policy deletes ${onePass.deletions.length} (stop: ${onePass.stop?.why ?? 'none'}), ` +
        `may be gone below ${this.mayBeGoneBelow}, ${timed ? 'timed' : 'direct'} pass; ages (min) ${files.map((f) => Math.round((nowMs - f.lastModifiedMs) / 60_000))}`,
    )

    const disk = host.disk!
    const cutArmed = host.int(3) === 0
    // Within as many events as the last pass that deleted something made (syncs, unlinks).
    if (cutArmed) disk.options.cutAtEvent = disk.events + 1 + host.int(onePass.deletions.length > 0 ? this.deletingPassEvents : 8)
    const before = disk.events
    store.executeDeleteFilesManually()
    if (timed) {
      // The clean-resource loop's timer falls due within one interval; a pass it started is shared.
      await host.advanceClock(SIM_RETENTION.cleanResourceInterval)
      if (disk.cut === null) await store.runCleanupPass()
    } else {
      await store.runCleanupPass()
    }
    if (disk.cut !== null) {
      host.report.cutsDuringRetention++
      host.log(`power cut during a cleanup pass at event ${disk.cut.event} (${disk.cut.at})`)
      await host.afterOperation()
      return
    }
    if (cutArmed) disk.options.cutAtEvent = null
    if (onePass.deletions.length > 0 && !timed) this.deletingPassEvents = Math.max(8, disk.events - before)

    const minPhy = store.getMinPhyOffset()
    host.check(
      timed ? minPhy >= expectedMin && minPhy <= Math.max(expectedMin, this.mayBeGoneBelow) : minPhy === expectedMin,
      () =>
        `after a ${timed ? 'timed' : 'direct'} cleanup pass the commit log starts at ${minPhy}, the policy says ${expectedMin} (bound ${this.mayBeGoneBelow})`,
    )
    host.report.filesDeletedByRetention += Math.max(
      0,
      files.findIndex((f) => f.startOffset >= minPhy),
    )
    this.checkBelowMin(host)
    // The files left are stamped young: the manual passes still pending (and passes at the
    // deleteWhen hour) then find nothing to delete before the next step stamps the model's ages.
    this.stamp(host.storeDir, Date.now(), true)
  }

  /**
   * What retention took is gone for every read: the model retires messages below the commit log's
   * minimum, their offsets and keys answer nothing, and every queue's minimum is its first unit at
   * or above it (a read below answers OFFSET_TOO_SMALL). Compacted topics keep their messages in
   * their compaction logs; the compaction model checks those.
   */
  checkBelowMin(host: SimHost): void {
    const store = host.store!
    const minPhy = store.getMinPhyOffset()
    host.check(
      minPhy <= this.mayBeGoneBelow || minPhy === 0,
      () => `the commit log starts at ${minPhy}, past what retention may delete (${this.mayBeGoneBelow})`,
    )
    for (const m of [...host.messages.values()]) {
      if (m.compacted || m.wroteOffset >= minPhy) continue
      host.check(
        store.lookMessageByOffset(m.wroteOffset) === null,
        () => `${m.key} below the min offset ${minPhy} is still served by offset`,
      )
      const hits = store.queryMessage(m.topic, m.key, 8, 0, Date.now() + HOUR_MS).messages
      host.check(
        hits.every((h) => h.commitLogOffset >= minPhy),
        () => `index hit for ${m.key} below the min offset ${minPhy}`,
      )
      host.retire(m)
    }
    if (host.damaged) return
    for (const topic of host.topics) {
      for (let queueId = 0; queueId < host.queues; queueId++) {
        const min = store.getMinOffsetInQueue(topic, queueId)
        const max = store.getMaxOffsetInQueue(topic, queueId)
        // The first unit at or above the commit log's minimum, as the model knows the queue.
        let expected = max
        for (const m of host.messages.values()) {
          if (m.topic === topic && m.queueId === queueId && m.wroteOffset >= minPhy) expected = Math.min(expected, m.queueOffset)
        }
        host.check(min === expected, () => `${topic}/${queueId} min offset ${min}, expected ${expected} (commit log from ${minPhy})`)
        if (min > 0) {
          const below = store.getMessage('checker', topic, queueId, min - 1 - host.int(min), 4)
          host.check(
            below.status === 'OFFSET_TOO_SMALL' && below.nextBeginOffset === min && below.messages.length === 0,
            () => `${topic}/${queueId} read below min ${min}: ${below.status}, next ${below.nextBeginOffset}`,
          )
        }
      }
      for (let shared = 0; shared < 3; shared++) {
        for (const hit of store.queryMessage(topic, `shared-${shared}`, 64, 0, Date.now() + HOUR_MS).messages) {
          host.check(hit.commitLogOffset >= minPhy, () => `index hit for shared-${shared} below the min offset ${minPhy}`)
          host.matchServed(hit)
        }
      }
    }
  }
}
