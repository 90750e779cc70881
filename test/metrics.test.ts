// The Prometheus exporter (`mqstore/metrics`) with a real prom-client registry over a real store:
// every metric is present, its values are those of stats(), several stores share a registry by
// labels, and scrapes after close or remove() do not throw.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Registry } from 'prom-client'

import { collectStoreMetrics } from '../lib/metrics.js'
import { MessageStore, type MessageStoreStats, type OpenOptions } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'

const small: OpenOptions = {
  mappedFileSizeCommitLog: 64 * 1024,
  mappedFileSizeConsumeQueue: 20 * 64,
  maxHashSlotNum: 64,
  maxIndexNum: 64,
  // Nothing flushes the commit log behind the test's back: flushBehindBytes stays put.
  flushCommitLogThoroughInterval: 3_600_000,
  flushIntervalCommitLog: 3_600_000,
}

const EXPECTED = [
  'open',
  'put_messages_total',
  'put_bytes_total',
  'put_failures_total',
  'get_requests_total',
  'get_messages_total',
  'put_rate',
  'get_requests_rate',
  'get_messages_rate',
  'put_latency_seconds',
  'get_latency_seconds',
  'put_latency_max_seconds',
  'get_latency_max_seconds',
  'commitlog_offset_bytes',
  'consume_queues',
  'index_files',
  'dispatch_behind_bytes',
  'dispatch_stuck',
  'dispatch_skipped_bytes_total',
  'flush_behind_bytes',
  'commit_behind_bytes',
  'group_commits_total',
  'group_commit_requests_total',
  'group_commit_seconds_total',
  'group_commit_max_seconds',
  'last_exit_clean',
  'recovery_scanned_bytes',
  'repairs_total',
  'disk_used_ratio',
  'disk_total_bytes',
  'disk_available_bytes',
  'running_flags',
  'running_flag',
  'cleanup_deleted_files_total',
  'cleanup_deleted_bytes_total',
  'cleanup_manual_passes_left',
  'cleanup_last_pass_timestamp_seconds',
  'connected_producers',
  'forwarded_puts_total',
  'schedule_pending',
  'schedule_delivered_total',
  'schedule_lag_seconds',
  'schedule_lost_to_retention_total',
  'timer_pending',
  'timer_delivered_total',
  'timer_lag_seconds',
  'ha_role',
  'ha_connected_slaves',
  'ha_slave_lag_bytes',
  'ha_master_lag_bytes',
  'ha_master_connected',
  'ha_reconnects_total',
]

/** One sample of the scrape: `name{labels}` → value, parsed from the text format. */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const at = line.lastIndexOf(' ')
    samples.set(line.slice(0, at), Number(line.slice(at + 1)))
  }
  return samples
}

function sample(samples: Map<string, number>, key: string): number {
  const value = samples.get(key)
  if (value === undefined) throw new Error(`no sample ${key} in:\n${[...samples.keys()].join('\n')}`)
  return value
}

let dir: string
let registry: Registry
const stores: MessageStore[] = []

beforeEach(() => {
  dir = tempDir()
  registry = new Registry()
})

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
})

async function open(path = dir, options: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(path, { ...small, ...options })
  stores.push(store)
  return store
}

/** Puts, reads (found and missed) and a refused put, so that every counter moves. */
async function exercise(store: MessageStore, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    expect((await store.putMessage({ topic: 't', queueId: i % 2, body: `message ${i}`, keys: [`k${i}`] })).status).toBe('PUT_OK')
  }
  expect(store.getMessage('g', 't', 0, 0, 32).status).toBe('FOUND')
  expect(store.getMessage('g', 't', 1, count, 32).status).not.toBe('FOUND')
  expect((await store.putMessage({ topic: 't', queueId: 0, body: Buffer.alloc(small.mappedFileSizeCommitLog as number) })).status).not.toBe(
    'PUT_OK',
  )
}

