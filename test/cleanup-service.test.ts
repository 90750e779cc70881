// The cleanup service against real files: a real commit log, consume queues and index on disk,
// the clock and the disk usage injected. Ages are real file modification times set with utimes;
// "disk usage" is the bytes of the store's files over a pretend partition size, so deleting
// files really brings it down.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { CleanupService } from '../lib/store/cleanup/cleanup-service.js'
import { CommitLog } from '../lib/store/commitlog/commit-log.js'
import { prepareRecord, tagsCodeOf, type PreparedRecord } from '../lib/store/commitlog/record.js'
import { parseHost, resolveConfig, type MessageStoreConfig, type MessageStoreOptions } from '../lib/store/config.js'
import type { DiskUsageSource } from '../lib/store/environment.js'
import { IndexService } from '../lib/store/index/index-service.js'
import { ConsumeQueue } from '../lib/store/queue/consume-queue.js'
import { RunningFlags } from '../lib/store/running-flags.js'
import { tempDir } from './helpers/tmp.js'

const HOUR = 3_600_000
const FILE = 4096
const AT_4 = new Date(2026, 0, 15, 4, 30).getTime()
const AT_10 = new Date(2026, 0, 15, 10, 30).getTime()
const host = parseHost('127.0.0.1:10911')

/** Bytes of every file under `dir`. */
function bytesUnder(dir: string): number {
  let total = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += fs.statSync(join(entry.parentPath, entry.name)).size
  }
  return total
}

class Harness {
  readonly config: MessageStoreConfig
  readonly commitLog: CommitLog
  readonly queue: ConsumeQueue
  readonly index: IndexService
  readonly flags: RunningFlags
  readonly logs: string[] = []
  now = AT_10
  /** A pretend partition: null means "use this fixed ratio". */
  capacityBytes: number | null = null
  fixedRatio = 0.1
  readonly service: CleanupService
  private nextQueueOffset = 0

  constructor(
    readonly root: string,
    options: MessageStoreOptions = {},
  ) {
    this.config = resolveConfig({
      mappedFileSizeCommitLog: FILE,
      mappedFileSizeConsumeQueue: 20 * 8,
      maxHashSlotNum: 8,
      maxIndexNum: 8,
      deleteCommitLogFilesInterval: 0,
      deleteConsumeQueueFilesInterval: 0,
      ...options,
    })
    this.commitLog = new CommitLog(root, this.config, host, null)
    this.commitLog.load()
    this.queue = new ConsumeQueue('t', 0, join(root, 'consumequeue'), this.config.mappedFileSizeConsumeQueue, this.commitLog)
    this.queue.load()
    this.index = new IndexService(join(root, 'index'), {
      maxHashSlotNum: this.config.maxHashSlotNum,
      maxIndexNum: this.config.maxIndexNum,
      messageIndexEnable: true,
    })
    this.index.load(true, 0)
    this.flags = new RunningFlags(
      () => this.now,
      (name, set, reason) => this.logs.push(`flag ${name} ${set ? 'set' : 'cleared'}: ${reason}`),
    )
    const disk: DiskUsageSource = {
      usage: () => {
        const total = this.capacityBytes ?? 1_000_000
        const usedRatio = this.capacityBytes === null ? this.fixedRatio : bytesUnder(root) / this.capacityBytes
        return { totalBytes: total, availableBytes: total * (1 - usedRatio), usedRatio }
      },
    }
    this.service = new CleanupService(
      {
        commitLog: this.commitLog,
        consumeQueues: () => [this.queue],
        indexService: () => this.index,
        dispatchedOffset: () => this.commitLog.getMaxOffset(),
        commitLogPath: join(root, 'commitlog'),
        consumeQueuePath: join(root, 'consumequeue'),
      },
      this.config,
      { clock: { now: () => this.now }, diskUsage: disk },
      this.flags,
      (level, message) => this.logs.push(`${level} ${message}`),
    )
  }

