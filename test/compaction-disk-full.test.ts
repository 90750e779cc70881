// Compaction on a full disk, on a real tiny tmpfs: a pass that cannot write its cleaned file fails
// for that queue alone (marked uncleanable, no .cleaned left, the data as it was), and the next
// try after space came back succeeds.
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { CompactionService } from '../lib/store/compaction/compaction-service.js'
import { TOPIC_CONFIG_DEFAULTS, type TopicConfig } from '../lib/store/topics/topic-table.js'
import { ManualClock, makeRecord, readAll } from './helpers/compaction.js'
import { tempDir } from './helpers/tmp.js'

const canMountTmpfs = process.platform === 'linux' && process.getuid?.() === 0

describe.runIf(canMountTmpfs)('compaction on a full disk (tmpfs, Linux as root)', () => {
  let dir: string
  beforeEach(() => {
    dir = tempDir('mqstore-compaction-full-')
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=512k', 'tmpfs', dir]).status).toBe(0)
  })
  afterEach(() => {
    spawnSync('umount', [dir])
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it('a pass that cannot write its cleaned file marks the queue uncleanable and changes nothing', async () => {
    const clock = new ManualClock()
    const config: TopicConfig = { ...TOPIC_CONFIG_DEFAULTS, cleanupPolicy: 'compact', segmentBytes: 16 * 1024, minCleanableDirtyRatio: 0 }
    const s = new CompactionService(join(dir, 'compaction'), clock, () => config, { enabled: false, fileDeleteDelayMs: 0 })
    s.open()
    try {
      for (let i = 0; i < 600; i++) {
        // The first records are each the only value of their key, so the first cleaned file has data.
        const key = i < 60 ? `only-${i}` : `k${i % 200}`
        const { request, bytes } = makeRecord('t', 0, i, key, `value-${i}-${'v'.repeat(100)}`, clock.now())
        s.dispatch(request, bytes)
      }
      const before = readAll(s, 't', 0)
      // Fill what is left of the disk.
      const filler = join(dir, 'filler')
      const fd = fs.openSync(filler, 'w')
      try {
        for (;;) fs.writeSync(fd, Buffer.alloc(4096))
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC')
      } finally {
        fs.closeSync(fd)
      }
      const report = await s.compact()
      expect(report.queues).toEqual([])
      expect(report.failed).toHaveLength(1)
      expect(report.failed[0].error).toMatch(/ENOSPC|no space/i)
      expect(s.stats().uncleanableQueueCount).toBe(1)
      const qdir = s.logOf('t', 0)!.dir
      expect(fs.readdirSync(qdir).filter((n) => n.includes('.'))).toEqual([])
      expect(readAll(s, 't', 0)).toEqual(before)
      // Space comes back: a manual pass retries the queue and succeeds.
      fs.rmSync(filler)
      const again = await s.compact()
      expect(again.failed).toEqual([])
      expect(again.queues).toHaveLength(1)
      expect(s.stats().uncleanableQueueCount).toBe(0)
      const after = readAll(s, 't', 0)
      expect(after.length).toBeLessThan(before.length)
      expect(after.at(-1)).toEqual(before.at(-1))
    } finally {
      await s.close()
    }
  })
})
