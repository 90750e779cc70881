// SYNC_FLUSH keeps the commit log's blocks just ahead of the writer written with zeros (and synced
// through a descriptor of its own), so that a group commit's fdatasync overwrites written blocks
// instead of converting reserved ones. The zeros must never reach a byte at or below the write
// position, nor a block that was not reserved.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import type { WriteStage } from '../../lib/store/mapped/write-stage.js'
import { ZERO_LEAD_BYTES, ZERO_STEP_BYTES, ZeroAhead, type ZeroedFile } from '../../lib/store/mapped/zero-ahead.js'
import { MessageStore } from '../../lib/store/message-store.js'
import type { StoreEngine } from '../../lib/store/store-engine.js'
import { interposeFdatasync } from '../helpers/fdatasync.js'
import { tempDir } from '../helpers/tmp.js'

const MIB = 1024 * 1024
const FILE_BYTES = 8 * MIB
const PATTERN = 0xaa

/** A file of FILE_BYTES whose every byte is PATTERN, standing for bytes the zeros must not touch. */
function patternFile(): string {
  const path = join(tempDir('mqstore-zero-'), '00000000000000000000')
  fs.writeFileSync(path, Buffer.alloc(FILE_BYTES, PATTERN))
  return path
}

/** [from, to) of the file: 'zero', 'pattern', or 'mixed'. */
function rangeOf(path: string, from: number, to: number): string {
  const bytes = fs.readFileSync(path).subarray(from, to)
  if (bytes.every((b) => b === 0)) return 'zero'
  if (bytes.every((b) => b === PATTERN)) return 'pattern'
  return 'mixed'
}

/** The one object ZeroAhead sees for a file (it tells files apart by identity), moved to `wrotePosition`. */
const files = new Map<string, { fileName: string; fileSize: number; wrotePosition: number; reservedPosition: number }>()
function file(fileName: string, wrotePosition: number, reservedPosition = FILE_BYTES): ZeroedFile {
  let f = files.get(fileName)
  if (f === undefined) {
    f = { fileName, fileSize: FILE_BYTES, wrotePosition, reservedPosition }
    files.set(fileName, f)
  }
  f.wrotePosition = wrotePosition
  f.reservedPosition = reservedPosition
  return f
}

describe('ZeroAhead', () => {
  const cleanups: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })

  it('writes zeros from the write position up to the lead, in steps, and no further than the reservation', async () => {
    const path = patternFile()
    const zeros = new ZeroAhead()
    cleanups.push(() => zeros.close())
    const wrote = 100_000
    zeros.after(file(path, wrote))
    expect(rangeOf(path, 0, wrote)).toBe('pattern')
    expect(rangeOf(path, wrote, wrote + ZERO_LEAD_BYTES)).toBe('zero')
    expect(rangeOf(path, wrote + ZERO_LEAD_BYTES, FILE_BYTES)).toBe('pattern')
    expect(zeros.zeroedBytes).toBe(ZERO_LEAD_BYTES)

    // Less than a step further: nothing is written yet.
    zeros.after(file(path, wrote + ZERO_STEP_BYTES - 4096))
    expect(rangeOf(path, wrote + ZERO_LEAD_BYTES, FILE_BYTES)).toBe('pattern')
    // A step further: the zeros reach the lead again, ending at the reservation's end.
    const reserved = wrote + ZERO_LEAD_BYTES + ZERO_STEP_BYTES + 8192
    zeros.after(file(path, wrote + 2 * ZERO_STEP_BYTES, reserved))
    expect(rangeOf(path, wrote + ZERO_LEAD_BYTES, reserved)).toBe('zero')
    expect(rangeOf(path, reserved, FILE_BYTES)).toBe('pattern')
    // The rest of the reservation goes even when shorter than a step.
    zeros.after(file(path, wrote + 2 * ZERO_STEP_BYTES + 1, reserved + 4096))
    expect(rangeOf(path, reserved, reserved + 4096)).toBe('zero')
    expect(rangeOf(path, reserved + 4096, FILE_BYTES)).toBe('pattern')

    await zeros.close()
    // Closed: nothing is written any more.
    zeros.after(file(path, FILE_BYTES - 2 * MIB))
    expect(rangeOf(path, FILE_BYTES - 2 * MIB, FILE_BYTES)).toBe('pattern')
  })

  it('starts again from the write position of the next file', async () => {
    const first = patternFile()
    const second = patternFile()
    const zeros = new ZeroAhead()
    cleanups.push(() => zeros.close())
    zeros.after(file(first, 2 * MIB))
    zeros.after(file(second, 4096))
    expect(rangeOf(second, 0, 4096)).toBe('pattern')
    expect(rangeOf(second, 4096, 4096 + ZERO_LEAD_BYTES)).toBe('zero')
    expect(rangeOf(first, 2 * MIB, 2 * MIB + ZERO_LEAD_BYTES)).toBe('zero')
  })

  it('turns itself off when the sync of its zeros fails, and writes nothing more', async () => {
    const path = patternFile()
    const failed: number[] = []
    const restore = interposeFdatasync({
      async: (fd, callback) => {
        failed.push(fd)
        callback(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }))
      },
    })
    cleanups.push(restore)
    const zeros = new ZeroAhead()
    cleanups.push(() => zeros.close())
    zeros.after(file(path, 0))
    expect(failed).toHaveLength(1)
    expect(rangeOf(path, 0, ZERO_LEAD_BYTES)).toBe('zero')
    zeros.after(file(path, 2 * MIB))
    expect(rangeOf(path, ZERO_LEAD_BYTES, FILE_BYTES)).toBe('pattern')
    expect(failed).toHaveLength(1)
  })
})