  /** Appends one message with key `k<n>` and dispatches it to the queue and the index. */
  put(body = Buffer.alloc(900, 1)): number {
    const n = this.nextQueueOffset
    const record = prepareRecord(
      {
        topic: 't',
        queueId: 0,
        body,
        flag: 0,
        sysFlag: 0,
        bornTimestamp: this.now,
        bornHost: host,
        storeHost: host,
        reconsumeTimes: 0,
        preparedTransactionOffset: 0,
        propertiesString: `KEYS\u0001k${n}\u0002`,
      },
      this.config.maxMessageSize,
    ) as PreparedRecord
    const result = this.commitLog.append(record, this.now)
    expect(result.status).toBe('PUT_OK')
    this.queue.putMessagePositionInfo(result.wroteOffset, result.wroteBytes, tagsCodeOf(undefined), result.queueOffset)
    this.index.buildIndex({
      topic: 't',
      commitLogOffset: result.wroteOffset,
      storeTimestamp: this.now,
      keys: `k${n}`,
      uniqKey: undefined,
      sysFlag: 0,
    })
    this.nextQueueOffset++
    return result.wroteOffset
  }

  /** Fills `files` commit-log files (the last one partly) and waits for background warm-ups. */
  async fill(files: number): Promise<void> {
    while (this.commitLog.mappedFileQueue.mappedFiles.length < files) this.put()
    await this.commitLog.mappedFileQueue.settle()
    await this.index.waitForRollFlushes()
  }

  /** Sets file i's modification time to `hoursAgo[i]` hours before now. */
  age(hoursAgo: number[]): void {
    this.commitLog.mappedFileQueue.mappedFiles.forEach((file, i) => {
      const at = (this.now - (hoursAgo[i] ?? 0) * HOUR) / 1000
      fs.utimesSync(file.fileName, at, at)
    })
  }

  starts(): number[] {
    return this.commitLog.mappedFileQueue.mappedFiles.map((f) => f.fileFromOffset)
  }

  close(): void {
    this.queue.shutdown(0)
    this.index.shutdown()
    this.commitLog.shutdown()
  }
}

let root: string
let h: Harness
beforeEach(() => {
  root = tempDir('mqstore-clean-')
})
afterEach(() => {
  h?.close()
  fs.rmSync(root, { recursive: true, force: true })
})

