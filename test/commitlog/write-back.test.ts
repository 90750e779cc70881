// During a burst of puts the commit log starts the write-back of the pages the writer has left, and
// drops them from its mapping first (madvise DONTNEED): cleaning a page that is still mapped would
// write-protect it with a TLB shootdown per page. The bytes stay in the page cache, so every
// message reads back, before and after a reopen and after the writer is killed.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { distEntry, runNodeScript, tempDir } from '../helpers/tmp.js'

const LOG_FILE = 16 << 20
const OPTIONS: OpenOptions = {
  flushDiskType: 'ASYNC_FLUSH',
  mappedFileSizeCommitLog: LOG_FILE,
  messageIndexEnable: false,
  // No timer-driven flush during the test: only the burst's own write-back cleans pages.
  flushIntervalCommitLog: 60_000,
  flushCommitLogThoroughInterval: 60_000,
}
const BODY = 1000

/** Resident bytes of this process's shared mapping of `file` (/proc/self/smaps): the pages it maps now. */
function mappedBytes(file: string): number {
  const smaps = fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')
  let bytes = 0
  for (let i = 0; i < smaps.length; i++) {
    if (!smaps[i].endsWith(file) || !smaps[i].includes(' rw-s ')) continue
    for (let j = i + 1; j < smaps.length && !/^[0-9a-f]+-[0-9a-f]+ /.test(smaps[j]); j++) {
      const rss = /^Rss:\s+(\d+) kB/.exec(smaps[j])
      if (rss !== null) bytes += Number(rss[1]) * 1024
    }
  }
  return bytes
}

function body(n: number): Buffer {
  const b = Buffer.alloc(BODY, n & 0xff)
  b.writeUInt32BE(n, 0)
  return b
}

/** Reads queue burst/0 from its start: `count` messages, each with the body it was put with. */
function expectAllBack(store: MessageStore, count: number): void {
  let seen = 0
  for (let offset = 0; offset < count; ) {
    const got = store.getMessage('g', 'burst', 0, offset, 32)
    expect(got.status).toBe('FOUND')
    for (const m of got.messages) {
      expect(Buffer.from(m.body).equals(body(seen))).toBe(true)
      seen++
    }
    offset = got.nextBeginOffset
  }
  expect(seen).toBe(count)
}

const stores: MessageStore[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
})

describe.skipIf(process.platform !== 'linux')('the commit log during a burst (Linux: smaps and sync_file_range)', () => {
  it('drops the pages it wrote back from its mapping, and every message reads back, also after a reopen', async () => {
    const dir = tempDir('mqstore-write-back-')
    let store = await MessageStore.open(dir, OPTIONS)
    stores.push(store)
    const count = 8000 // about 9 MiB of records, in batches that never yield to the event loop's timers
    for (let done = 0; done < count; done += 500) {
      const batch = Array.from({ length: 500 }, (_, k) => ({ topic: 'burst', queueId: 0, body: body(done + k) }))
      for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
    }
    const written = store.stats().commitLogMaxOffset
    expect(written).toBeGreaterThan(8 << 20)
    const logFile = join(dir, 'commitlog', '00000000000000000000')
    // Without the drop every page written would still be mapped; with it, about the last step's
    // (the drops run on the libuv pool: the last may still be queued when the put resolves).
    await vi.waitFor(() => expect(mappedBytes(logFile)).toBeLessThan(written / 2), { timeout: 5000, interval: 10 })

    expectAllBack(store, count)
    await stores.pop()?.close()
    store = await MessageStore.open(dir, OPTIONS)
    stores.push(store)
    expectAllBack(store, count)
  })

  it('a writer killed right after a burst loses nothing it acknowledged', async () => {
    const dir = tempDir('mqstore-write-back-kill-')
    const result = runNodeScript(
      `
      import { MessageStore } from ${JSON.stringify(distEntry)}
      const store = await MessageStore.open(process.argv[2], ${JSON.stringify(OPTIONS)})
      let acked = 0
      for (let done = 0; done < 8000; done += 500) {
        const batch = Array.from({ length: 500 }, (_, k) => {
          const b = Buffer.alloc(${BODY}, (done + k) & 0xff)
          b.writeUInt32BE(done + k, 0)
          return { topic: 'burst', queueId: 0, body: b }
        })
        for (const r of await store.putMessages(batch)) if (r.status === 'PUT_OK') acked++
      }
      process.stdout.write(String(acked) + '\\n')
      process.kill(process.pid, 'SIGKILL')
      `,
      [dir],
    )
    expect(result.signal).toBe('SIGKILL')
    const acked = Number(result.stdout.trim())
    expect(acked).toBe(8000)
    const store = await MessageStore.open(dir, OPTIONS)
    stores.push(store)
    expect(store.getMaxOffsetInQueue('burst', 0)).toBe(acked)
    expectAllBack(store, acked)
  })
})
