// The commit-log chunks ahead of a fast writer are faulted in as huge pages (Linux, transparent huge
// pages not set to never), and a writer that slows down gets small pages back, so that a trickle of
// puts after a burst does not make each flush write a whole huge page.
import * as fs from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'

import type { Advice, MapHandle } from '../../lib/native.js'
import { native } from '../../lib/native.js'
import { HugePagesAhead, transparentHugePageBytes, type HugePageFile } from '../../lib/store/commitlog/huge-pages-ahead.js'
import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { interposeMappings, wrapMapHandle } from '../helpers/map-handle.js'
import { tempDir } from '../helpers/tmp.js'

const HUGE = transparentHugePageBytes()
const MIB = 1024 * 1024
const BODY = Buffer.alloc(256, 7)

const stores: MessageStore[] = []
const undo: (() => void)[] = []
afterEach(async () => {
  for (const restore of undo.splice(0)) restore()
  for (const store of stores.splice(0)) await store.close()
})

async function open(dir: string, options: OpenOptions): Promise<MessageStore> {
  const store = await MessageStore.open(dir, { flushDiskType: 'ASYNC_FLUSH', mappedFileSizeCommitLog: 128 * MIB, ...options })
  stores.push(store)
  return store
}

/** Puts `count` messages in batches of 1,000, as fast as the store takes them. */
async function burst(store: MessageStore, count: number): Promise<void> {
  for (let at = 0; at < count; at += 1000) {
    const batch = Array.from({ length: Math.min(1000, count - at) }, (_, i) => ({
      topic: 'burst',
      queueId: 0,
      body: BODY,
      keys: `k${at + i}`,
    }))
    for (const result of await store.putMessages(batch)) expect(result.status).toBe('PUT_OK')
  }
}

/** Bytes of the commit log's files that this process maps with huge pages (/proc/self/smaps). */
function commitLogHugeBytes(dir: string): number {
  let inLog = false
  let bytes = 0
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inLog = line.includes(`${dir}/commitlog/`)
    else if (inLog && line.startsWith('FilePmdMapped:')) bytes += Number(line.split(/\s+/)[1]) * 1024
  }
  return bytes
}

