// The cleanup policies are pure: every case here is a snapshot in and a plan out.
import { describe, expect, it } from 'vitest'

import {
  isTimeToDelete,
  planCommitLogCleanup,
  type CommitLogFileInfo,
  type CommitLogPolicyConfig,
  type CommitLogSnapshot,
} from '../lib/store/cleanup/commit-log-policy.js'
import { planConsumeQueueFiles, planDerivedCleanup, planIndexFiles } from '../lib/store/cleanup/derived-policy.js'
import { judgeDisk, type DiskReading } from '../lib/store/cleanup/disk-policy.js'
import { resolveConfig } from '../lib/store/config.js'
import { MQStoreError } from '../lib/errors.js'

const HOUR = 3_600_000
const SIZE = 1000
/** 10:30 local time: outside the default deleteWhen hour "04". */
const NOON = new Date(2026, 0, 15, 10, 30).getTime()

const config: CommitLogPolicyConfig = {
  fileReservedTime: 72,
  deleteWhen: '04',
  cleanFileForciblyEnable: true,
  destroyMapedFileIntervalForcibly: 120_000,
  redeleteHangedFileInterval: 120_000,
}

/** `count` files, file i last modified `ages[i]` hours before NOON (the default: 100 h). */
function files(count: number, ages: number[] = []): CommitLogFileInfo[] {
  return Array.from({ length: count }, (_, i) => ({
    name: String(i * SIZE).padStart(20, '0'),
    startOffset: i * SIZE,
    sizeBytes: SIZE,
    lastModifiedMs: NOON - (ages[i] ?? 100) * HOUR,
    holders: 0,
    available: true,
    shutdownAtMs: 0,
  }))
}

function reading(usedRatio: number, role: DiskReading['role'] = 'commitLog'): DiskReading {
  return { role, path: `/store/${role}`, usedRatio, totalBytes: 100, availableBytes: 100 - usedRatio * 100 }
}

function snapshot(over: Partial<CommitLogSnapshot> = {}): CommitLogSnapshot {
  const nowMs = over.nowMs ?? NOON
  return {
    nowMs,
    localHour: new Date(nowMs).getHours(),
    files: files(4),
    disk: judgeDisk([reading(0.5)], 75),
    manualPassesLeft: 0,
    lastHangedRetryMs: 0,
    dispatchedOffset: Number.MAX_SAFE_INTEGER,
    ...over,
  }
}

const names = (plan: ReturnType<typeof planCommitLogCleanup>) => plan.deletions.map((d) => d.file.startOffset)

describe('deleteWhen hours', () => {
  it('is time for the whole of each listed local hour and not outside it', () => {
    expect(isTimeToDelete(4, '04')).toBe(true)
    expect(isTimeToDelete(3, '04')).toBe(false)
    expect(isTimeToDelete(5, '04')).toBe(false)
    expect(isTimeToDelete(16, '04;16')).toBe(true)
    expect(isTimeToDelete(0, '0; 12')).toBe(true)
  })

  it('the config refuses hours that are not 0..23', () => {
    expect(() => resolveConfig({ deleteWhen: '24' })).toThrow(MQStoreError)
    expect(() => resolveConfig({ deleteWhen: 'four' })).toThrow(/deleteWhen/)
    expect(resolveConfig({ deleteWhen: '04;16' }).deleteWhen).toBe('04;16')
  })
})

