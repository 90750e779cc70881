// stats(): the figures added for observability (get totals, latency sums and histograms, flush
// lag, the committed offset, dispatch state), stats() after close, and docs/api.md documenting
// every field stats() returns and every metric mqstore/metrics registers.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { Registry } from 'prom-client'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { collectStoreMetrics } from '../lib/metrics.js'
import { MessageStore, type OpenOptions, type Repair } from '../lib/store/message-store.js'
import { LATENCY_LABELS } from '../lib/store/store-stats.js'
import { OFFSET_PHYSICALOFFSET } from '../lib/store/commitlog/record.js'
import { repoRoot, tempDir } from './helpers/tmp.js'

const small: OpenOptions = {
  mappedFileSizeCommitLog: 64 * 1024,
  mappedFileSizeConsumeQueue: 20 * 64,
  maxHashSlotNum: 64,
  maxIndexNum: 64,
  flushIntervalCommitLog: 3_600_000,
  flushCommitLogThoroughInterval: 3_600_000,
}

let dir: string
const stores: MessageStore[] = []
beforeEach(() => {
  dir = tempDir()
})
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
})
async function open(options: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, { ...small, ...options })
  stores.push(store)
  return store
}

const sum = (record: Record<string, number>) => Object.values(record).reduce((a, b) => a + b, 0)

