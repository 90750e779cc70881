// The children of the benchmark's 'replicate' phase: a master and its slave, each a store in a
// process of its own, over loopback.
//
//   node dist/bench/replica-node.js master <dir> <role> <count> <latencyCount> <steadySeconds>
//     opens a master with `role` (ASYNC_MASTER or SYNC_MASTER) on an ephemeral port and prints
//     {"port":N}; once a slave reported, puts an untimed warm-up, then measures and prints one JSON
//     line (a ReplicaReport): `count` messages put in batches until the slave acknowledged their
//     end (skipped when 0), `latencyCount` puts one at a time, each timed, and for `steadySeconds`
//     a steady load of batches of 10 every 5 ms, with the slave's lag as the master sees it
//     (skipped when 0). Then it closes its store and exits.
//   node dist/bench/replica-node.js slave <dir> <host:port>
//     opens a SLAVE of that master; closes on SIGTERM.
import { MessageStore, type Message, type MessageStoreStats } from '../lib/index.js'
import { keyOf, makeBodies, now, PUT_BATCH, queueOf, secondsSince, summarizeNs, topicOf, type LatencySummary } from './workload.js'

/** What the master child measured. */
export interface ReplicaReport {
  role: string
  /** Messages put in batches until a slave acknowledged their end, per second (0 when not measured). */
  replicatedRate: number
  /** One put at a time, awaited: µs. */
  putLatencyUs: LatencySummary
  /** Under the steady load: put to the slave's acknowledgement, ms; the most bytes the slave was behind. */
  steady: { rate: number; seconds: number; lagMs: { p50: number; p99: number; max: number }; lagBytesMax: number } | null
}

const WARMUP = 10_000
const STEADY_BATCH = 10
const STEADY_EVERY_MS = 5

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function batchOf(first: number, n: number): Message[] {
  return makeBodies(first, n).map((body, j) => ({ topic: topicOf(first + j), queueId: queueOf(first + j), body, keys: keyOf(first + j) }))
}

function acked(stats: MessageStoreStats): number {
  return stats.ha.slaveAckOffset
}

async function put(store: MessageStore, messages: Message[]): Promise<void> {
  for (const r of await store.putMessages(messages)) if (r.status !== 'PUT_OK') throw new Error(`put: ${r.status} ${r.reason ?? ''}`)
}

async function untilAcked(store: MessageStore, end: number): Promise<void> {
  while (acked(store.stats()) < end) await sleep(1)
}

async function master(dir: string, role: 'ASYNC_MASTER' | 'SYNC_MASTER', count: number, latencyCount: number, steadySeconds: number) {
  const store = await MessageStore.open(dir, { messageIndexEnable: true, flushDiskType: 'ASYNC_FLUSH', brokerRole: role, haListenPort: 0 })
  process.stdout.write(`${JSON.stringify({ port: store.stats().ha.port })}\n`)
  while (!store.stats().ha.connections.some((c) => c.ackOffset >= 0)) await sleep(5)
  let next = 0
  for (; next < WARMUP; next += PUT_BATCH) await put(store, batchOf(next, PUT_BATCH))
  await untilAcked(store, store.getMaxPhyOffset())

  let replicatedRate = 0
  if (count > 0) {
    const started = now()
    for (let at = 0; at < count; at += PUT_BATCH) await put(store, batchOf(next + at, Math.min(PUT_BATCH, count - at)))
    await untilAcked(store, store.getMaxPhyOffset())
    replicatedRate = count / secondsSince(started)
    next += count
  }

  const latencyNs = new Float64Array(latencyCount)
  for (let k = 0; k < latencyCount; k++) {
    const [message] = batchOf(next++, 1)
    const started = now()
    await put(store, [message])
    latencyNs[k] = Number(now() - started)
  }

  let steady: ReplicaReport['steady'] = null
  if (steadySeconds > 0) {
    // The lag of the load alone, not of the timed puts before it.
    await untilAcked(store, store.getMaxPhyOffset())
    const pending: { end: number; at: bigint }[] = []
    const lagsMs: number[] = []
    let lagBytesMax = 0
    const watcher = setInterval(() => {
      const stats = store.stats()
      const ack = acked(stats)
      lagBytesMax = Math.max(lagBytesMax, stats.commitLogMaxOffset - ack)
      while (pending.length > 0 && pending[0].end <= ack) lagsMs.push(Number(now() - (pending.shift() as { at: bigint }).at) / 1e6)
    }, 1)
    const started = performance.now()
    let batches = 0
    while (performance.now() - started < steadySeconds * 1000) {
      const at = now()
      await put(store, batchOf(next, STEADY_BATCH))
      next += STEADY_BATCH
      pending.push({ end: store.getMaxPhyOffset(), at })
      batches++
      // On a schedule, not after each put: a slow put does not lower the load that follows.
      const due = started + batches * STEADY_EVERY_MS
      await sleep(Math.max(0, due - performance.now()))
    }
    await untilAcked(store, store.getMaxPhyOffset())
    await sleep(5)
    clearInterval(watcher)
    const sorted = [...lagsMs].sort((a, b) => a - b)
    const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]
    steady = {
      rate: (batches * STEADY_BATCH) / steadySeconds,
      seconds: steadySeconds,
      lagMs: { p50: q(0.5), p99: q(0.99), max: sorted[sorted.length - 1] },
      lagBytesMax,
    }
  }
  const report: ReplicaReport = { role, replicatedRate, putLatencyUs: summarizeNs(latencyNs), steady }
  await store.close()
  process.stdout.write(`${JSON.stringify(report)}\n`)
}

async function slave(dir: string, address: string) {
  const store = await MessageStore.open(dir, {
    messageIndexEnable: true,
    flushDiskType: 'ASYNC_FLUSH',
    brokerRole: 'SLAVE',
    haMasterAddress: address,
  })
  process.once('SIGTERM', () => {
    void store.close().then(() => process.exit(0))
  })
}

const [mode, dir, ...rest] = process.argv.slice(2)
if (mode === 'master' && (rest[0] === 'ASYNC_MASTER' || rest[0] === 'SYNC_MASTER') && rest.length === 4) {
  await master(dir, rest[0], Number(rest[1]), Number(rest[2]), Number(rest[3]))
} else if (mode === 'slave' && rest.length === 1) {
  await slave(dir, rest[0])
} else {
  process.stderr.write(
    'usage: replica-node.js master <dir> <ASYNC_MASTER|SYNC_MASTER> <count> <latencyCount> <steadySeconds> | slave <dir> <host:port>\n',
  )
  process.exit(64)
}