describe('commit-log policy by time', () => {
  it('at a deleteWhen hour deletes the files older than fileReservedTime, oldest first, never the newest', () => {
    const at4 = new Date(2026, 0, 15, 4, 10).getTime()
    const list = files(5, [100, 90, 80, 10, 100]).map((f) => ({ ...f, lastModifiedMs: f.lastModifiedMs - NOON + at4 }))
    const plan = planCommitLogCleanup(snapshot({ nowMs: at4, files: list }), config)
    expect(plan.runs).toBe(true)
    expect(plan.reason).toBe('time')
    expect(names(plan)).toEqual([0, 1000, 2000])
    expect(plan.deletions.every((d) => d.reason === 'time')).toBe(true)
    expect(plan.stop).toMatchObject({ file: { startOffset: 3000 }, why: 'young' })
    expect(plan.bytes).toBe(3 * SIZE)
  })

  it('outside the deleteWhen hours nothing runs, however old the files', () => {
    const plan = planCommitLogCleanup(snapshot({ files: files(5, [1000, 1000, 1000, 1000, 1000]) }), config)
    expect(plan.runs).toBe(false)
    expect(plan.deletions).toEqual([])
    expect(plan.reason).toBeNull()
  })

  it('a file exactly fileReservedTime old is expired; a millisecond younger is not', () => {
    const at4 = new Date(2026, 0, 15, 4, 0).getTime()
    const list = files(3).map((f, i) => ({ ...f, lastModifiedMs: at4 - 72 * HOUR + (i === 1 ? 1 : 0) }))
    const plan = planCommitLogCleanup(snapshot({ nowMs: at4, files: list }), config)
    expect(names(plan)).toEqual([0])
  })

  it('never deletes from the middle: a young file stops the walk even if older ones follow', () => {
    const at4 = new Date(2026, 0, 15, 4, 0).getTime()
    const list = files(4, [100, 1, 100, 100]).map((f) => ({ ...f, lastModifiedMs: f.lastModifiedMs - NOON + at4 }))
    expect(names(planCommitLogCleanup(snapshot({ nowMs: at4, files: list }), config))).toEqual([0])
  })

  it('deletes at most 10 files a pass', () => {
    const plan = planCommitLogCleanup(snapshot({ files: files(25), manualPassesLeft: 1 }), config)
    expect(names(plan)).toEqual(Array.from({ length: 10 }, (_, i) => i * SIZE))
    expect(plan.stop?.why).toBe('batch')
  })

  it('keeps files holding records the consume queues have not received', () => {
    const plan = planCommitLogCleanup(snapshot({ manualPassesLeft: 1, dispatchedOffset: 2500 }), config)
    expect(names(plan)).toEqual([0, 1000])
    expect(plan.stop?.why).toBe('undispatched')
  })
})

describe('disk ratios 75 / 85 / 90 %', () => {
  it('judges each threshold strictly above it', () => {
    const at = (ratio: number) => judgeDisk([reading(ratio)], 75)
    expect(at(0.75)).toMatchObject({ spaceToDelete: false, cleanImmediately: false, diskFull: false })
    expect(at(0.76)).toMatchObject({ spaceToDelete: true, cleanImmediately: false, diskFull: false })
    expect(at(0.85)).toMatchObject({ spaceToDelete: true, cleanImmediately: false, diskFull: false })
    expect(at(0.86)).toMatchObject({ spaceToDelete: true, cleanImmediately: true, diskFull: false })
    expect(at(0.9)).toMatchObject({ spaceToDelete: true, cleanImmediately: true, diskFull: false })
    expect(at(0.91)).toMatchObject({ spaceToDelete: true, cleanImmediately: true, diskFull: true })
    expect(at(0.91).why).toMatch(/commitLog 91\.0% > warning level 90\.0%/)
  })

  it('the fullest of the commit-log and consume-queue partitions decides; unreadable paths are left out', () => {
    const disk = judgeDisk([reading(0.2), reading(0.92, 'consumeQueue'), reading(-1)], 75)
    expect(disk.diskFull).toBe(true)
    expect(disk.fullest?.role).toBe('consumeQueue')
    expect(judgeDisk([reading(-1)], 75)).toMatchObject({ spaceToDelete: false, fullest: null })
  })

  it('diskMaxUsedSpaceRatio moves the first threshold', () => {
    expect(judgeDisk([reading(0.5)], 40).spaceToDelete).toBe(true)
    expect(judgeDisk([reading(0.5)], 60).spaceToDelete).toBe(false)
  })

  it('above 75 % old files go at any hour, young files stay', () => {
    const plan = planCommitLogCleanup(snapshot({ files: files(4, [100, 10, 100, 1]), disk: judgeDisk([reading(0.8)], 75) }), config)
    expect(plan.reason).toBe('disk')
    expect(names(plan)).toEqual([0])
    expect(plan.stop?.why).toBe('young')
  })

  it('above 85 % files go whatever their age (forced), still never the newest', () => {
    const plan = planCommitLogCleanup(snapshot({ files: files(4, [100, 1, 1, 0]), disk: judgeDisk([reading(0.86)], 75) }), config)
    expect(plan.cleanAtOnce).toBe(true)
    expect(plan.deletions.map((d) => [d.file.startOffset, d.reason])).toEqual([
      [0, 'disk'],
      [1000, 'forced'],
      [2000, 'forced'],
    ])
    expect(plan.stop).toBeNull()
  })

  it('above 85 % with cleanFileForciblyEnable off, age still rules', () => {
    const plan = planCommitLogCleanup(snapshot({ files: files(4, [100, 1, 1, 0]), disk: judgeDisk([reading(0.95)], 75) }), {
      ...config,
      cleanFileForciblyEnable: false,
    })
    expect(names(plan)).toEqual([0])
  })
})