describe('stats()', () => {
  it('counts gets found and missed, messages returned, and latency per bucket for puts and gets', async () => {
    const store = await open()
    // One batch of 5 and 3 single puts: the put histogram counts messages, not calls.
    const batch = await store.putMessages([0, 1, 2, 3, 4].map((i) => ({ topic: 't', queueId: 0, body: `b${i}` })))
    expect(batch.every((r) => r.status === 'PUT_OK')).toBe(true)
    for (let i = 0; i < 3; i++) await store.putMessage({ topic: 't', queueId: 1, body: `s${i}` })
    expect(store.getMessage('g', 't', 0, 0, 2).messages).toHaveLength(2)
    expect(store.getMessage('g', 't', 1, 0, 32).messages).toHaveLength(3)
    expect(store.getMessage('g', 't', 1, 3, 32).messages).toHaveLength(0)

    const s = store.stats()
    expect(s.putMessageTimesTotal).toBe(8)
    expect(Object.keys(s.putMessageDistributeTime)).toEqual(LATENCY_LABELS)
    expect(Object.keys(s.getMessageDistributeTime)).toEqual(LATENCY_LABELS)
    expect(sum(s.putMessageDistributeTime)).toBe(8)
    expect(s.getMessageTimesTotalFound).toBe(2)
    expect(s.getMessageTimesTotalMiss).toBe(1)
    expect(s.getMessageTransferedMsgCount).toBe(5)
    expect(sum(s.getMessageDistributeTime)).toBe(3)
    // Sums are at least the maxima and at most every call taking the longest time.
    expect(s.putMessageEntireTimeTotal).toBeGreaterThanOrEqual(s.putMessageEntireTimeMax)
    expect(s.putMessageEntireTimeTotal).toBeLessThanOrEqual(8 * s.putMessageEntireTimeMax)
    expect(s.getMessageEntireTimeTotal).toBeLessThanOrEqual(3 * s.getMessageEntireTimeMax)
    expect(s.dispatchStuck).toBe(false)
    expect(s.dispatchSkippedRanges).toBe(0)
  })

  it('flushBehindBytes is what is in the files and not flushed; without write buffers nothing waits to be committed', async () => {
    const store = await open()
    await store.putMessage({ topic: 't', queueId: 0, body: 'x'.repeat(100) })
    const s = store.stats()
    expect(s.flushBehindBytes).toBe(s.commitLogMaxOffset - s.commitLogFlushedOffset)
    expect(s.flushBehindBytes).toBeGreaterThan(0)
    expect(s.commitBehindBytes).toBe(0)
  })

  it('with the transient store pool, commitBehindBytes counts what waits in the write buffer, until it is committed', async () => {
    const store = await open({
      transientStorePoolEnable: true,
      transientStorePoolSize: 2,
      commitIntervalCommitLog: 3_600_000,
      commitCommitLogThoroughInterval: 3_600_000,
    })
    const put = await store.putMessage({ topic: 't', queueId: 0, body: 'in the write buffer' })
    expect(put.status).toBe('PUT_OK')
    expect(store.stats().commitBehindBytes).toBe(put.wroteBytes)
    // Not in the files yet: the max offset (what readers can reach) has not moved.
    expect(store.stats().commitLogMaxOffset).toBe(0)
    await store.close()
    expect(store.stats().commitBehindBytes).toBe(0)
    expect(store.stats().commitLogMaxOffset).toBe(put.wroteBytes)
  })

  it('counts SYNC_FLUSH group commits, the puts they answered and their time; ASYNC_FLUSH has none', async () => {
    const store = await open({ flushDiskType: 'SYNC_FLUSH' })
    // Eight producers at once join one group; a batch is one waiting put; a lone put its own group.
    const together = await Promise.all(Array.from({ length: 8 }, (_, i) => store.putMessage({ topic: 't', queueId: 0, body: `p${i}` })))
    expect(together.every((r) => r.status === 'PUT_OK')).toBe(true)
    const afterTogether = store.stats()
    expect(afterTogether.groupCommitTimesTotal).toBe(1)
    expect(afterTogether.groupCommitRequestsTotal).toBe(8)
    await store.putMessages([0, 1, 2].map((i) => ({ topic: 't', queueId: 1, body: `b${i}` })))
    await store.putMessage({ topic: 't', queueId: 1, body: 'alone' })
    const s = store.stats()
    expect(s.groupCommitTimesTotal).toBe(3)
    expect(s.groupCommitRequestsTotal).toBe(10)
    // A sync takes time; the sum is at least the longest and at most every one taking it.
    expect(s.groupCommitMicrosMax).toBeGreaterThan(0)
    expect(s.groupCommitMicrosTotal).toBeGreaterThanOrEqual(s.groupCommitMicrosMax)
    expect(s.groupCommitMicrosTotal).toBeLessThanOrEqual(3 * s.groupCommitMicrosMax)
    expect(Number.isInteger(s.groupCommitMicrosTotal)).toBe(true)
    await store.close()

    dir = tempDir()
    const quiet = await open({ flushDiskType: 'ASYNC_FLUSH' })
    await quiet.putMessage({ topic: 't', queueId: 0, body: 'x' })
    const a = quiet.stats()
    expect([a.groupCommitTimesTotal, a.groupCommitRequestsTotal, a.groupCommitMicrosTotal, a.groupCommitMicrosMax]).toEqual([0, 0, 0, 0])
  })

  it('a record whose physical-offset field was damaged is skipped by dispatch when the consume queues are rebuilt, and counted', async () => {
    const first = await open()
    const puts = []
    for (let i = 0; i < 3; i++) puts.push(await first.putMessage({ topic: 't', queueId: 0, body: `m${i}` }))
    await first.close()
    // The second record claims to sit elsewhere (its CRC covers the body only, so recovery keeps
    // it); the consume queues are gone, so open rebuilds them by dispatching from the log.
    const file = join(dir, 'commitlog', '00000000000000000000')
    const bytes = fs.readFileSync(file)
    bytes.writeBigInt64BE(999_999n, puts[1].wroteOffset + OFFSET_PHYSICALOFFSET)
    fs.writeFileSync(file, bytes)
    fs.rmSync(join(dir, 'consumequeue'), { recursive: true })
    const lines: string[] = []
    const store = await open({ logger: (level, message) => lines.push(`${level} ${message}`) })
    const s = store.stats()
    expect(s.dispatchSkippedRanges).toBe(1)
    // Dispatch skips the rest of the readable view: the damaged record and the one after it.
    expect(s.dispatchSkippedBytes).toBe(puts[1].wroteBytes + puts[2].wroteBytes)
    expect(lines.filter((l) => l.startsWith('error dispatch skipped'))).toHaveLength(1)
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(1)
  })

  it('after close gives the figures at close, flushed, and a copy each time', async () => {
    const store = await open()
    await store.putMessage({ topic: 't', queueId: 0, body: 'x' })
    await store.close()
    const first = store.stats()
    expect(first.putMessageTimesTotal).toBe(1)
    expect(first.flushBehindBytes).toBe(0)
    expect(first.commitLogMinOffset).toBe(0)
    expect(first.commitLogFlushedOffset).toBe(first.commitLogMaxOffset)
    // The type is read-only; a caller that writes anyway changes its copy only.
    ;(first.repairs as Repair[]).push({ action: 'mutated', reason: 'by the caller' })
    expect(store.stats().repairs).toEqual([])
  })
})

describe('docs/api.md', () => {
  const api = fs.readFileSync(join(repoRoot, 'docs', 'api.md'), 'utf8')
  const section = (heading: string) => {
    const start = api.indexOf(`\n## ${heading}`)
    expect(start, `section ${heading}`).toBeGreaterThan(0)
    const end = api.indexOf('\n## ', start + 1)
    return api.slice(start, end < 0 ? undefined : end)
  }

  it('documents every field stats() returns, and those of its cleanup group', async () => {
    const store = await open()
    const text = section('store.stats()')
    const stats = store.stats()
    const missing = Object.keys(stats).filter((field) => !text.includes(`\`${field}\``))
    const cleanupMissing = Object.keys(stats.cleanup).filter((field) => !text.includes(`\`cleanup.${field}\``))
    expect([...missing, ...cleanupMissing]).toEqual([])
  })

  it('lists every metric mqstore/metrics registers', async () => {
    const store = await open()
    const registry = new Registry()
    collectStoreMetrics(store, { register: registry })
    const text = section('Prometheus metrics')
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name.replace(/^mqstore_/, ''))
    expect(names.filter((name) => !text.includes(`\`${name}\``))).toEqual([])
  })
})
