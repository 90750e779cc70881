// A crash recovery that truncates the commit log back over whole files deletes them. Unlinks are
// only durable once their folder is synced, and a power cut may keep any of the unsynced ones: a
// newer file kept while an older one went would leave a gap that the next open refuses
// (NON_CONTIGUOUS). So the files go newest first, each unlink synced before the next. Every event
// of such an open around its unlinks is cut here, under several random outcomes, and each image
// must open.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { PowerLossDisk } from '../helpers/power-loss.js'
import { tempDir } from '../helpers/tmp.js'

const FILE = 64 * 1024
const OPTIONS: OpenOptions = {
  flushDiskType: 'ASYNC_FLUSH',
  mappedFileSizeCommitLog: FILE,
  mappedFileSizeConsumeQueue: 20 * 1024,
  messageIndexEnable: false,
}
const SEEDS = [1, 2, 3, 4]

let root: string
beforeEach(() => {
  root = tempDir('mqstore-truncation-cut-')
})
afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true })
})

/** A store of four commit-log files whose last three lost their records (zeros), opened as after a power cut. */
async function storeToTruncate(dir: string): Promise<void> {
  const store = await MessageStore.open(dir, OPTIONS)
  const body = Buffer.alloc(1000, 3)
  while (store.stats().commitLogMaxOffset < 3 * FILE + FILE / 2) {
    expect((await store.putMessage({ topic: 't', queueId: 0, body })).status).toBe('PUT_OK')
  }
  await store.close()
  const log = join(dir, 'commitlog')
  const names = fs.readdirSync(log).sort()
  expect(names.length).toBe(4)
  for (const name of names.slice(1)) fs.writeFileSync(join(log, name), Buffer.alloc(FILE))
  fs.writeFileSync(join(dir, 'abort'), '')
}

describe.skipIf(process.platform !== 'linux')(
  'a power cut while recovery deletes the commit-log files past its end (Linux only: the power-loss model resolves descriptors through /proc/self/fd)',
  () => {
    it('leaves files that open, whichever event it comes at and whichever unsynced unlinks it keeps', async () => {
      const source = join(root, 'source')
      await storeToTruncate(source)
      // The open's events, once without a cut: which of them are unlinks (the files past the log's end). The cuts go around those.
      const probe = join(root, 'probe')
      fs.cpSync(source, probe, { recursive: true })
      const unlinks: number[] = []
      const onEvent = (event: number, at: string): void => {
        if (at.includes('unlink')) unlinks.push(event)
      }
      const counting = new PowerLossDisk({ root: probe, seed: 0, imageRoot: join(root, 'probe-images'), onEvent }).arm()
      let store = await MessageStore.open(probe, OPTIONS)
      counting.disarm()
      // The second file stays (the log ends at its start); the third and fourth go.
      expect(fs.readdirSync(join(probe, 'commitlog')).length).toBe(2)
      await store.close()

      let images = 0
      expect(unlinks.length).toBeGreaterThanOrEqual(2)
      const first = unlinks[0] - 1
      const last = unlinks[unlinks.length - 1] + 2
      for (let at = first; at <= last; at++) {
        for (const seed of SEEDS) {
          const dir = join(root, `run-${at}-${seed}`)
          fs.cpSync(source, dir, { recursive: true })
          const disk = new PowerLossDisk({ root: dir, seed, cutAtEvent: at, imageRoot: join(root, `images-${at}-${seed}`) }).arm()
          try {
            store = await MessageStore.open(dir, OPTIONS)
          } finally {
            disk.disarm()
          }
          await store.close()
          const cut = disk.cut
          if (cut === null) continue
          images++
          const reopened = await MessageStore.open(cut.dir, OPTIONS)
          expect(reopened.getMaxOffsetInQueue('t', 0)).toBeGreaterThan(0)
          await reopened.close()
          fs.rmSync(dir, { recursive: true, force: true })
          fs.rmSync(join(root, `images-${at}-${seed}`), { recursive: true, force: true })
        }
      }
      expect(images).toBe((last - first + 1) * SEEDS.length)
    }, 120_000)
  },
)