describe('manual trigger', () => {
  it('a manual request deletes expired files outside the deleteWhen hours, with reason manual', () => {
    const plan = planCommitLogCleanup(snapshot({ files: files(4, [100, 100, 1, 0]), manualPassesLeft: 20 }), config)
    expect(plan.manual).toBe(true)
    expect(plan.reason).toBe('manual')
    expect(names(plan)).toEqual([0, 1000])
  })
})

describe('held and hanged files', () => {
  it('a held file stops the pass and is shut down; after the forced interval it is deleted under its readers', () => {
    const held = files(3)
    held[0] = { ...held[0], holders: 1 }
    const first = planCommitLogCleanup(snapshot({ files: held, manualPassesLeft: 1 }), config)
    expect(first.deletions).toEqual([])
    expect(first.stop?.why).toBe('held')
    expect(first.shutdown?.startOffset).toBe(0)

    const shutDown = held.map((f, i) => (i === 0 ? { ...f, available: false, shutdownAtMs: NOON } : f))
    const early = planCommitLogCleanup(snapshot({ nowMs: NOON + 119_999, files: shutDown, manualPassesLeft: 1 }), config)
    expect(early.deletions).toEqual([])
    expect(early.shutdown).toBeNull()
    const late = planCommitLogCleanup(snapshot({ nowMs: NOON + 120_000, files: shutDown, manualPassesLeft: 1 }), config)
    expect(late.deletions.map((d) => [d.file.startOffset, d.forcedFromHolders])).toEqual([
      [0, 1],
      [1000, 0],
    ])
  })

  it('a hanged first file is retried every redeleteHangedFileInterval, even when no pass runs', () => {
    const hanged = files(3).map((f, i) => (i === 0 ? { ...f, available: false, holders: 1, shutdownAtMs: NOON - 200_000 } : f))
    const due = planCommitLogCleanup(snapshot({ files: hanged, lastHangedRetryMs: NOON - 120_000 }), config)
    expect(due.runs).toBe(false)
    expect(due.retryHanged?.startOffset).toBe(0)
    const notYet = planCommitLogCleanup(snapshot({ files: hanged, lastHangedRetryMs: NOON - 60_000 }), config)
    expect(notYet.retryHanged).toBeNull()
  })
})

describe('consume queues and index follow the commit log', () => {
  const cqFile = (i: number, last: number | null, available = true) => ({
    name: String(i * 200).padStart(20, '0'),
    startOffset: i * 200,
    sizeBytes: 200,
    lastUnitPhyOffset: last,
    available,
  })

  it('a queue loses its leading files whose last unit is below the min offset, never its last file', () => {
    const queue = { topic: 't', queueId: 0, files: [cqFile(0, 900), cqFile(1, 1900), cqFile(2, 2900), cqFile(3, null)] }
    expect(planConsumeQueueFiles(queue, 2000).map((f) => f.startOffset)).toEqual([0, 200])
    expect(planConsumeQueueFiles(queue, 1_000_000).map((f) => f.startOffset)).toEqual([0, 200, 400])
    expect(planConsumeQueueFiles({ ...queue, files: [cqFile(0, 900)] }, 1_000_000)).toEqual([])
  })

  it('an unwritten last unit stops the walk unless an earlier pass shut the file down', () => {
    expect(planConsumeQueueFiles({ topic: 't', queueId: 0, files: [cqFile(0, null), cqFile(1, null)] }, 5000)).toEqual([])
    expect(planConsumeQueueFiles({ topic: 't', queueId: 0, files: [cqFile(0, null, false), cqFile(1, null)] }, 5000)).toHaveLength(1)
  })

  it('index files go while their last entry is below the min offset, never the newest', () => {
    const index = [
      { name: 'a', sizeBytes: 10, endPhyOffset: 999 },
      { name: 'b', sizeBytes: 10, endPhyOffset: 1999 },
      { name: 'c', sizeBytes: 10, endPhyOffset: 2999 },
    ]
    expect(planIndexFiles(index, 2000).map((f) => f.name)).toEqual(['a', 'b'])
    expect(planIndexFiles(index, 1_000_000).map((f) => f.name)).toEqual(['a', 'b'])
    expect(planIndexFiles(index, 999)).toEqual([])
    const plan = planDerivedCleanup([{ topic: 't', queueId: 1, files: [cqFile(0, 900), cqFile(1, 3000)] }], index, 2000)
    expect(plan.consumeQueues).toEqual([{ topic: 't', queueId: 1, files: [cqFile(0, 900)] }])
    expect(plan.bytes).toBe(200 + 20)
  })
})
