// A reader's key lookups and the writer's index folder: a lookup looks at the folder (a stat) unless
// the last look is younger than 100 ms and the newest file then had room for ROLL_MARGIN_ENTRIES
// more keys, since the writer starts a new file only once the newest is full. The clock is the
// lookup's `now`; the files are a real writer's, and the "new" file is one of them linked under a
// later name, so that a lookup that lists the folder again finds each of its keys twice.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { ROLL_MARGIN_ENTRIES, ReadOnlyIndex } from '../../lib/store/sharing/read-only-index.js'
import { tempDir } from '../helpers/tmp.js'

const indexes: ReadOnlyIndex[] = []
afterEach(() => {
  for (const index of indexes.splice(0)) index.close()
})

/** A store with key `k<i>` put for each of `count` messages, closed; its index folder. */
async function indexFolder(options: OpenOptions, count: number): Promise<{ dir: string; offsets: number[] }> {
  const dir = tempDir()
  const store = await MessageStore.open(dir, { mappedFileSizeCommitLog: 1024 * 1024, ...options })
  const results = await store.putMessages(
    Array.from({ length: count }, (_, i) => ({ topic: 't', queueId: 0, body: `m${i}`, keys: [`k${i}`] })),
  )
  await store.close()
  for (const result of results) expect(result.status).toBe('PUT_OK')
  return { dir: join(dir, 'index'), offsets: results.map((r) => r.wroteOffset) }
}

function reader(dir: string, options: { maxHashSlotNum: number; maxIndexNum: number }): ReadOnlyIndex {
  const index = new ReadOnlyIndex(dir, options)
  indexes.push(index)
  return index
}

function offsetsOf(index: ReadOnlyIndex, key: string, now: number): number[] {
  const seen: number[] = []
  index.forEachOffset(
    't',
    key,
    64,
    (offset) => {
      seen.push(offset)
      return false
    },
    now,
  )
  return seen
}

/** Links the folder's only index file under a name that sorts after it: a file the writer "started". */
function startAnotherFile(dir: string): void {
  const [name] = fs.readdirSync(dir)
  fs.linkSync(join(dir, name), join(dir, '29991231235959999'))
}

/**
 * A writer's index of five keys with room for `room` more entries than the margin (negative:
 * fewer), a reader of it whose first lookup of `key` (at 1,000 ms) found the one offset, and a file
 * the writer "started" since.
 */
async function lookedUpBeforeAnotherFile(room: number, key: number) {
  const dims = { maxHashSlotNum: 1024, maxIndexNum: ROLL_MARGIN_ENTRIES + room }
  const { dir, offsets } = await indexFolder(dims, 5)
  const index = reader(dir, dims)
  expect(offsetsOf(index, `k${key}`, 1_000)).toEqual([offsets[key]])
  startAnotherFile(dir)
  return { dir, dims, index, offset: offsets[key] }
}

describe("a reader's index lookups and the folder", () => {
  it('goes on with a listing younger than 100 ms while the newest file had room for the margin, and lists again after', async () => {
    const { index, offset } = await lookedUpBeforeAnotherFile(1000, 3)
    expect(offsetsOf(index, 'k3', 1_050)).toEqual([offset])
    expect(offsetsOf(index, 'k3', 1_099)).toEqual([offset])
    expect(offsetsOf(index, 'k3', 1_100)).toEqual([offset, offset])
  })

  it('looks at the folder at every lookup when the newest file had less room than the margin', async () => {
    const { index, offset } = await lookedUpBeforeAnotherFile(-1000, 1)
    expect(offsetsOf(index, 'k1', 1_001)).toEqual([offset, offset])
  })

  it('looks at the folder again when the clock went back, and when the first look found no file', async () => {
    const { dir, dims, index, offset } = await lookedUpBeforeAnotherFile(1000, 2)
    expect(offsetsOf(index, 'k2', 999)).toEqual([offset, offset])

    // A reader that looked before the writer made its first index file sees it at the next lookup.
    const empty = join(tempDir(), 'index')
    const early = reader(empty, dims)
    expect(offsetsOf(early, 'k2', 1_000)).toEqual([])
    fs.mkdirSync(empty)
    fs.linkSync(join(dir, fs.readdirSync(dir)[0]), join(empty, '20260101000000000'))
    expect(offsetsOf(early, 'k2', 1_001)).toEqual([offset])
  })
})