/** Bytes of page cache this process has made dirty so far (/proc/self/io). */
function dirtiedBytes(): number {
  return Number(/write_bytes: (\d+)/.exec(fs.readFileSync('/proc/self/io', 'utf8'))?.[1])
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Counts the store's huge-page advice and evictions on every mapping it makes. */
function countPageAdvice(): { huge: number; evictions: number } {
  const seen = { huge: 0, evictions: 0 }
  undo.push(
    interposeMappings((handle) =>
      wrapMapHandle(handle, {
        advise: (offset, length, advice) => {
          if (advice === 'hugepage') seen.huge++
          handle.advise(offset, length, advice)
        },
        evictAsync: (offset, length, fd) => {
          seen.evictions++
          return handle.evictAsync(offset, length, fd)
        },
      }),
    ),
  )
  return seen
}

describe('huge pages ahead of a fast commit-log writer', () => {
  const withHugePages = HUGE > 0 && fs.existsSync('/proc/self/io')

  it.runIf(withHugePages)(
    'a burst faults the chunks ahead of the writer in as huge pages, and reads its records back (Linux with transparent huge pages only)',
    async () => {
      const dir = tempDir('huge-burst')
      // No timed flush pass during the test: none finds the writer slow and gives the pages back.
      const store = await open(dir, { flushIntervalCommitLog: 60_000 })
      await burst(store, 60_000)
      await sleep(300)
      expect(commitLogHugeBytes(dir)).toBeGreaterThanOrEqual(HUGE)
      let seen = 0
      for (let offset = 0; offset < 60_000; ) {
        const got = store.getMessage('g', 'burst', 0, offset, 32)
        expect(got.status).toBe('FOUND')
        for (const m of got.messages) {
          expect(m.body.equals(BODY)).toBe(true)
          expect(m.keys).toEqual([`k${seen++}`])
        }
        offset = got.nextBeginOffset
      }
      expect(seen).toBe(60_000)
    },
  )

  it.runIf(withHugePages)(
    'a writer that slows down after a burst gets small pages back: its trickle of puts dirties pages, not a huge page per flush (Linux with transparent huge pages only)',
    async () => {
      const advice = countPageAdvice()
      const dir = tempDir('huge-trickle')
      // Every pass flushes what is dirty, so that each put of the trickle meets a clean page.
      const store = await open(dir, { flushIntervalCommitLog: 100, flushCommitLogLeastPages: 0 })
      await burst(store, 60_000)
      expect(advice.huge).toBeGreaterThan(0)
      await sleep(600)
      expect(advice.evictions).toBeGreaterThan(0)
      const before = dirtiedBytes()
      for (let i = 0; i < 30; i++) {
        expect((await store.putMessage({ topic: 'burst', queueId: 0, body: BODY })).status).toBe('PUT_OK')
        await sleep(25)
      }
      // About a page a put (the log's, its queue's), where a huge page would be 2 MiB a flush.
      expect(dirtiedBytes() - before).toBeLessThan(MIB)
    },
  )

  it('a store that syncs each group (SYNC_FLUSH) advises no huge pages', async () => {
    const advice = countPageAdvice()
    const store = await open(tempDir('huge-sync'), { flushDiskType: 'SYNC_FLUSH' })
    await burst(store, 20_000)
    expect(advice.huge).toBe(0)
  })

  it('a store whose appends go to write buffers first (transientStorePoolEnable) advises no huge pages', async () => {
    const advice = countPageAdvice()
    const store = await open(tempDir('huge-pool'), {
      transientStorePoolEnable: true,
      transientStorePoolSize: 2,
      mappedFileSizeCommitLog: 16 * MIB,
    })
    await burst(store, 30_000)
    expect(advice.huge).toBe(0)
  })
})

/** A file for the policy alone: where its writer is, and the ranges given back. */
function policyFile(fileFromOffset: number): HugePageFile & { wrotePosition: number; evicted: [number, number, Advice][] } {
  return {
    fileFromOffset,
    wrotePosition: 0,
    evicted: [],
    evictRange(from, to, advice) {
      this.evicted.push([from, to, advice])
    },
  }
}

describe('HugePagesAhead', () => {
  const PAGE = 2 * MIB
  const INTERVAL = 500
  let now = 0
  const handles: MapHandle[] = []
  afterEach(() => {
    for (const handle of handles.splice(0)) handle.close()
  })

  /** A real mapping of a real file, whose huge-page advice is recorded. */
  async function recordingHandle(advised: [number, number][]): Promise<MapHandle> {
    const dir = tempDir('huge-policy')
    const real = await native.createMapped(`${dir}/00000000000000000000`, 32 * MIB, 32 * MIB, 0, 32 * MIB, 'normal')
    handles.push(real)
    return wrapMapHandle(real, {
      advise: (offset, length, advice) => {
        if (advice === 'hugepage') advised.push([offset, offset + length])
        try {
          real.advise(offset, length, advice)
        } catch {
          // A kernel without transparent huge pages refuses the advice; the policy is what is tested.
        }
      },
    })
  }

  it('advises a step only once the writer filled the step before within an interval, page-aligned, and joins the ranges', async () => {
    const advised: [number, number][] = []
    const handle = await recordingHandle(advised)
    const policy = new HugePagesAhead(INTERVAL, PAGE, () => now)
    const file = policyFile(0)
    now = 1000
    // A file's first chunk: advised (nothing says the writer is slow), not a step of the writer.
    await policy.warmChunk(file, handle, 0, PAGE)
    // Until a pass finds the writer slow, every step is advised, in whole huge pages.
    now = 2000
    await policy.warmChunk(file, handle, PAGE, 2 * PAGE)
    now = 4000
    await policy.warmChunk(file, handle, 2 * PAGE, 3 * PAGE + 4096)
    now = 4100
    await policy.warmChunk(file, handle, 3 * PAGE + 4096, 5 * PAGE + 8192)
    expect(advised).toEqual([
      [0, PAGE],
      [PAGE, 2 * PAGE],
      [2 * PAGE, 3 * PAGE],
      [4 * PAGE, 5 * PAGE],
    ])
    // A slow pass, then steps far apart: nothing advised until two steps come within an interval.
    policy.pass(file)
    now = 5000
    policy.pass(file)
    expect(file.evicted).toEqual([
      [0, 3 * PAGE, 'nohugepage'],
      [4 * PAGE, 5 * PAGE, 'nohugepage'],
    ])
    advised.length = 0
    now = 6000
    await policy.warmChunk(file, handle, 5 * PAGE + 8192, 7 * PAGE + 8192)
    now = 7000
    await policy.warmChunk(file, handle, 7 * PAGE + 8192, 9 * PAGE + 8192)
    expect(advised).toEqual([])
    now = 7100
    await policy.warmChunk(file, handle, 9 * PAGE + 8192, 11 * PAGE + 8192)
    expect(advised).toEqual([[10 * PAGE, 11 * PAGE]])
  })

  it('gives back the ranges ahead of a slow writer: in its file from the huge page it is in, a file made ahead whole, a full file not at all', async () => {
    const handle = await recordingHandle([])
    const policy = new HugePagesAhead(INTERVAL, PAGE, () => now)
    const full = policyFile(0)
    const current = policyFile(16 * PAGE)
    const ahead = policyFile(32 * PAGE)
    now = 1000
    await policy.warmChunk(full, handle, PAGE, 4 * PAGE)
    now = 1100
    await policy.warmChunk(full, handle, 4 * PAGE, 8 * PAGE)
    now = 1200
    await policy.warmChunk(current, handle, 2 * PAGE, 6 * PAGE)
    now = 1300
    await policy.warmChunk(current, handle, 6 * PAGE, 10 * PAGE)
    await policy.warmChunk(ahead, handle, 0, PAGE)
    current.wrotePosition = 3 * PAGE + 100
    // The first pass starts the count; a second too soon after it judges nothing.
    policy.pass(current)
    now = 1400
    policy.pass(current)
    expect([full.evicted, current.evicted, ahead.evicted]).toEqual([[], [], []])
    // Half a huge page in a whole interval: slow.
    current.wrotePosition += PAGE / 2 - 200
    now = 1900
    policy.pass(current)
    expect(full.evicted).toEqual([])
    expect(current.evicted).toEqual([[3 * PAGE, 10 * PAGE, 'nohugepage']])
    expect(ahead.evicted).toEqual([[0, PAGE, 'nohugepage']])
    // Given back once: the next slow pass has nothing left.
    now = 2500
    policy.pass(current)
    expect(current.evicted.length).toBe(1)
  })

  it('keeps the huge pages of a writer that fills one per interval', async () => {
    const handle = await recordingHandle([])
    const policy = new HugePagesAhead(INTERVAL, PAGE, () => now)
    const file = policyFile(0)
    now = 1000
    await policy.warmChunk(file, handle, PAGE, 3 * PAGE)
    now = 1200
    await policy.warmChunk(file, handle, 3 * PAGE, 7 * PAGE)
    policy.pass(file)
    for (let k = 1; k <= 4; k++) {
      now += INTERVAL
      file.wrotePosition += PAGE
      policy.pass(file)
    }
    expect(file.evicted).toEqual([])
  })
})
