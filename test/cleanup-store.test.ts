// Retention through the store: scheduled and manual passes, disk-full refusals, reads below the new
// minimum, the same state after reopen, and `mqstore clean`. Clock and disk usage are injected;
// file ages are real modification times.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { runClean, type CleanReport } from '../lib/cli/clean.js'
import type { DiskUsageSource } from '../lib/store/environment.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { settleLogFiles } from './helpers/log-files.js'
import { tempDir } from './helpers/tmp.js'

const HOUR = 3_600_000
const FILE = 4096
const AT_10 = new Date(2026, 0, 15, 10, 30).getTime()

let dir: string
let usedRatio: number
let logs: string[]
const stores: MessageStore[] = []
const disk: DiskUsageSource = {
  usage: () => ({ totalBytes: 1_000_000, availableBytes: 1_000_000 * (1 - usedRatio), usedRatio }),
}

function options(over: OpenOptions = {}): OpenOptions {
  return {
    mappedFileSizeCommitLog: FILE,
    mappedFileSizeConsumeQueue: 20 * 8,
    maxHashSlotNum: 16,
    maxIndexNum: 16,
    // Passes run when a test asks for one, unless the test shortens this.
    cleanResourceInterval: 3_600_000,
    deleteCommitLogFilesInterval: 0,
    deleteConsumeQueueFilesInterval: 0,
    clock: { now: () => AT_10 },
    diskUsage: disk,
    logger: (level, message) => logs.push(`${level} ${message}`),
    ...over,
  }
}

async function openStore(over: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, options(over))
  stores.push(store)
  return store
}

async function closeStore(store: MessageStore): Promise<void> {
  await store.close()
  stores.splice(stores.indexOf(store), 1)
}

/** Puts `count` 900-byte messages alternating over queues 0 and 1, key `k<n>`; returns their offsets. */
async function produce(store: MessageStore, count: number, from = 0): Promise<number[]> {
  const offsets: number[] = []
  for (let n = from; n < from + count; n++) {
    const body = Buffer.alloc(900, n & 0xff)
    body.writeUInt32BE(n, 0)
    const r = await store.putMessage({ topic: 't', queueId: n % 2, body, keys: [`k${n}`] })
    expect(r.status).toBe('PUT_OK')
    offsets.push(r.wroteOffset)
  }
  await settleLogFiles(store)
  return offsets
}

function commitLogNames(): string[] {
  return fs.readdirSync(join(dir, 'commitlog')).sort()
}

/** Makes every commit-log file but the last `young` ones `hours` old (by modification time). */
function ageFiles(hours: number, young = 2, now = AT_10): void {
  const names = commitLogNames()
  for (const name of names.slice(0, names.length - young)) {
    const at = (now - hours * HOUR) / 1000
    fs.utimesSync(join(dir, 'commitlog', name), at, at)
  }
}

beforeEach(() => {
  dir = tempDir('mqstore-retention-')
  usedRatio = 0.3
  logs = []
})
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