describe('a SYNC_FLUSH store', () => {
  const cleanups: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })

  // Elsewhere nothing is zeroed ahead: fallocate there leaves no blocks to convert at their first sync.
  it.runIf(process.platform === 'linux')(
    'zeroes the blocks ahead of its commit log and syncs them apart from the group commits (Linux only: where fallocate leaves unwritten blocks)',
    async () => {
      const dir = tempDir()
      const logSyncs = new Set<number>()
      const restore = interposeFdatasync({
        async: (fd, callback, original) => {
          const target = fs.readlinkSync(`/proc/self/fd/${fd}`)
          if (target.includes(`${join(dir, 'commitlog')}/`)) logSyncs.add(fd)
          original(fd, callback)
        },
      })
      cleanups.push(restore)
      const store = await MessageStore.open(dir, { flushDiskType: 'SYNC_FLUSH', mappedFileSizeCommitLog: 16 * MIB })
      const body = (n: number) => Buffer.alloc(1000, n & 0xff)
      const producers = Array.from({ length: 16 }, async (_, p) => {
        for (let n = p; n < 3000; n += 16) {
          const put = await store.putMessage({ topic: 'Z', queueId: 0, body: body(n), keys: `k${n}` })
          expect(put.status).toBe('PUT_OK')
        }
      })
      await Promise.all(producers)
      const engine = (store as unknown as { e: StoreEngine }).e
      const stage = (engine.commitLog as unknown as { stage: WriteStage }).stage
      const end = engine.commitLog.getMaxOffset()
      expect(stage.zeroAhead).not.toBeNull()
      expect(stage.zeroAhead!.zeroedBytes).toBeGreaterThanOrEqual(end - 4096)
      // The group commits sync through the store's descriptor, the zeros through their own.
      expect(logSyncs.size).toBeGreaterThanOrEqual(2)
      await store.close()

      const reopened = await MessageStore.open(dir, { flushDiskType: 'SYNC_FLUSH', mappedFileSizeCommitLog: 16 * MIB })
      cleanups.push(() => reopened.close())
      let read = 0
      for (let offset = 0; offset < 3000; ) {
        const got = reopened.getMessage('g', 'Z', 0, offset, 32)
        expect(got.status).toBe('FOUND')
        for (const m of got.messages) expect(m.body.equals(body(Number(m.keys[0].slice(1))))).toBe(true)
        read += got.messages.length
        offset = got.nextBeginOffset
      }
      expect(read).toBe(3000)
      expect(
        fs
          .readFileSync(join(dir, 'commitlog', '00000000000000000000'))
          .subarray(end, end + MIB)
          .every((b) => b === 0),
      ).toBe(true)
    },
  )
})
