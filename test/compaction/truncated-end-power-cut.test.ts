// A compaction log cut back at open (the commit log lost its last records) keeps its new end only
// in memory when the records just below the cut were compacted away: the files left name a lower
// end (the last record kept, or the base of a file the cut emptied). While the consume queue's
// units below the cut still point into the commit log, the next open copies them in again; once
// retention has deleted the commit-log files they point at, nothing did, and a power cut then
// brought the queue's max offset back below offsets it had already handed out.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { PowerLossDisk } from '../helpers/power-loss.js'
import { tempDir } from '../helpers/tmp.js'

const FILE = 64 * 1024
const OPTIONS: OpenOptions = {
  flushDiskType: 'SYNC_FLUSH',
  mappedFileSizeCommitLog: FILE,
  maxHashSlotNum: 64,
  maxIndexNum: 256,
  fileReservedTime: 1,
  deleteCommitLogFilesInterval: 0,
  deleteConsumeQueueFilesInterval: 0,
  // Three records of 1 KB a file: the queue's first six records fill two sealed files.
  topics: { kv: { cleanupPolicy: 'compact', segmentBytes: 4096 } },
  compaction: { enabled: false },
  diskUsage: { usage: () => ({ totalBytes: 2 ** 40, availableBytes: 2 ** 39, usedRatio: 0.5 }) },
}

let root: string
beforeEach(() => {
  root = tempDir('mqstore-truncated-end-')
})
afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true })
})

async function put(
  store: MessageStore,
  topic: string,
  key: string | undefined,
  fill: number,
): Promise<{ wroteOffset: number; queueOffset: number }> {
  const r = await store.putMessage({ topic, queueId: 0, keys: key === undefined ? undefined : [key], body: Buffer.alloc(1000, fill) })
  expect(r.status).toBe('PUT_OK')
  return r
}

describe.skipIf(process.platform !== 'linux')(
  'a compaction log cut back at open, then retention, then a power cut (Linux only: the power-loss model resolves descriptors through /proc/self/fd)',
  () => {
    it('keeps the queue max offset at the cut', async () => {
      const dir = join(root, 'store')
      const store = await MessageStore.open(dir, OPTIONS)
      // Offsets 0..5 in the first commit-log file, 6..11 in the second; 6..8 supersede 0..5.
      const keys = ['a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c', 'd', 'e', 'f']
      const offsets: number[] = []
      for (let i = 0; i < 6; i++) offsets.push((await put(store, 'kv', keys[i], i)).wroteOffset)
      while (store.stats().commitLogMaxOffset < FILE) await put(store, 'other', undefined, 0)
      for (let i = 6; i < 12; i++) offsets.push((await put(store, 'kv', keys[i], i)).wroteOffset)
      expect(offsets[6]).toBeGreaterThanOrEqual(FILE)
      expect(offsets[11]).toBeLessThan(2 * FILE)
      const report = await store.compact('kv')
      expect(report.recordsDropped).toBe(6)
      await store.close()

      // The commit log loses offsets 6..11 (zeros from the first of them to the end of its file).
      const second = join(dir, 'commitlog', fs.readdirSync(join(dir, 'commitlog')).sort()[1])
      const data = fs.readFileSync(second)
      data.fill(0, offsets[6] - FILE)
      fs.writeFileSync(second, data)

      // The worst cut: every page and name not synced comes back old.
      const disk = new PowerLossDisk({ root: dir, seed: 3, imageRoot: join(root, 'images'), mode: 'lose-unsynced' }).arm()
      let cutDir: string
      const truncated = await MessageStore.open(dir, OPTIONS)
      try {
        // The compaction log dropped 6..11; nothing below 6 is left in it (compacted away).
        expect(truncated.getMaxOffsetInQueue('kv', 0)).toBe(6)
        expect(truncated.getMessage('g', 'kv', 0, 0, 32).messages).toEqual([])
        // Retention deletes the first commit-log file: the consume queue's units 0..5 point at nothing now.
        await put(truncated, 'other', undefined, 1)
        const old = (Date.now() - 2 * 3_600_000) / 1000
        fs.utimesSync(join(dir, 'commitlog', fs.readdirSync(join(dir, 'commitlog')).sort()[0]), old, old)
        truncated.executeDeleteFilesManually()
        await truncated.runCleanupPass()
        expect(truncated.getMinPhyOffset()).toBe(FILE)
        expect(truncated.getMaxOffsetInQueue('kv', 0)).toBe(6)
        cutDir = disk.cutNow('after retention').dir
      } finally {
        await truncated.close()
        disk.disarm()
      }

      const reopened = await MessageStore.open(cutDir, OPTIONS)
      try {
        expect(reopened.getMaxOffsetInQueue('kv', 0)).toBe(6)
        expect(reopened.getMinOffsetInQueue('kv', 0)).toBe(6)
        const next = await put(reopened, 'kv', 'g', 12)
        expect(next.queueOffset).toBe(6)
        expect(reopened.getMaxOffsetInQueue('kv', 0)).toBe(7)
        expect(reopened.getMessage('g', 'kv', 0, 0, 32).messages.map((m) => m.queueOffset)).toEqual([6])
      } finally {
        await reopened.close()
      }
    })
  },
)
