// The mqstore side of the benchmark: the store as an application would use it, through the
// public API only.
import { spawnSync } from 'node:child_process'
import { closeSync, cpSync, openSync, readdirSync, readFileSync, readSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { MessageStore, type OpenOptions, type QueryMessageResult } from '../lib/index.js'
import { followLatency } from './following.js'
import { forwardedPuts } from './forwarding.js'
import { replicatedPuts } from './replicating.js'
import { timerDelivery } from './timers.js'
import {
  BODY_SIZE,
  benchMessage,
  check,
  diskUsage,
  keyOf,
  log,
  LOOKUP_WARMUP,
  makeBodies,
  makeBody,
  makeTempDir,
  now,
  PUT_BATCH,
  PUT_WARMUP,
  PUT_WARMUP_STORES,
  removeDir,
  syncTree,
  runProducers,
  SYNC_WARMUP,
  sampleIndexes,
  SCAN_BATCH,
  SCAN_QUEUE,
  SCAN_RUNS,
  SCAN_TOPIC,
  scannedQueueSize,
  secondsSince,
  timeScan,
  summarizeNs,
  timeLookups,
  lookupResult,
  type LookupResult,
  SYNC_PRODUCERS,
  topicOf,
  addFaultsSince,
  jsThreadFaults,
  threadClock,
  threadTimesSince,
  type BenchConfig,
  type BigStoreResult,
  type EngineResult,
  type PhaseWindow,
  type ScanResult,
  putInBatches,
  windowSince,
} from './workload.js'

const GROUP = 'bench'

/**
 * The embedded defaults (128 MiB commit-log files, 1M slots / 4M entries per index file), with
 * the safe read defaults on: each read copies what it serves, and checks body CRCs.
 */
const COMMON: OpenOptions = {
  messageIndexEnable: true,
  copyMessageBody: true,
  checkCRCOnRead: true,
}

/** The options of the put phase's store (ASYNC_FLUSH, the safe read defaults, index on). */
export const MQSTORE_OPTIONS: OpenOptions = { ...COMMON, flushDiskType: 'ASYNC_FLUSH' }

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string }
    return pkg.version ?? '?'
  } catch {
    return '?'
  }
}

/** Puts messages 0 .. count - 1 in batches, as the put phase times it. */
function putAll(store: MessageStore, count: number): Promise<void> {
  return putInBatches(count, (batch) => store.putMessages(batch))
}

/** The untimed warm-up of the put path (PUT_WARMUP), in a scratch store. */
async function warmUpPuts(options: OpenOptions, count: number): Promise<void> {
  const dir = makeTempDir('mqstore-warmup')
  try {
    const store = await MessageStore.open(dir, options)
    try {
      await putAll(store, count)
    } finally {
      await store.close()
    }
  } finally {
    removeDir(dir)
  }
}

