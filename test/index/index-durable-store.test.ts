// After a power cut the store keeps what its index mark names of the index file being written
// (lib/store/index/index-durable.ts) and indexes only the records after it; without a mark, or with
// one the file does not bear out, it rebuilds the file as before. Every key is found either way.
// The cut is simulated on a copy of a live store: the index entries past the mark are lost
// (zeros), the slot table and the header's counts hold garbage (never synced in a burst), and the
// abort file names no boot.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { readMark } from '../../lib/store/index/index-durable.js'
import { indexEntriesStart, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE } from '../../lib/store/index/index-file.js'
import { tempDir } from '../helpers/tmp.js'

const SLOTS = 20_000
const OPTIONS: OpenOptions = {
  flushDiskType: 'ASYNC_FLUSH',
  mappedFileSizeCommitLog: 32 * 1024 * 1024,
  maxHashSlotNum: SLOTS,
  maxIndexNum: 200_000,
}
// More keys than a burst puts between two syncs of the index's entries (65,536).
const COUNT = 80_000

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

/** A store that put COUNT keyed messages in one burst, copied while open (a crash image), then closed. */
async function crashImage(): Promise<string> {
  const dir = tempDir('mqstore-indexmark-')
  const image = `${dir}-image`
  dirs.push(dir, image)
  const store = await MessageStore.open(dir, OPTIONS)
  try {
    for (let n = 0; n < COUNT; n += 1000) {
      const batch = Array.from({ length: 1000 }, (_, k) => ({
        topic: 't',
        queueId: 0,
        body: Buffer.from(`m${n + k}`),
        keys: [`k${n + k}`],
      }))
      for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
    }
    await vi.waitFor(() => expect(readMark(join(dir, 'indexmark'))).not.toBeNull(), { timeout: 10_000, interval: 10 })
    fs.cpSync(dir, image, { recursive: true })
  } finally {
    await store.close()
  }
  return image
}

/** What a power cut leaves of `image` (see the file comment); returns the index file's name. */
function powerCut(image: string, keptEntries: number): string {
  // The oldest: the next file may be there too, made ahead (index-file-ahead.ts; the reopen drops it).
  const [name] = fs
    .readdirSync(join(image, 'index'))
    .filter((file) => !file.endsWith('.tmp'))
    .sort()
  const path = join(image, 'index', name)
  const bytes = fs.readFileSync(path)
  bytes.fill(0, indexEntriesStart(SLOTS) + (keptEntries + 1) * INDEX_ENTRY_SIZE)
  for (let pos = INDEX_HEADER_SIZE; pos < indexEntriesStart(SLOTS); pos += 4) bytes.writeInt32BE((pos * 7919) % 150_000, pos)
  bytes.writeInt32BE(199_999, 36)
  fs.writeFileSync(path, bytes)
  fs.writeFileSync(join(image, 'abort'), '')
  return name
}

async function expectEveryKey(image: string): Promise<string[]> {
  const store = await MessageStore.open(image, OPTIONS)
  try {
    for (let n = 0; n < COUNT; n++) {
      const found = store.queryMessage('t', `k${n}`, 4).messages
      expect(
        found.map((m) => m.body.toString()),
        `k${n}`,
      ).toEqual([`m${n}`])
    }
  } finally {
    await store.close()
  }
  return fs.readdirSync(join(image, 'index'))
}

describe('the index file being written, after a power cut', () => {
  it('keeps the entries its mark names and indexes only the records after them', async () => {
    const image = await crashImage()
    const mark = readMark(join(image, 'indexmark'))!
    expect(mark.entries).toBeGreaterThan(60_000)
    expect(mark.entries).toBeLessThan(COUNT)
    const name = powerCut(image, mark.entries)
    // The same file, not a rebuilt one (a new file would be named by the time it was created).
    expect(await expectEveryKey(image)).toEqual([name])
  }, 60_000)

  it('rebuilds the file without a mark, or with one that names entries the cut lost', async () => {
    const image = await crashImage()
    const mark = readMark(join(image, 'indexmark'))!
    const name = powerCut(image, mark.entries - 5000)
    expect(await expectEveryKey(image)).not.toEqual([name])

    const unmarked = await crashImage()
    const before = powerCut(unmarked, readMark(join(unmarked, 'indexmark'))!.entries)
    fs.rmSync(join(unmarked, 'indexmark'))
    expect(await expectEveryKey(unmarked)).not.toEqual([before])
  }, 60_000)
})