describe('retention through the store', () => {
  it('reads below the new minimum answer OFFSET_TOO_SMALL; deleted messages are not found by offset or key; the same after reopen', async () => {
    let store = await openStore()
    const offsets = await produce(store, 40)
    const files = commitLogNames().length
    expect(files).toBeGreaterThan(6)
    ageFiles(100, 3)
    const indexFilesBefore = store.stats().indexFileCount

    store.executeDeleteFilesManually()
    const pass = await store.runCleanupPass()
    expect(pass.reason).toBe('manual')
    expect(pass.commitLogFiles).toBe(files - 3)
    const minPhy = store.getMinPhyOffset()
    expect(minPhy).toBe((files - 3) * FILE)
    expect(commitLogNames()).toHaveLength(3)

    const check = (s: MessageStore) => {
      for (const queueId of [0, 1]) {
        const min = s.getMinOffsetInQueue('t', queueId)
        expect(min).toBeGreaterThan(0)
        const below = s.getMessage('g', 't', queueId, 0, 8)
        expect(below.status).toBe('OFFSET_TOO_SMALL')
        expect(below.nextBeginOffset).toBe(min)
        expect(below.minOffset).toBe(min)
        // Every message from the minimum on is there, in order.
        const ns: number[] = []
        for (let offset = min; offset < s.getMaxOffsetInQueue('t', queueId); ) {
          const got = s.getMessage('g', 't', queueId, offset, 32)
          expect(got.status).toBe('FOUND')
          for (const m of got.messages) {
            expect(m.commitLogOffset).toBeGreaterThanOrEqual(minPhy)
            ns.push(m.body.readUInt32BE(0))
          }
          offset = got.nextBeginOffset
        }
        expect(ns).toEqual(ns.map((_, i) => ns[0] + 2 * i))
        expect(ns[ns.length - 1]).toBe(38 + queueId)
      }
      for (let n = 0; n < 40; n++) {
        const kept = offsets[n] >= minPhy
        const byOffset = s.lookMessageByOffset(offsets[n])
        const byKey = s.queryMessage('t', `k${n}`, 4, 0, Number.MAX_SAFE_INTEGER).messages
        if (kept) {
          expect(byOffset?.body.readUInt32BE(0)).toBe(n)
          expect(byKey.map((m) => m.body.readUInt32BE(0))).toEqual([n])
        } else {
          expect(byOffset).toBeNull()
          expect(byKey).toEqual([])
        }
      }
    }
    check(store)
    expect(pass.consumeQueueFiles).toBeGreaterThan(0)
    expect(store.stats().indexFileCount).toBeLessThan(indexFilesBefore)

    await closeStore(store)
    store = await openStore()
    expect(store.getMinPhyOffset()).toBe(minPhy)
    check(store)
  })

  it('deleting files that were never flushed moves the flushed offset to the new minimum, so later data is still flushed', async () => {
    const store = await openStore({ flushIntervalCommitLog: 3_600_000 })
    await produce(store, 40)
    expect(store.stats().commitLogFlushedOffset).toBe(0)
    ageFiles(100, 3)
    store.executeDeleteFilesManually()
    await store.runCleanupPass()
    const minPhy = store.getMinPhyOffset()
    expect(minPhy).toBeGreaterThan(0)
    const stats = store.stats()
    expect(stats.commitLogFlushedOffset).toBe(minPhy)
    expect(stats.flushBehindBytes).toBe(stats.commitLogMaxOffset - minPhy)
  })

  it('a queue whose every message was deleted is empty: reads answer OFFSET_TOO_SMALL with its end, also after reopen', async () => {
    let store = await openStore()
    for (let n = 0; n < 3; n++) expect((await store.putMessage({ topic: 'early', body: `e${n}` })).status).toBe('PUT_OK')
    await produce(store, 20)
    ageFiles(100)
    store.executeDeleteFilesManually()
    await store.runCleanupPass()
    const expectEmpty = (s: MessageStore) => {
      expect(s.getMinOffsetInQueue('early', 0)).toBe(3)
      expect(s.getMaxOffsetInQueue('early', 0)).toBe(3)
      const got = s.getMessage('g', 'early', 0, 0, 8)
      expect(got.status).toBe('OFFSET_TOO_SMALL')
      expect(got.nextBeginOffset).toBe(3)
    }
    expectEmpty(store)
    await closeStore(store)
    store = await openStore()
    expectEmpty(store)
    expect((await store.putMessage({ topic: 'early', body: 'e3' })).status).toBe('PUT_OK')
    expect(store.getMessage('g', 'early', 0, 3, 8).messages.map((m) => m.body.toString())).toEqual(['e3'])
  })

  it("a body read before its file is deleted stays readable: it is the reader's own copy", async () => {
    const store = await openStore()
    await produce(store, 20)
    const first = store.getMessage('g', 't', 0, 0, 1).messages[0]
    const copy = Buffer.from(first.body)
    ageFiles(100)
    store.executeDeleteFilesManually()
    expect((await store.runCleanupPass()).commitLogFiles).toBeGreaterThan(0)
    expect(first.body.equals(copy)).toBe(true)
  })

  it('a zero-copy body read before its file is deleted reads as empty afterwards, never as other bytes', async () => {
    const store = await openStore({ copyMessageBody: false })
    await produce(store, 20)
    const first = store.getMessage('g', 't', 0, 0, 1).messages[0]
    expect(first.body.readUInt32BE(0)).toBe(0)
    const copy = Buffer.from(first.body)
    ageFiles(100)
    store.executeDeleteFilesManually()
    expect((await store.runCleanupPass()).commitLogFiles).toBeGreaterThan(0)
    expect(first.body.length === 0 || first.body.equals(copy)).toBe(true)
    expect(first.body.length).toBe(0)
  })

  it('the stats show disk usage per path, the running flags, what was deleted and the last pass', async () => {
    const store = await openStore()
    await produce(store, 20)
    ageFiles(100)
    usedRatio = 0.8
    await store.runCleanupPass()
    const stats = store.stats()
    expect(stats.diskUsage.map((d) => [d.role, d.path])).toEqual([
      ['commitLog', join(dir, 'commitlog')],
      ['consumeQueue', join(dir, 'consumequeue')],
    ])
    expect(stats.diskUsage[0].usedRatio).toBe(0.8)
    expect(stats.runningFlags).toEqual({ value: 0, flags: [] })
    expect(stats.cleanup.lastPass).toMatchObject({ at: AT_10, reason: 'disk' })
    expect(stats.cleanup.filesDeleted.commitLog).toBe(stats.cleanup.lastPass!.commitLogFiles)
    expect(stats.cleanup.filesDeleted.commitLog).toBeGreaterThan(0)
    expect(stats.cleanup.bytesDeleted).toBeGreaterThanOrEqual(stats.cleanup.filesDeleted.commitLog * FILE)
    expect(stats.cleanup.diskPressure).toMatch(/commitLog 80\.0% > diskMaxUsedSpaceRatio 75\.0%/)
  })

  it('above 90 % puts answer SERVICE_NOT_AVAILABLE with the reason in stats, logged once; they resume once usage drops', async () => {
    const store = await openStore()
    await produce(store, 3)
    usedRatio = 0.93
    await store.runCleanupPass()
    const refused = await store.putMessage({ topic: 't', body: 'x' })
    expect(refused.status).toBe('SERVICE_NOT_AVAILABLE')
    const flags = store.stats().runningFlags
    expect(flags.value).toBe(16)
    expect(flags.flags).toEqual([
      { name: 'DISK_FULL', reason: expect.stringMatching(/commitLog 93\.0% > warning level 90\.0%/), since: AT_10 },
    ])
    await store.runCleanupPass()
    expect(logs.filter((l) => l.includes('running flag DISK_FULL set'))).toHaveLength(1)

    usedRatio = 0.89
    await store.runCleanupPass()
    expect(store.stats().runningFlags.value).toBe(0)
    expect(logs.filter((l) => l.includes('running flag DISK_FULL cleared'))).toHaveLength(1)
    expect((await store.putMessage({ topic: 't', body: 'y' })).status).toBe('PUT_OK')
  })

  it('a store opened on a full disk refuses puts from the start', async () => {
    usedRatio = 0.99
    const store = await openStore()
    expect((await store.putMessage({ topic: 't', body: 'x' })).status).toBe('SERVICE_NOT_AVAILABLE')
  })

  it('passes run by themselves every cleanResourceInterval', async () => {
    const store = await openStore({ cleanResourceInterval: 20 })
    await produce(store, 20)
    ageFiles(100)
    const deleted = new Promise<string>((resolve) => {
      const push = logs.push.bind(logs)
      logs.push = (...lines: string[]) => {
        for (const line of lines) if (line.includes('cleanup (manual): deleted commit-log file')) resolve(line)
        return push(...lines)
      }
    })
    store.executeDeleteFilesManually()
    expect(await deleted).toMatch(/^info cleanup \(manual\): deleted commit-log file 0{20}, 4096 bytes/)
  })
})