export async function runMqstore(config: BenchConfig): Promise<EngineResult> {
  const windows: PhaseWindow[] = []
  const result: EngineResult = { engine: 'mqstore', version: packageVersion(), windows }
  const phases = config.phases
  const options: OpenOptions = MQSTORE_OPTIONS

  if (phases.has('put') || phases.has('scan') || phases.has('lookup') || phases.has('reopen')) {
    for (let k = 0; k < PUT_WARMUP_STORES; k++) await warmUpPuts(options, Math.min(PUT_WARMUP, config.count))
    const dir = makeTempDir('mqstore')
    try {
      let store = await MessageStore.open(dir, options)
      try {
        // (1) put
        log(`mqstore: put ${config.count} messages (ASYNC_FLUSH, batches of ${PUT_BATCH})`)
        const started = now()
        const putFaults = jsThreadFaults()
        const putClock = threadClock()
        await putAll(store, config.count)
        // Reading the queue size makes the store dispatch whatever is left (consume queues and
        // the key index), so the time covers everything a reader needs.
        const scanned = store.getMaxOffsetInQueue(SCAN_TOPIC, SCAN_QUEUE)
        const putSeconds = secondsSince(started)
        const putThreads = threadTimesSince(putClock)
        windows.push(windowSince('put', started))
        check(scanned === scannedQueueSize(config.count), `queue holds ${scanned} messages after put`)
        result.put = {
          count: config.count,
          seconds: putSeconds,
          rate: config.count / putSeconds,
          diskBytes: diskUsage(dir),
          bodyBytes: config.count * BODY_SIZE,
          rssBytes: process.memoryUsage().rss,
          jsThreadFaults: addFaultsSince(0, putFaults),
          threads: putThreads,
        }

        // (2) ordered scan of one queue
        if (phases.has('scan')) {
          const expected = scannedQueueSize(config.count)
          log(`mqstore: scan ${SCAN_TOPIC}/${SCAN_QUEUE} (${expected} messages) x${SCAN_RUNS}, twice`)
          const scanStarted = now()
          const writer = store
          result.scan = await timeScan(expected, () => scanPass(writer, expected))
          windows.push(windowSince('scan, getMessage', scanStarted))

          log(`mqstore: consume() ${SCAN_TOPIC}/${SCAN_QUEUE} (${expected} messages) x${SCAN_RUNS}, twice`)
          const consumeStarted = now()
          result.scanConsume = await timeScan(expected, async () => {
            let seen = 0
            let bytes = 0
            const subscription = store.consume({ group: GROUP, topic: SCAN_TOPIC, queueId: SCAN_QUEUE, from: 'earliest' })
            for await (const m of subscription) {
              if (m.queueOffset !== seen) throw new Error(`consume out of order: ${m.queueOffset} at ${seen}`)
              bytes += m.body.length
              if (++seen === expected) break
            }
            check(seen === expected && bytes === expected * BODY_SIZE, `consume saw ${seen} messages, ${bytes} bytes`)
          })
          windows.push(windowSince('scan, consume()', consumeStarted))

          // The same reads by a read-only opener (another process's view: pread, no mapping).
          log(`mqstore: a reader's scan of ${SCAN_TOPIC}/${SCAN_QUEUE} x${SCAN_RUNS}, twice`)
          const reader = await MessageStore.open(dir, { readOnly: true })
          try {
            const readerStarted = now()
            result.scanReader = await timeScan(expected, () => scanPass(reader, expected))
            windows.push(windowSince("scan, a reader's getMessage", readerStarted))
          } finally {
            await reader.close()
          }
        }

        // (3) random lookups by key
        if (phases.has('lookup')) {
          const n = config.lookups
          log(`mqstore: ${n} random lookups by key`)
          const sample = lookupSample(config)
          const { keys, topics } = sample
          const isRight = rightBody(sample.picks)
          result.lookup = timeKeyLookups(store, config, sample, windows, 'lookup')

          // The first keys again through a read-only opener (its lookups pread what they touch).
          const readerLookups = Math.min(n, READER_LOOKUPS)
          log(`mqstore: ${readerLookups} of those lookups by a reader`)
          const reader = await MessageStore.open(dir, { readOnly: true })
          try {
            const byReader = (j: number) => reader.queryMessage(topics[j], keys[j], 32, 0, Number.MAX_SAFE_INTEGER)
            // Untimed first: keys of the phase's sample after the ones timed (none when it has no more).
            for (let j = n - 1; j >= Math.max(readerLookups, n - LOOKUP_WARMUP); j--) byReader(j)
            const r0 = now()
            const got = timeLookups(readerLookups, byReader, isRight)
            const readerSeconds = secondsSince(r0)
            windows.push(windowSince("lookup, a reader's", r0))
            check(got.found === readerLookups, `a reader's lookups found ${got.found} of ${readerLookups}`)
            result.lookupReader = {
              count: readerLookups,
              found: got.found,
              seconds: readerSeconds,
              rate: readerLookups / readerSeconds,
              latencyUs: summarizeNs(got.latency),
            }
          } finally {
            await reader.close()
          }
        }

        // (4) reopen
        if (phases.has('reopen')) {
          log('mqstore: close + open')
          const t0 = now()
          await store.close()
          const t1 = now()
          windows.push(windowSince('close', t0))
          store = await MessageStore.open(dir, options)
          const t2 = now()
          windows.push(windowSince('open', t1))
          const size = store.getMaxOffsetInQueue(SCAN_TOPIC, SCAN_QUEUE)
          check(size === scannedQueueSize(config.count), `queue holds ${size} messages after reopen`)
          check(store.stats().lastExitOK, 'reopen did not see a clean shutdown')
          await store.close()
          const t3 = now()
          store = await MessageStore.open(dir, options)
          const secondOpenMs = Number(now() - t3) / 1e6
          check(store.stats().lastExitOK, 'the second reopen did not see a clean shutdown')
          const closeMs = Number(t1 - t0) / 1e6
          const openMs = Number(t2 - t1) / 1e6
          result.reopen = { closeMs, openMs, totalMs: closeMs + openMs, secondOpenMs }
        }

        // (4b) the scanned queue read and the lookup phase's keys looked up zero-copy
        // (copyMessageBody: false): the store opened so.
        if (phases.has('scan') || phases.has('lookup')) {
          await store.close()
          store = await MessageStore.open(dir, { ...options, copyMessageBody: false })
          const zeroCopy = store
          if (phases.has('scan')) {
            log(`mqstore: zero-copy scan of ${SCAN_TOPIC}/${SCAN_QUEUE} x${SCAN_RUNS}, twice`)
            const expected = scannedQueueSize(config.count)
            const zeroCopyStarted = now()
            result.scanZeroCopy = await timeScan(expected, () => scanPass(zeroCopy, expected))
            windows.push(windowSince('scan, zero-copy getMessage', zeroCopyStarted))
          }
          if (phases.has('lookup')) {
            log(`mqstore: ${config.lookups} zero-copy lookups by key`)
            result.lookupZeroCopy = timeKeyLookups(zeroCopy, config, lookupSample(config), windows, 'lookup, zero-copy')
          }
        }
      } finally {
        await store.close()
      }
    } finally {
      removeDir(dir)
    }
  }

  // (5a) a compacted queue read, in a store of its own
  if (phases.has('scan')) {
    const compactedStarted = now()
    result.scanCompacted = await compactedScan(config)
    windows.push(windowSince('scan, a compacted queue', compactedStarted))
  }

  // (5) SYNC put, 64 producers
  if (phases.has('sync')) {
    const dir = makeTempDir('mqstore-sync')
    try {
      const store = await MessageStore.open(dir, { ...COMMON, flushDiskType: 'SYNC_FLUSH' })
      try {
        const n = config.syncCount
        log(`mqstore: SYNC_FLUSH put of ${n} messages by ${SYNC_PRODUCERS} producers`)
        const syncStarted = now()
        let before = store.stats()
        const { seconds, latencyNs, threads } = await runProducers(
          n,
          SYNC_PRODUCERS,
          async (i) => {
            const put = await store.putMessage(benchMessage(i, makeBody(i)))
            if (put.status !== 'PUT_OK') throw new Error(`sync put ${i}: ${put.status}`)
          },
          SYNC_WARMUP,
          () => {
            before = store.stats()
          },
        )
        const after = store.stats()
        windows.push(windowSince('SYNC put', syncStarted))
        result.sync = {
          count: n,
          producers: SYNC_PRODUCERS,
          seconds,
          rate: n / seconds,
          latencyUs: summarizeNs(latencyNs),
          mode: `SYNC_FLUSH (group commit), ${SYNC_PRODUCERS} concurrent producers awaiting putMessage`,
          threads,
          groupCommits: {
            commits: after.groupCommitTimesTotal - before.groupCommitTimesTotal,
            requests: after.groupCommitRequestsTotal - before.groupCommitRequestsTotal,
            micros: after.groupCommitMicrosTotal - before.groupCommitMicrosTotal,
          },
        }
      } finally {
        await store.close()
      }
    } finally {
      removeDir(dir)
    }
  }
  // (6) a store of about bigBytes: crash, recovery, clean reopen, disk per logical byte
  if (phases.has('big')) {
    const bigStarted = now()
    result.big = await bigStore(config)
    windows.push(windowSince('big store', bigStarted))
  }
  // (7) puts forwarded from another process against in-process puts, into one shareWrites store
  if (phases.has('forward')) {
    const forwardStarted = now()
    result.forward = await forwardedPuts(config, COMMON)
    windows.push(windowSince('forwarded put', forwardStarted))
  }
  // (8) a reader in another process following the writer's puts
  if (phases.has('follow')) {
    const followStarted = now()
    result.follow = await followLatency(config, COMMON)
    windows.push(windowSince('follow', followStarted))
  }
  // (9) a master and a slave in two more processes: replication rate, SYNC_MASTER against ASYNC_MASTER, lag
  if (phases.has('replicate')) {
    const replicateStarted = now()
    result.replicate = await replicatedPuts(config)
    windows.push(windowSince('replicate', replicateStarted))
  }
  // (10) timed messages: insert rate into the timer store, delivery lag with the others pending
  if (phases.has('timer')) {
    const timerStarted = now()
    result.timer = await timerDelivery(config, COMMON)
    windows.push(windowSince('timer', timerStarted))
  }
  return result
}

