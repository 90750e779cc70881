// Expiry deletes a queue of files from its oldest (the commit log's by age, a consume queue's by
// the offsets its units point to). An unlink is durable only once its folder is synced, and a power
// cut may keep any of the unsynced ones: an older file brought back past a deleted newer one is a
// gap, which the next load refuses (NON_CONTIGUOUS). So each unlink is synced before the next file
// goes. Every event around the unlinks of a call that deletes five files is cut here, under several
// random outcomes, and each image must load.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MappedFileQueue } from '../../lib/store/mapped/mapped-file-queue.js'
import { PowerLossDisk } from '../helpers/power-loss.js'
import { tempDir } from '../helpers/tmp.js'

const SIZE = 8192
const UNIT = 20
const SEEDS = [1, 2, 3, 4]

let root: string
beforeEach(() => {
  root = tempDir('mqstore-deletions-cut-')
})
afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true })
})

/** Six full files of zeros in `dir/q`: every unit points at commit-log offset 0. */
function sixFiles(dir: string): void {
  const queue = new MappedFileQueue(join(dir, 'q'), SIZE)
  queue.load()
  for (let i = 0; i < 6; i++) {
    const file = queue.getLastMappedFile(i * SIZE)!
    file.appendWith((target, pos) => {
      target.fill(0, pos, pos + SIZE)
      return { wroteBytes: SIZE }
    })
  }
  queue.flush(0)
  queue.shutdown(0)
}

type Expiry = 'by time' | 'by offset'

/** Loads the queue at `dir/q`, deletes every file but the last in one call, and shuts it down. */
async function expire(dir: string, how: Expiry): Promise<number> {
  const queue = new MappedFileQueue(join(dir, 'q'), SIZE)
  queue.load()
  try {
    return how === 'by time' ? await queue.deleteExpiredFileByTime(0, 0, 1000, true) : queue.deleteExpiredFileByOffset(1, UNIT)
  } finally {
    queue.shutdown(0)
  }
}

describe.skipIf(process.platform !== 'linux')(
  'a power cut while expiry deletes a queue of files (Linux only: the power-loss model resolves descriptors through /proc/self/fd)',
  () => {
    for (const how of ['by time', 'by offset'] as const) {
      it(`(${how}) leaves files that load, whichever event it comes at and whichever unsynced unlinks it keeps`, async () => {
        const source = join(root, 'source')
        fs.mkdirSync(source)
        sixFiles(source)
        // The call's events, once without a cut: which of them are unlinks. The cuts go there.
        const probe = join(root, 'probe')
        fs.cpSync(source, probe, { recursive: true })
        const unlinks: number[] = []
        const onEvent = (event: number, at: string): void => {
          if (at === 'after unlink') unlinks.push(event)
        }
        const counting = new PowerLossDisk({ root: probe, seed: 0, imageRoot: join(root, 'probe-images'), onEvent }).arm()
        try {
          expect(await expire(probe, how)).toBe(5)
        } finally {
          counting.disarm()
        }
        expect(unlinks.length).toBe(5)

        let images = 0
        for (const at of unlinks) {
          for (const seed of SEEDS) {
            const dir = join(root, `run-${at}-${seed}`)
            fs.cpSync(source, dir, { recursive: true })
            const disk = new PowerLossDisk({ root: dir, seed, cutAtEvent: at, imageRoot: join(root, `images-${at}-${seed}`) }).arm()
            try {
              await expire(dir, how)
            } finally {
              disk.disarm()
            }
            const cut = disk.cut as { dir: string } | null
            if (cut === null) continue
            images++
            const loaded = new MappedFileQueue(join(cut.dir, 'q'), SIZE)
            loaded.load()
            expect(loaded.mappedFiles.at(-1)?.fileFromOffset).toBe(5 * SIZE)
            loaded.shutdown(0)
          }
        }
        expect(images).toBe(unlinks.length * SEEDS.length)
      }, 60_000)
    }
  },
)