describe('CleanCommitLogService by time', () => {
  it('at the deleteWhen hour deletes files older than fileReservedTime; the consume queue and index follow', async () => {
    h = new Harness(root)
    await h.fill(6)
    h.now = AT_4
    h.age([100, 90, 80, 10, 1, 0])
    const indexFilesBefore = h.index.getFileCount()
    expect(indexFilesBefore).toBeGreaterThan(2)

    const pass = await h.service.runPass()
    expect(pass).toMatchObject({ reason: 'time', commitLogFiles: 3, commitLogMinOffset: 3 * FILE })
    expect(h.starts()).toEqual([3, 4, 5].map((i) => i * FILE))
    for (let i = 0; i < 3; i++) expect(fs.existsSync(join(root, 'commitlog', String(i * FILE).padStart(20, '0')))).toBe(false)
    expect(h.logs.filter((l) => l.includes('cleanup (time): deleted commit-log file'))).toHaveLength(3)

    // The queue's first unit now points into the commit log's first kept file.
    const min = h.queue.getMinOffsetInQueue()
    const unit = h.queue.getIndexBuffer(min)!
    expect(Number(unit.buffer.readBigInt64BE(0))).toBeGreaterThanOrEqual(3 * FILE)
    unit.release()
    const beforeMin = h.queue.getIndexBuffer(min - 1)
    expect(beforeMin).toBeNull()
    expect(pass.consumeQueueFiles).toBeGreaterThan(0)
    expect(pass.indexFiles).toBeGreaterThan(0)
    expect(h.index.getFiles().every((f, i, all) => i === all.length - 1 || f.getEndPhyOffset() >= 3 * FILE)).toBe(true)
    // Keys of deleted messages find nothing that reads back.
    const found = h.index.queryOffset('t', 'k0', 32, 0, Number.MAX_SAFE_INTEGER)
    for (const offset of found.phyOffsets) expect(h.commitLog.getMessage(offset, 1)).toBeNull()

    const stats = h.service.stats()
    expect(stats.filesDeleted.commitLog).toBe(3)
    expect(stats.bytesDeleted).toBeGreaterThanOrEqual(3 * FILE)
    expect(stats.lastPass?.reason).toBe('time')
  })

  it('outside the deleteWhen hours nothing is deleted however old', async () => {
    h = new Harness(root)
    await h.fill(4)
    h.age([1000, 1000, 1000, 1000])
    const pass = await h.service.runPass()
    expect(pass).toMatchObject({ reason: null, commitLogFiles: 0 })
    expect(h.starts()).toHaveLength(4)
    expect(h.service.stats().lastPass).toBeNull()
  })

  it('at most 10 files a pass, never the newest', async () => {
    h = new Harness(root)
    await h.fill(14)
    h.now = AT_4
    h.age(Array(14).fill(100))
    expect((await h.service.runPass()).commitLogFiles).toBe(10)
    expect((await h.service.runPass()).commitLogFiles).toBe(3)
    expect(h.starts()).toEqual([13 * FILE])
    expect((await h.service.runPass()).commitLogFiles).toBe(0)
  })

  it('executeDeleteFilesManually makes the next 20 passes delete expired files at any hour', async () => {
    h = new Harness(root)
    await h.fill(4)
    h.age([100, 100, 1, 0])
    h.service.executeDeleteFilesManually()
    const pass = await h.service.runPass()
    expect(pass).toMatchObject({ reason: 'manual', commitLogFiles: 2 })
    expect(h.service.stats().manualPassesLeft).toBe(19)
    for (let i = 0; i < 19; i++) await h.service.runPass()
    expect(h.service.stats().manualPassesLeft).toBe(0)
    h.age([1000, 1000])
    expect((await h.service.runPass()).commitLogFiles).toBe(0)
  })
})

describe('CleanConsumeQueueService', () => {
  it('a consume-queue file a reader holds is deleted at a later pass, without the commit log moving again', async () => {
    h = new Harness(root)
    await h.fill(6)
    h.now = AT_4
    h.age([100, 100, 100, 100, 1, 0])
    const view = h.queue.getIndexBuffer(0)!
    const first = await h.service.runPass()
    expect(first.commitLogFiles).toBe(4)
    expect(first.consumeQueueFiles).toBe(0)
    view.release()
    const second = await h.service.runPass()
    expect(second.commitLogFiles).toBe(0)
    expect(second.consumeQueueFiles).toBeGreaterThan(0)
    expect(h.queue.getIndexBuffer(0)).toBeNull()
  })
})