/** Puts of the compacted-queue scan's store (at most --count), over half as many keys. */
const COMPACTED_PUTS = 100_000
const COMPACTED_TOPIC = 'BenchCompacted'

/** A lookup's check: one message found, the one picked (a body's first 4 bytes are its message number). */
function rightBody(picks: Uint32Array): (got: QueryMessageResult, j: number) => boolean {
  return (got, j) => got.messages.length === 1 && got.messages[0].body.readUInt32BE(0) === picks[j]
}

/** The lookup phase's keys: message numbers drawn with the run's seed, each message's key and topic. */
interface LookupSample {
  picks: Uint32Array
  keys: string[]
  topics: string[]
}

function lookupSample(config: BenchConfig): LookupSample {
  const picks = sampleIndexes(config.lookups, config.count, config.seed)
  return { picks, keys: Array.from(picks, keyOf), topics: Array.from(picks, topicOf) }
}

/**
 * The lookup phase's passes over a sample (keys[j] of topics[j]): LOOKUP_WARMUP untimed lookups of
 * other keys, the timed pass, then the same keys again (their latency once every page was touched).
 */
function timeKeyLookups(
  store: MessageStore,
  config: BenchConfig,
  sample: LookupSample,
  windows: PhaseWindow[],
  label: string,
): LookupResult {
  const { picks, keys, topics } = sample
  const n = picks.length
  const warm = sampleIndexes(Math.min(LOOKUP_WARMUP, n), config.count, config.seed + 1)
  for (const i of warm) store.queryMessage(topicOf(i), keyOf(i), 32, 0, Number.MAX_SAFE_INTEGER)
  const lookup = (j: number) => store.queryMessage(topics[j], keys[j], 32, 0, Number.MAX_SAFE_INTEGER)
  const isRight = rightBody(picks)
  const faultsBefore = jsThreadFaults()
  const t0 = now()
  const { latency, found } = timeLookups(n, lookup, isRight)
  const seconds = secondsSince(t0)
  windows.push(windowSince(label, t0))
  check(found === n, `${label}: found ${found} of ${n}`)
  const faults = addFaultsSince(0, faultsBefore)
  const repeat = timeLookups(n, lookup, isRight)
  return lookupResult(n, found, seconds, latency, repeat.latency, faults)
}