describe('collectStoreMetrics', () => {
  it('registers every metric, and a scrape gives the values of stats()', async () => {
    const store = await open()
    collectStoreMetrics(store, { register: registry })
    await exercise(store, 25)
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name)
    expect(names.sort()).toEqual(EXPECTED.map((n) => `mqstore_${n}`).sort())

    const stats: MessageStoreStats = store.stats()
    const s = parse(await registry.metrics())
    expect(sample(s, 'mqstore_open')).toBe(1)
    expect(sample(s, 'mqstore_put_messages_total')).toBe(stats.putMessageTimesTotal)
    expect(stats.putMessageTimesTotal).toBe(25)
    expect(sample(s, 'mqstore_put_bytes_total')).toBe(stats.putMessageSizeTotal)
    expect(sample(s, 'mqstore_put_failures_total')).toBe(stats.putMessageFailedTimes)
    expect(stats.putMessageFailedTimes).toBe(1)
    expect(sample(s, 'mqstore_get_requests_total{result="found"}')).toBe(stats.getMessageTimesTotalFound)
    expect(sample(s, 'mqstore_get_requests_total{result="miss"}')).toBe(stats.getMessageTimesTotalMiss)
    expect(stats.getMessageTimesTotalMiss).toBe(1)
    expect(sample(s, 'mqstore_get_messages_total')).toBe(stats.getMessageTransferedMsgCount)
    expect(stats.getMessageTransferedMsgCount).toBe(13)

    // The histograms: cumulative buckets ending in +Inf = count, the sum in seconds.
    expect(sample(s, 'mqstore_put_latency_seconds_bucket{le="+Inf"}')).toBe(25)
    expect(sample(s, 'mqstore_put_latency_seconds_count')).toBe(25)
    expect(sample(s, 'mqstore_put_latency_seconds_sum')).toBeCloseTo(stats.putMessageEntireTimeTotal / 1000, 9)
    expect(sample(s, 'mqstore_put_latency_seconds_bucket{le="0.001"}')).toBe(stats.putMessageDistributeTime['<=0ms'])
    expect(sample(s, 'mqstore_put_latency_seconds_bucket{le="0.01"}')).toBe(
      stats.putMessageDistributeTime['<=0ms'] + stats.putMessageDistributeTime['0~10ms'],
    )
    expect(sample(s, 'mqstore_get_latency_seconds_count')).toBe(2)
    expect(sample(s, 'mqstore_put_latency_max_seconds')).toBe(stats.putMessageEntireTimeMax / 1000)

    expect(sample(s, 'mqstore_commitlog_offset_bytes{position="max"}')).toBe(stats.commitLogMaxOffset)
    expect(sample(s, 'mqstore_commitlog_offset_bytes{position="min"}')).toBe(stats.commitLogMinOffset)
    expect(sample(s, 'mqstore_commitlog_offset_bytes{position="flushed"}')).toBe(stats.commitLogFlushedOffset)
    expect(sample(s, 'mqstore_commit_behind_bytes')).toBe(0)
    expect(sample(s, 'mqstore_flush_behind_bytes')).toBe(stats.flushBehindBytes)
    expect(stats.flushBehindBytes).toBe(stats.commitLogMaxOffset - stats.commitLogFlushedOffset)
    expect(stats.flushBehindBytes).toBeGreaterThan(0)
    expect(sample(s, 'mqstore_dispatch_behind_bytes')).toBe(stats.dispatchBehindBytes)
    expect(sample(s, 'mqstore_dispatch_stuck')).toBe(0)
    expect(sample(s, 'mqstore_consume_queues')).toBe(2)
    expect(sample(s, 'mqstore_index_files')).toBe(stats.indexFileCount)
    expect(sample(s, 'mqstore_last_exit_clean')).toBe(1)
    expect(sample(s, 'mqstore_repairs_total')).toBe(0)

    const commitLogDisk = stats.diskUsage.find((d) => d.role === 'commitLog')
    expect(commitLogDisk).toBeDefined()
    const diskLabels = `{role="commitLog",path="${commitLogDisk?.path}"}`
    expect(sample(s, `mqstore_disk_used_ratio${diskLabels}`)).toBe(commitLogDisk?.usedRatio)
    expect(sample(s, `mqstore_disk_total_bytes${diskLabels}`)).toBe(commitLogDisk?.totalBytes)
    expect(sample(s, 'mqstore_running_flags')).toBe(stats.runningFlags.value)
    expect(sample(s, 'mqstore_running_flag{flag="DISK_FULL"}')).toBe(0)
    expect(sample(s, 'mqstore_cleanup_deleted_files_total{kind="commitLog"}')).toBe(stats.cleanup.filesDeleted.commitLog)
    expect(sample(s, 'mqstore_put_rate{window="10s"}')).toBeGreaterThanOrEqual(0)
  })

  it('a running flag set on the store shows in its series', async () => {
    let usedRatio = 0.1
    const store = await open(dir, {
      diskUsage: { usage: () => ({ totalBytes: 1_000_000, availableBytes: 1_000_000 * (1 - usedRatio), usedRatio }) },
    })
    collectStoreMetrics(store, { register: registry })
    usedRatio = 0.95
    await store.runCleanupPass()
    const s = parse(await registry.metrics())
    expect(store.stats().runningFlags.flags.map((f) => f.name)).toContain('DISK_FULL')
    expect(sample(s, 'mqstore_running_flag{flag="DISK_FULL"}')).toBe(1)
    expect(sample(s, 'mqstore_running_flags')).toBe(16)
    expect(sample(s, `mqstore_disk_used_ratio{role="commitLog",path="${store.stats().diskUsage[0].path}"}`)).toBe(0.95)
  })

  it('a scrape after close does not throw: open is 0, the figures are those at close', async () => {
    const store = await open()
    collectStoreMetrics(store, { register: registry })
    await exercise(store, 3)
    await store.close()
    const atClose = store.stats()
    const s = parse(await registry.metrics())
    expect(sample(s, 'mqstore_open')).toBe(0)
    expect(sample(s, 'mqstore_put_messages_total')).toBe(3)
    expect(sample(s, 'mqstore_put_latency_seconds_count')).toBe(3)
    // Flushed at close: nothing is behind, and the offsets are those of the log as closed.
    expect(sample(s, 'mqstore_flush_behind_bytes')).toBe(0)
    expect(sample(s, 'mqstore_commitlog_offset_bytes{position="max"}')).toBe(atClose.commitLogMaxOffset)
    expect(atClose.commitLogMinOffset).toBeLessThanOrEqual(atClose.commitLogMaxOffset)
  })

  it('a source whose stats() throws leaves its series out of the scrape, and the scrape goes on', async () => {
    const store = await open()
    collectStoreMetrics(store, { register: registry, labels: { store: 'real' } })
    collectStoreMetrics(
      {
        isClosed: false,
        stats: () => {
          throw new Error('no figures')
        },
      },
      { register: registry, labels: { store: 'broken' } },
    )
    await exercise(store, 1)
    const s = parse(await registry.metrics())
    expect(sample(s, 'mqstore_put_messages_total{store="real"}')).toBe(1)
    expect(sample(s, 'mqstore_open{store="broken"}')).toBe(1)
    expect([...s.keys()].filter((k) => k.includes('broken'))).toEqual(['mqstore_open{store="broken"}'])
  })

  it('several stores share a registry by labels; remove() takes one out, and the metrics with the last', async () => {
    const a = await open(tempDir())
    const b = await open(tempDir())
    const exportA = collectStoreMetrics(a, { register: registry, labels: { store: 'a' } })
    const exportB = collectStoreMetrics(b, { register: registry, labels: { store: 'b' } })
    await exercise(a, 4)
    await exercise(b, 7)
    let s = parse(await registry.metrics())
    expect(sample(s, 'mqstore_put_messages_total{store="a"}')).toBe(4)
    expect(sample(s, 'mqstore_put_messages_total{store="b"}')).toBe(7)
    expect(sample(s, 'mqstore_put_latency_seconds_count{store="b"}')).toBe(7)
    expect(sample(s, 'mqstore_get_requests_total{store="a",result="found"}')).toBe(1)

    exportA.remove()
    exportA.remove()
    s = parse(await registry.metrics())
    expect(s.has('mqstore_put_messages_total{store="a"}')).toBe(false)
    expect(sample(s, 'mqstore_put_messages_total{store="b"}')).toBe(7)
    exportB.remove()
    expect(await registry.getMetricsAsJSON()).toEqual([])
    // The names are free again.
    collectStoreMetrics(a, { register: registry })
    expect(parse(await registry.metrics()).get('mqstore_put_messages_total')).toBe(4)
    // And after registry.clear(), a store can be exported again; the old handle leaves it alone.
    const before = collectStoreMetrics(b, { register: registry, prefix: 'cleared_' })
    registry.clear()
    collectStoreMetrics(b, { register: registry, prefix: 'cleared_' })
    before.remove()
    expect(parse(await registry.metrics()).get('cleared_put_messages_total')).toBe(7)
  })

  it('a prefix of its own keeps two exports apart', async () => {
    const store = await open()
    collectStoreMetrics(store, { register: registry })
    collectStoreMetrics(store, { register: registry, prefix: 'orders_store_' })
    await exercise(store, 2)
    const s = parse(await registry.metrics())
    expect(sample(s, 'orders_store_put_messages_total')).toBe(sample(s, 'mqstore_put_messages_total'))
  })

  it('refuses what it cannot export with a TypeError', async () => {
    const store = await open()
    expect(() => collectStoreMetrics(null as never)).toThrow(TypeError)
    expect(() => collectStoreMetrics(store, { register: registry, prefix: 'bad prefix' })).toThrow(/prefix/)
    expect(() => collectStoreMetrics(store, { register: registry, labels: { store: 1 as never } })).toThrow(/label store/)
    expect(() => collectStoreMetrics(store, { register: registry, labels: { 'a-b': 'x' } })).toThrow(/not a label name/)
    expect(() => collectStoreMetrics(store, { register: registry, labels: { window: 'x' } })).toThrow(/metrics use themselves/)
    expect(await registry.getMetricsAsJSON()).toEqual([])
    collectStoreMetrics(store, { register: registry, labels: { store: 'a' } })
    expect(() => collectStoreMetrics(store, { register: registry, labels: { region: 'eu' } })).toThrow(/same label names/)
    expect(() => collectStoreMetrics(store, { register: registry, labels: { store: 'a' } })).toThrow(/already exported/)
  })
})