describe('disk pressure', () => {
  it('above 75 % deletes old files at any hour; above 85 % young ones too; never the newest', async () => {
    h = new Harness(root)
    await h.fill(6)
    h.age([100, 1, 1, 1, 1, 0])
    h.fixedRatio = 0.8
    expect(await h.service.runPass()).toMatchObject({ reason: 'disk', commitLogFiles: 1 })
    expect(await h.service.runPass()).toMatchObject({ reason: 'disk', commitLogFiles: 0 })
    h.fixedRatio = 0.86
    expect(await h.service.runPass()).toMatchObject({ reason: 'forced', commitLogFiles: 4 })
    expect(h.starts()).toEqual([5 * FILE])
    expect(h.flags.isSet('DISK_FULL')).toBe(false)
  })

  it('above 90 % sets DISK_FULL with its reason; cleanup brings usage down and clears it in the same pass', async () => {
    h = new Harness(root)
    await h.fill(8)
    h.age([0, 0, 0, 0, 0, 0, 0, 0])
    // A pretend partition just big enough that the store's files fill 95 % of it.
    h.capacityBytes = Math.ceil(bytesUnder(root) / 0.95)
    const disk = h.service.checkDisk()
    expect(disk.diskFull).toBe(true)
    expect(h.flags.isWriteable()).toBe(false)
    expect(h.flags.writeBlockedReason()).toMatch(/^DISK_FULL: commitLog 9\d\.\d% > warning level 90\.0%/)

    const pass = await h.service.runPass()
    expect(pass.reason).toBe('forced')
    expect(pass.commitLogFiles).toBeGreaterThan(0)
    expect(h.flags.isSet('DISK_FULL')).toBe(false)
    expect(h.flags.isWriteable()).toBe(true)
    // Logged once when set and once when cleared.
    expect(h.logs.filter((l) => l.startsWith('flag DISK_FULL'))).toEqual([
      expect.stringMatching(/^flag DISK_FULL set: /),
      expect.stringMatching(/^flag DISK_FULL cleared: /),
    ])
    const usage = h.service.stats().diskUsage
    expect(usage.map((u) => u.role)).toEqual(['commitLog', 'consumeQueue'])
    expect(usage[0].usedRatio).toBeLessThanOrEqual(0.9)
  })

  it('deletes nothing while the store is not writeable for another reason', async () => {
    h = new Harness(root)
    await h.fill(4)
    h.age([100, 100, 100, 0])
    h.flags.set('NOT_WRITEABLE', 'flush failed')
    h.service.executeDeleteFilesManually()
    expect((await h.service.runPass()).commitLogFiles).toBe(0)
    expect(h.starts()).toHaveLength(4)
  })
})

describe('held and hanged files', () => {
  it('a file a reader holds is shut down, then destroyed by force after destroyMapedFileIntervalForcibly; the reader sees its bytes or nothing', async () => {
    h = new Harness(root)
    const first = h.put(Buffer.alloc(900, 7))
    await h.fill(4)
    h.age([100, 100, 100, 0])
    const view = h.commitLog.getMessage(first, 200)!
    const before = Buffer.from(view.buffer)
    h.service.executeDeleteFilesManually()

    let pass = await h.service.runPass()
    expect(pass.commitLogFiles).toBe(0)
    expect(h.commitLog.mappedFileQueue.mappedFiles[0].isAvailable()).toBe(false)
    // The log's minimum already moved past the file being destroyed.
    expect(h.commitLog.getMinOffset()).toBe(FILE)
    expect(view.buffer.equals(before)).toBe(true)

    h.now += 119_999
    expect((await h.service.runPass()).commitLogFiles).toBe(0)
    h.now += 1
    pass = await h.service.runPass()
    expect(pass.commitLogFiles).toBe(3)
    expect(h.logs.some((l) => /destroyed by force under 1 reader/.test(l))).toBe(true)
    // Unmapped under the reader: its view is empty, never another file's bytes.
    expect(view.buffer.length).toBe(0)
    view.release()
    expect(h.commitLog.getMessage(first, 200)).toBeNull()
  })

  it('a hanged first file is deleted again after redeleteHangedFileInterval even when no pass runs', async () => {
    h = new Harness(root)
    const first = h.put()
    await h.fill(3)
    h.age([100, 100, 0])
    const view = h.commitLog.getMessage(first, 100)!
    h.fixedRatio = 0.8
    expect((await h.service.runPass()).commitLogFiles).toBe(0)
    h.fixedRatio = 0.1
    h.now += 60_000
    expect((await h.service.runPass()).commitLogFiles).toBe(0)
    h.now += 60_000
    const pass = await h.service.runPass()
    expect(pass.reason).toBeNull()
    expect(pass.commitLogFiles).toBe(1)
    expect(h.starts()).toEqual([FILE, 2 * FILE])
    view.release()
  })
})