/**
 * A compacted queue read in order, getMessage SCAN_BATCH at a time, as the scan phase reads (its
 * passes timed by timeScan): COMPACTED_PUTS messages of the bench's bodies over half as many keys
 * put into one queue of a compacted topic, a compaction pass run, and the survivors read.
 */
async function compactedScan(config: BenchConfig): Promise<ScanResult> {
  const n = Math.min(config.count, COMPACTED_PUTS)
  const keys = Math.max(1, n >> 1)
  log(`mqstore: a compacted queue of ${n} puts over ${keys} keys, compacted, then scanned x${SCAN_RUNS}, twice`)
  const dir = makeTempDir('mqstore-compacted')
  try {
    const store = await MessageStore.open(dir, { ...MQSTORE_OPTIONS, topics: { [COMPACTED_TOPIC]: { cleanupPolicy: 'compact' } } })
    try {
      for (let first = 0; first < n; first += PUT_BATCH) {
        const bodies = makeBodies(first, Math.min(PUT_BATCH, n - first))
        const results = await store.putMessages(
          bodies.map((body, j) => ({ topic: COMPACTED_TOPIC, queueId: 0, body, keys: `k${(first + j) % keys}` })),
        )
        for (const result of results) check(result.status === 'PUT_OK', `compacted put: ${result.status}`)
      }
      await store.compact(COMPACTED_TOPIC)
      const pass = (): number => {
        let offset = store.getMinOffsetInQueue(COMPACTED_TOPIC, 0)
        let seen = 0
        for (;;) {
          const got = store.getMessage(GROUP, COMPACTED_TOPIC, 0, offset, SCAN_BATCH)
          if (got.status !== 'FOUND') break
          seen += got.messages.length
          offset = got.nextBeginOffset
        }
        return seen
      }
      const survivors = pass()
      check(survivors >= keys && survivors < n, `the compacted queue holds ${survivors} of ${n} messages over ${keys} keys`)
      return await timeScan(survivors, () => {
        const seen = pass()
        check(seen === survivors, `compacted scan saw ${seen} messages, not ${survivors}`)
      })
    } finally {
      await store.close()
    }
  } finally {
    removeDir(dir)
  }
}

/** Lookups a read-only opener makes in the lookup phase (each costs it a few system calls). */
const READER_LOOKUPS = 20_000

/** One pass of the scan phase: the scanned queue read in order, SCAN_BATCH at a time, and checked. */
function scanPass(store: Pick<MessageStore, 'getMessage'>, expected: number): void {
  let offset = 0
  let seen = 0
  let bytes = 0
  for (;;) {
    const got = store.getMessage(GROUP, SCAN_TOPIC, SCAN_QUEUE, offset, SCAN_BATCH)
    if (got.status !== 'FOUND') break
    for (const m of got.messages) {
      if (m.queueOffset !== seen) throw new Error(`scan out of order: ${m.queueOffset} at ${seen}`)
      bytes += m.body.length
      seen++
    }
    offset = got.nextBeginOffset
  }
  check(seen === expected && bytes === expected * BODY_SIZE, `scan saw ${seen} messages, ${bytes} bytes`)
}