describe('mqstore clean', () => {
  class Capture {
    text = ''
    write(chunk: string): boolean {
      this.text += chunk
      return true
    }
  }
  const INDEX = ['--max-hash-slot-num', '16', '--max-index-num', '16']

  async function storeWithOldFiles(): Promise<string[]> {
    // Real clock here: the command runs with it.
    const store = await MessageStore.open(dir, { ...options(), clock: undefined, diskUsage: undefined })
    await produce(store, 40)
    await store.close()
    ageFiles(100, 2, Date.now())
    return commitLogNames()
  }

  it('--dry-run shows what would be deleted and why and deletes nothing; without it the files go', async () => {
    const names = await storeWithOldFiles()
    const out = new Capture()
    const err = new Capture()
    expect(await runClean([dir, '--dry-run', '--json', '--manual', ...INDEX], out, err)).toBe(0)
    const report = JSON.parse(out.text) as CleanReport
    expect(report.dryRun).toBe(true)
    expect(report.pass).toBeNull()
    expect(report.plan.commitLog.deletions.map((d) => [d.file.name, d.reason])).toEqual(
      names.slice(0, Math.min(10, names.length - 2)).map((name) => [name, 'manual']),
    )
    expect(report.plan.derived.consumeQueues.length).toBeGreaterThan(0)
    expect(commitLogNames()).toEqual(names)

    const text = new Capture()
    expect(await runClean([dir, '--manual', ...INDEX], text, err)).toBe(0)
    expect(text.text).toMatch(/commit log: delete 0{20} \(4096 bytes, age 100\.0 h\) for manual/)
    expect(text.text).toMatch(/deleted: \d+ commit-log file\(s\)/)
    expect(commitLogNames()).toEqual(names.slice(Math.min(10, names.length - 2)))
    expect(err.text).toBe('')
  })

  it('without --manual outside the deleteWhen hours and below the ratios it deletes nothing and says why', async () => {
    const names = await storeWithOldFiles()
    const out = new Capture()
    const hour = (new Date().getHours() + 12) % 24
    expect(await runClean([dir, '--delete-when', String(hour), '--disk-max-used-space-ratio', '95', ...INDEX], out, new Capture())).toBe(0)
    // Unless this machine's disk really is above 95 %, nothing triggers a pass.
    if (!out.text.includes('> ')) {
      expect(out.text).toMatch(/commit log: no pass/)
      expect(commitLogNames()).toEqual(names)
    }
    expect(out.text).toMatch(/^disk commitLog: \d+\.\d% used$/m)
  })

  it('a store open elsewhere is refused with LOCKED', async () => {
    await storeWithOldFiles()
    const store = await openStore()
    const err = new Capture()
    expect(await runClean([dir, '--dry-run', ...INDEX], new Capture(), err)).toBe(1)
    expect(err.text).toMatch(/LOCKED/)
    expect(store.isClosed).toBe(false)
  })

  it('usage errors exit 2', async () => {
    const err = new Capture()
    expect(await runClean([], new Capture(), err)).toBe(2)
    expect(await runClean([dir, '--bogus'], new Capture(), err)).toBe(2)
    expect(await runClean([join(dir, 'nothing-here')], new Capture(), err)).toBe(2)
    expect(err.text).toMatch(/the store directory is missing/)
    expect(err.text).toMatch(/unknown option --bogus/)
  })
})