/** Writes ~bigBytes in a child that SIGKILLs itself, then recovers and reopens the store here. */
async function bigStore(config: BenchConfig): Promise<BigStoreResult> {
  const dir = makeTempDir('mqstore-big')
  try {
    log(`mqstore: ${fmtBytes(config.bigBytes)} store written by a child that is then SIGKILLed`)
    const writer = fileURLToPath(new URL('./big-writer.js', import.meta.url))
    const child = spawnSync(process.execPath, [writer, dir, String(config.bigBytes)], {
      stdio: ['ignore', 'pipe', 'inherit'],
      encoding: 'utf8',
    })
    check(child.signal === 'SIGKILL', `the big-store writer ended with ${child.signal ?? `status ${child.status}`}`)
    const messages = Number(child.stdout.trim().split('\n').pop())
    check(Number.isSafeInteger(messages) && messages > 0, `the big-store writer reported ${child.stdout}`)

    // A copy as a power cut would leave it for the next boot: its abort file names no boot.
    const rebootDir = `${dir}-reboot`
    cpSync(dir, rebootDir, { recursive: true })
    writeFileSync(join(rebootDir, 'abort'), '')
    syncTree(rebootDir)
    log('mqstore: open after the crash')
    const t0 = now()
    let store = await MessageStore.open(dir, { ...COMMON, flushDiskType: 'ASYNC_FLUSH' })
    const crashOpenMs = Number(now() - t0) / 1e6
    const stats = store.stats()
    check(!stats.lastExitOK, 'the big store was not recovered as a crash')
    const scannedBytes = stats.recovery?.scannedBytes ?? 0
    const logicalBytes = stats.commitLogMaxOffset - Math.max(0, stats.commitLogMinOffset)
    const queued = store.getMaxOffsetInQueue(SCAN_TOPIC, SCAN_QUEUE)
    check(queued === scannedQueueSize(messages), `the recovered queue holds ${queued} messages, the writer put ${messages}`)
    await store.close()
    const diskBytes = diskUsage(dir)

    log('mqstore: clean reopen')
    const t1 = now()
    store = await MessageStore.open(dir, { ...COMMON, flushDiskType: 'ASYNC_FLUSH' })
    const cleanOpenMs = Number(now() - t1) / 1e6
    check(store.stats().lastExitOK, 'the clean reopen did not see a clean shutdown')
    await store.close()

    log('mqstore: open after a power cut (a copy whose abort file names no boot)')
    const t2 = now()
    store = await MessageStore.open(rebootDir, { ...COMMON, flushDiskType: 'ASYNC_FLUSH' })
    const rebootOpenMs = Number(now() - t2) / 1e6
    const rebootScannedBytes = store.stats().recovery?.scannedBytes ?? 0
    check(store.getMaxOffsetInQueue(SCAN_TOPIC, SCAN_QUEUE) === queued, 'the rebooted copy recovered another queue length')
    await store.close()
    // The same files read raw, as the page cache now holds them: the bound of any scan of them.
    const t3 = now()
    const rawReadBytes = readAll(join(rebootDir, 'commitlog'))
    const rawReadMs = Number(now() - t3) / 1e6
    return {
      messages,
      logicalBytes,
      diskBytes,
      crashOpenMs,
      scannedBytes,
      cleanOpenMs,
      rebootOpenMs,
      rebootScannedBytes,
      rawReadMs,
      rawReadBytes,
    }
  } finally {
    removeDir(dir)
    removeDir(`${dir}-reboot`)
  }
}

/** Reads every file of `dir` with positioned reads of 1 MiB into one reused buffer; returns the bytes read. */
function readAll(dir: string): number {
  const buffer = Buffer.allocUnsafe(1024 * 1024)
  let total = 0
  for (const name of readdirSync(dir).sort()) {
    const fd = openSync(join(dir, name), 'r')
    try {
      for (let at = 0, n = 1; n > 0; at += n) {
        n = readSync(fd, buffer, 0, buffer.length, at)
        total += n
      }
    } finally {
      closeSync(fd)
    }
  }
  return total
}

function fmtBytes(n: number): string {
  return n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : `${(n / 2 ** 20).toFixed(0)} MiB`
}
