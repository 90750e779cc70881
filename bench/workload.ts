// The workload every engine runs, and the helpers the drivers share (timing, percentiles,
// temporary directories). Nothing here knows about a particular engine.
import * as fs from 'node:fs'
import * as os from 'node:os'
import { join } from 'node:path'
import { parseArgs, type ParseArgsConfig } from 'node:util'

export const TOPICS = 4
export const QUEUES = 4
export const BODY_SIZE = 256
/** Messages handed to the store per call / per transaction in the put phase. */
export const PUT_BATCH = 1000
/** Concurrent producers of the SYNC put phase. */
export const SYNC_PRODUCERS = 64
/** Messages per getMessage call in the scan: RocketMQ's default pull size. */
export const SCAN_BATCH = 32
/** Scan runs per engine; the median is reported. */
export const SCAN_RUNS = 5
/** Untimed passes before the first timed ones, the same for every engine: the JIT warms up on them. */
export const SCAN_WARMUP_RUNS = 2
/**
 * Untimed passes between the first timed passes and the steady ones (see timeScan). The first
 * passes of a fresh process pay for its memory growing: every engine's read allocates the buffers
 * it hands out, the allocator takes fresh pages from the kernel until the buffers freed by the
 * garbage collector come back to it (a page fault each, about 11 us in a virtual machine), and
 * lmdb's per-value buffers meet the array-buffer sweeper more and more often. After some 20 passes
 * of a queue of 25,000 both have settled; a service that reads for hours sees the settled rate.
 */
export const SCAN_STEADY_WARMUP_RUNS = 13
/**
 * Messages each engine puts into a scratch store of its own (then closed and removed) before the
 * timed put, untimed: the JIT compiles the put path on them, as a service's first seconds do.
 */
export const PUT_WARMUP = 50_000
/**
 * Scratch stores the warm-up puts go into, one after the other. V8 specialises optimised code on
 * the object shapes of the first instances it meets; the second store's objects widen those
 * shapes and send the code back to be compiled again, with the timed put paying for it. From the
 * second store on, the shapes hold, as they do in a service that has run for a while.
 */
export const PUT_WARMUP_STORES = 2
/**
 * Durable puts each engine makes untimed (by the same producers, into the same store) before the
 * timed SYNC puts: the JIT compiles the durable-put path and the store makes its files, queues and
 * folders first, as in a service that has run for a while. Without them, a fresh store's first
 * second (compiling, making 16 queues) weighed on a figure of 20,000 puts.
 */
export const SYNC_WARMUP = 2000
/** Untimed lookups (keys outside the measured sample) run first to warm the code paths. */
export const LOOKUP_WARMUP = 2000

export type EngineName = 'mqstore' | 'lmdb' | 'sqlite'
export const ENGINES: readonly EngineName[] = ['mqstore', 'lmdb', 'sqlite']

export type PhaseName = 'put' | 'scan' | 'lookup' | 'reopen' | 'sync' | 'big' | 'forward' | 'follow' | 'replicate' | 'timer'
export const PHASES: readonly PhaseName[] = ['put', 'scan', 'lookup', 'reopen', 'sync', 'big', 'forward', 'follow', 'replicate', 'timer']

export interface BenchConfig {
  count: number
  lookups: number
  syncCount: number
  /** Commit-log bytes of the store the 'big' phase crashes, recovers and reopens. */
  bigBytes: number
  phases: ReadonlySet<PhaseName>
  seed: number
}

// Message i goes to topic i % 4, queue (i >> 2) % 4, so it is message number i >> 4 of its queue
// (every 16 consecutive messages visit each of the 16 queues once). Its key is `k<i>`.
const TOPIC_NAMES = Array.from({ length: TOPICS }, (_, t) => `BenchTopic${t}`)

export function topicOf(i: number): string {
  return TOPIC_NAMES[i % TOPICS]
}

export function topicIndexOf(i: number): number {
  return i % TOPICS
}

export function queueOf(i: number): number {
  return Math.floor(i / TOPICS) % QUEUES
}

export function queueOffsetOf(i: number): number {
  return Math.floor(i / (TOPICS * QUEUES))
}

export function keyOf(i: number): string {
  return `k${i}`
}

/** Messages the scanned queue (topic 0, queue 0) holds after `count` puts. */
export function scannedQueueSize(count: number): number {
  return Math.ceil(count / (TOPICS * QUEUES))
}

export const SCAN_TOPIC = TOPIC_NAMES[0]
export const SCAN_QUEUE = 0

const TEMPLATE = (() => {
  const bytes = Buffer.alloc(BODY_SIZE)
  let x = 0x9e3779b9
  for (let i = 0; i < BODY_SIZE; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    bytes[i] = x & 0xff
  }
  return bytes
})()

/**
 * Bodies for messages [first, first + n): one fresh slab per batch, so no store ever sees a buffer
 * that is rewritten later. The first 4 bytes of each body hold the message number.
 */
export function makeBodies(first: number, n: number): Buffer[] {
  const slab = Buffer.allocUnsafe(n * BODY_SIZE)
  // The template once, then doubled in place: a copy per body (Buffer.copy's checks each time)
  // took a tenth of the put phase's time, charged to whichever engine was measured.
  if (n > 0) slab.set(TEMPLATE, 0)
  for (let filled = BODY_SIZE; filled < slab.length; filled *= 2) slab.copyWithin(filled, 0, Math.min(filled, slab.length - filled))
  const bodies: Buffer[] = new Array(n)
  for (let j = 0; j < n; j++) {
    const at = j * BODY_SIZE
    slab.writeUInt32BE((first + j) >>> 0, at)
    bodies[j] = slab.subarray(at, at + BODY_SIZE)
  }
  return bodies
}

export function makeBody(i: number): Buffer {
  return makeBodies(i, 1)[0]
}

/** Message `i` of the workload as a put hands it over (mqstore's Message has these fields). */
export interface BenchMessage {
  topic: string
  queueId: number
  body: Buffer
  keys: string
}

export function benchMessage(i: number, body: Buffer): BenchMessage {
  return { topic: topicOf(i), queueId: queueOf(i), body, keys: keyOf(i) }
}

/**
 * The put phase's loop: messages 0 .. count - 1 built as the phase builds them (bodies from
 * makeBodies, a message object each), handed over PUT_BATCH at a time, each batch awaited and
 * every result checked. The limits run it with an engine that only encodes (limits.ts), so the
 * put is also read against what this loop reaches with nothing but the encode behind it.
 */
export async function putInBatches(
  count: number,
  putMessages: (batch: BenchMessage[]) => Promise<readonly { status: string }[]>,
): Promise<void> {
  for (let first = 0; first < count; first += PUT_BATCH) {
    const n = Math.min(PUT_BATCH, count - first)
    const bodies = makeBodies(first, n)
    const batch: BenchMessage[] = new Array(n)
    for (let j = 0; j < n; j++) batch[j] = benchMessage(first + j, bodies[j])
    const results = await putMessages(batch)
    for (let j = 0; j < n; j++) {
      if (results[j]?.status !== 'PUT_OK') throw new Error(`put ${first + j}: ${results[j]?.status}`)
    }
  }
}

/** mulberry32: a small seeded generator, so every engine looks up the same keys. */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** `n` message numbers drawn uniformly (with repetition) from [0, count). */
export function sampleIndexes(n: number, count: number, seed: number): Uint32Array {
  const next = rng(seed)
  const out = new Uint32Array(n)
  for (let j = 0; j < n; j++) out[j] = Math.floor(next() * count)
  return out
}

export function now(): bigint {
  return process.hrtime.bigint()
}

export function secondsSince(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e9
}

/** The q-quantile (0..1) of `sorted` (ascending), nearest rank. */
export function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]
}

/** The items in the order of run `run` (0-based): each run starts one item later (run 1 = b, c, a). */
export function rotation<T>(items: readonly T[], run: number): T[] {
  const n = items.length
  if (n === 0) return []
  const shift = ((run % n) + n) % n
  return [...items.slice(shift), ...items.slice(0, shift)]
}

/** A figure over several runs: the median is what the report shows, min and max its spread. */
export interface Spread {
  median: number
  min: number
  max: number
  values: number[]
}

/** The spread of the finite values, undefined when there are none. */
export function spreadOf(values: readonly (number | undefined)[]): Spread | undefined {
  const finite = values.filter((v): v is number => v !== undefined && Number.isFinite(v))
  if (finite.length === 0) return undefined
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite), values: finite }
}

/** A phase's time window on the process.hrtime clock, in microseconds (the CPU profile's clock). */
export interface PhaseWindow {
  name: string
  fromUs: number
  toUs: number
}

/** The window from `started` (process.hrtime.bigint()) to now. */
export function windowSince(name: string, started: bigint): PhaseWindow {
  return { name, fromUs: Number(started / 1000n), toUs: Number(process.hrtime.bigint() / 1000n) }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

export interface LatencySummary {
  p50: number
  p99: number
  p999: number
  max: number
  mean: number
}

/** Summarises latencies given in nanoseconds, in microseconds. */
export function summarizeNs(latenciesNs: Float64Array): LatencySummary {
  const sorted = Float64Array.from(latenciesNs).sort()
  let sum = 0
  for (const v of sorted) sum += v
  return {
    p50: quantile(sorted, 0.5) / 1e3,
    p99: quantile(sorted, 0.99) / 1e3,
    p999: quantile(sorted, 0.999) / 1e3,
    max: sorted.length === 0 ? NaN : sorted[sorted.length - 1] / 1e3,
    mean: sorted.length === 0 ? NaN : sum / sorted.length / 1e3,
  }
}

/**
 * Times `n` lookups one by one: `lookup(j)` makes the j-th, `isRight` (untimed) says whether it
 * found the message it should. Returns each lookup's nanoseconds and how many were right.
 */
export function timeLookups<T>(
  n: number,
  lookup: (j: number) => T,
  isRight: (got: T, j: number) => boolean,
): { latency: Float64Array; found: number } {
  const latency = new Float64Array(n)
  let found = 0
  for (let j = 0; j < n; j++) {
    const s = process.hrtime.bigint()
    const got = lookup(j)
    latency[j] = Number(process.hrtime.bigint() - s)
    if (isRight(got, j)) found++
  }
  return { latency, found }
}

/** A lookup phase's result: the first pass's figures, and the latency of the same keys again. */
export function lookupResult(
  n: number,
  found: number,
  seconds: number,
  latency: Float64Array,
  repeat: Float64Array,
  faults: number | undefined,
): LookupResult {
  return {
    count: n,
    found,
    seconds,
    rate: n / seconds,
    latencyUs: summarizeNs(latency),
    repeatLatencyUs: summarizeNs(repeat),
    jsThreadFaults: faults,
  }
}

export function makeTempDir(engine: string): string {
  return fs.mkdtempSync(join(os.tmpdir(), `mqstore-bench-${engine}-`))
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true })
}

/**
 * fsyncs every file and directory under `dir`: a copy made to stand for a store after a power cut
 * is then on disk with nothing left to write back, as the next boot finds it (otherwise the open
 * timed next would also wait for the copy's own writeback, at its first sync).
 */
export function syncTree(dir: string): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) syncTree(path)
    else if (entry.isFile()) syncPath(path)
  }
  syncPath(dir)
}

function syncPath(path: string): void {
  const fd = fs.openSync(path, 'r')
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/** Bytes of disk blocks allocated under `dir` (preallocated, not yet written space included). */
export function diskUsage(dir: string): number {
  let total = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) total += diskUsage(path)
    else if (entry.isFile()) total += fs.statSync(path).blocks * 512
  }
  return total
}

/** Progress goes to stderr so that `--json` leaves stdout machine-readable. */
export function log(message: string): void {
  process.stderr.write(`${message}\n`)
}

export class BenchError extends Error {}

export function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new BenchError(message)
}

// ---- results ------------------------------------------------------------------------------------

export interface PutResult {
  count: number
  seconds: number
  rate: number
  diskBytes: number
  /** Bytes the engine must keep: body bytes for every engine (count x 256). */
  bodyBytes: number
  /** Resident set size of the process right after the put phase. */
  rssBytes: number
  /** Minor page faults the JS thread took during the put (Linux; see jsThreadFaults). */
  jsThreadFaults?: number
  /** Where the put's wall time went, by thread (Linux; see threadTimesSince). */
  threads?: ThreadTimes
}

/** A store of about `bigBytes`, written by a child that is then SIGKILLed (mqstore only). */
export interface BigStoreResult {
  messages: number
  /** Bytes of records in the commit log. */
  logicalBytes: number
  /** Allocated blocks of the whole store directory after recovery and a clean close. */
  diskBytes: number
  /**
   * open() after the crash: recovery scan, truncation, re-dispatch. The crash was a SIGKILL of
   * this boot, so the scan resumes where dispatch had got to (lib/store/recovery/boot-identity.ts).
   */
  crashOpenMs: number
  /** Bytes the recovery scan read (stats().recovery.scannedBytes). */
  scannedBytes: number
  /**
   * open() of a copy of the crashed store whose abort file names no boot, as after a power cut and
   * a reboot: the scan starts where the checkpoint says and the index is rebuilt.
   */
  rebootOpenMs?: number
  /** Bytes that scan read. */
  rebootScannedBytes?: number
  /** Milliseconds to read the copy's commit-log files raw afterwards (1 MiB positioned reads into one buffer), and the bytes read. */
  rawReadMs?: number
  rawReadBytes?: number
  /** open() of the same store after a clean close. */
  cleanOpenMs: number
}

/** Timed passes of a scan: their seconds, median, rate and the JS thread's page faults. */
export interface ScanPasses {
  /** Seconds of each run. */
  runs: number[]
  /** Median seconds. */
  seconds: number
  rate: number
  /** Minor page faults the JS thread took during the timed runs, all of them (Linux; see jsThreadFaults). */
  jsThreadFaults?: number
}

/** The steady passes (see timeScan), with the first passes of the fresh process beside them. */
export interface ScanResult extends ScanPasses {
  count: number
  /** The passes right after the first SCAN_WARMUP_RUNS (results before them have none). */
  first?: ScanPasses
}

/**
 * Times a scan as every engine's scan phase does: SCAN_WARMUP_RUNS untimed passes, SCAN_RUNS
 * timed ones (the first passes of a fresh process), SCAN_STEADY_WARMUP_RUNS untimed, then SCAN_RUNS
 * timed again (the steady rate, the one the report judges). `pass` reads the `count` messages of
 * the queue once and checks them. `clock` is for tests.
 */
export async function timeScan(count: number, pass: () => void | Promise<void>, clock: () => bigint = now): Promise<ScanResult> {
  const timed = async (): Promise<ScanPasses> => {
    const runs: number[] = []
    let faults: number | undefined = 0
    for (let run = 0; run < SCAN_RUNS; run++) {
      const f0 = jsThreadFaults()
      const t0 = clock()
      await pass()
      runs.push(Number(clock() - t0) / 1e9)
      faults = addFaultsSince(faults, f0)
    }
    const seconds = median(runs)
    return { runs, seconds, rate: count / seconds, jsThreadFaults: faults }
  }
  for (let run = 0; run < SCAN_WARMUP_RUNS; run++) await pass()
  const first = await timed()
  for (let run = 0; run < SCAN_STEADY_WARMUP_RUNS; run++) await pass()
  return { count, ...(await timed()), first }
}

export interface LookupResult {
  count: number
  found: number
  seconds: number
  rate: number
  latencyUs: LatencySummary
  /**
   * The same keys looked up again, in the same order, right after: what is left of the latency
   * once the pages each lookup touches have been touched before.
   */
  repeatLatencyUs?: LatencySummary
  /** Minor page faults the JS thread took during the timed lookups (Linux; see jsThreadFaults). */
  jsThreadFaults?: number
}

export interface ReopenResult {
  closeMs: number
  openMs: number
  totalMs: number
  /**
   * The same close and open once more: the open's code has run once in the process by then, so
   * this is the engine's work at open without its code's first run (compilation, first calls).
   */
  secondOpenMs?: number
}

export interface SyncResult {
  count: number
  producers: number
  seconds: number
  rate: number
  latencyUs: LatencySummary
  /** How durability is obtained and how producers are run, for the report. */
  mode: string
  /** Where the timed puts' wall time went, by thread (Linux; see threadTimesSince). */
  threads?: ThreadTimes
  /** mqstore: its group commits during the timed puts (stats()'s groupCommit* figures, differenced). */
  groupCommits?: { commits: number; requests: number; micros: number }
  /** A second, differently configured run where one helps interpret the first (lmdb). */
  alternative?: { mode: string; seconds: number; rate: number; latencyUs: LatencySummary }
}

/** Puts forwarded from another process (MessageStore.connect) against in-process puts (mqstore only). */
export interface ForwardResult {
  /** Messages each side put. */
  count: number
  /** Messages per putMessages call, both sides. */
  batch: number
  inProcessRate: number
  forwardedRate: number
}

/** How soon a reader in another process sees a put, and what it costs while it waits (mqstore only). */
export interface FollowResult {
  /** Messages put one at a time and followed. */
  count: number
  /** Put (before the call) to arrival in the reader's consume(), in ms. */
  latencyMs: { p50: number; p99: number; max: number }
  /** The waiting reader's CPU time over idleMs, in percent of one core. */
  idleCpuPercent: number
  idleMs: number
}

/** A master and a slave in two processes over loopback (mqstore only). */
export interface ReplicateResult {
  /** Messages put in batches on an ASYNC_MASTER until the slave acknowledged their end. */
  count: number
  batch: number
  /** Messages per second replicated. */
  rate: number
  /** Puts timed one at a time, per role. */
  latencyCount: number
  asyncLatencyUs: LatencySummary
  syncLatencyUs: LatencySummary
  /** The slave's lag under a steady load on the ASYNC_MASTER: put to acknowledgement (ms), and the most bytes behind. */
  steady: { rate: number; seconds: number; lagMs: { p50: number; p99: number; max: number }; lagBytesMax: number }
}

/** Timed messages (deliverAt) entering the timer store, and delivery while many are pending (mqstore only). */
export interface TimerResult {
  /** Timers put (besides an untimed warm-up batch). */
  count: number
  /** Seconds of the puts alone. */
  putSeconds: number
  /** Seconds from the first put until the timer store held them all. */
  seconds: number
  /** count / seconds. */
  rate: number
  /** Timers of the batch due while the others were pending. */
  due: number
  precisionMs: number
  /** Arrival in consume() minus deliverAt, ms. */
  lagMs: { p50: number; p99: number; max: number }
  rssGrowthBytes: number
  /** Private memory growth (RssAnon on Linux). */
  anonGrowthBytes: number
}

export interface EngineResult {
  engine: EngineName
  version: string
  put?: PutResult
  scan?: ScanResult
  /** The same queue read through consume() (mqstore only). */
  scanConsume?: ScanResult
  /** The same queue read by a read-only opener in the same process (mqstore only). */
  scanReader?: ScanResult
  /** The same queue read zero-copy, copyMessageBody: false (mqstore only). */
  scanZeroCopy?: ScanResult
  /** A compacted queue's survivors read in order (mqstore only; bench/mqstore.ts compactedScan). */
  scanCompacted?: ScanResult
  lookup?: LookupResult
  /** The first of the lookup phase's keys looked up by a read-only opener (mqstore only). */
  lookupReader?: LookupResult
  /** The lookup phase's keys looked up zero-copy, copyMessageBody: false (mqstore only). */
  lookupZeroCopy?: LookupResult
  reopen?: ReopenResult
  sync?: SyncResult
  big?: BigStoreResult
  forward?: ForwardResult
  follow?: FollowResult
  replicate?: ReplicateResult
  timer?: TimerResult
  /** When each phase ran (for the per-phase CPU profile summaries). */
  windows?: PhaseWindow[]
}

/**
 * Minor page faults the calling (JS) thread has taken so far, from /proc/thread-self/stat;
 * undefined where there is none (macOS). Only this thread's: faults that a store takes on purpose
 * on other threads (pages faulted in ahead on the libuv pool) are not counted. In a virtual machine
 * each one costs what the limits' page-fault figure says, many times what it costs on bare metal.
 */
export function jsThreadFaults(): number | undefined {
  try {
    const stat = fs.readFileSync('/proc/thread-self/stat', 'utf8')
    // After "pid (comm) ": state ppid pgrp session tty_nr tpgid flags minflt ...
    const minflt = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[7])
    return Number.isSafeInteger(minflt) ? minflt : undefined
  } catch {
    return undefined
  }
}

/**
 * What the threads of the process did during a phase, in nanoseconds: the JS thread on a CPU,
 * the JS thread runnable but waiting for one (another thread had it: on 2 cores, the engine's own
 * helper threads and V8's compiler and garbage-collector threads take turns with it), and the CPU
 * time of every other thread of the process. The rest of the wall time the JS thread was asleep
 * (waiting on a lock, on I/O, or with nothing to do). The kernel's run time may lag by the
 * running slice (a scheduler tick at most) at either reading: a share is good to about 1 % of a
 * phase of a second.
 */
export interface ThreadTimes {
  wallNs: number
  jsRunNs: number
  jsWaitNs: number
  otherCpuNs: number
}

/** A reading for threadTimesSince. */
export interface ThreadClock {
  at: bigint
  jsRunNs: number
  jsWaitNs: number
  processCpuUs: number
}

/** The JS thread's scheduler times and the process's CPU time now; undefined where there is no /proc (macOS). */
export function threadClock(): ThreadClock | undefined {
  try {
    // run time on a CPU, time waiting on a run queue, time slices (nanoseconds, since the thread began).
    const [run, wait] = fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ').map(Number)
    if (!Number.isFinite(run) || !Number.isFinite(wait)) return undefined
    const cpu = process.cpuUsage()
    return { at: process.hrtime.bigint(), jsRunNs: run, jsWaitNs: wait, processCpuUs: cpu.user + cpu.system }
  } catch {
    return undefined
  }
}

/** ThreadTimes since `start` (a threadClock() reading); undefined when either reading is unknown. */
export function threadTimesSince(start: ThreadClock | undefined): ThreadTimes | undefined {
  const end = threadClock()
  if (start === undefined || end === undefined) return undefined
  const jsRunNs = end.jsRunNs - start.jsRunNs
  const processCpuNs = (end.processCpuUs - start.processCpuUs) * 1000
  return {
    wallNs: Number(end.at - start.at),
    jsRunNs,
    jsWaitNs: end.jsWaitNs - start.jsWaitNs,
    // The process's CPU clock ticks coarser than the scheduler's: never below zero.
    otherCpuNs: Math.max(0, processCpuNs - jsRunNs),
  }
}

/** Faults since `start` (a jsThreadFaults() reading) added to `sum`; undefined when either is unknown. */
export function addFaultsSince(sum: number | undefined, start: number | undefined): number | undefined {
  const end = jsThreadFaults()
  return sum === undefined || start === undefined || end === undefined ? undefined : sum + end - start
}

/** Records `latencyNs[k]` for each operation `op(k)` awaited by `producers` concurrent loops. */
export async function runProducers(
  count: number,
  producers: number,
  op: (i: number) => Promise<void>,
  untimed = 0,
  /** Called once the untimed ops are done, just before the timed ones start. */
  onTimed?: () => void,
): Promise<{ seconds: number; latencyNs: Float64Array; threads: ThreadTimes | undefined }> {
  // The untimed ops first, numbered after the timed ones (count, count + 1, ...), by the same producers.
  let next = count
  const warm = async () => {
    for (let i = next++; i < count + untimed; i = next++) await op(i)
  }
  await Promise.all(Array.from({ length: producers }, warm))
  const latencyNs = new Float64Array(count)
  next = 0
  onTimed?.()
  const started = now()
  const clock = threadClock()
  const loop = async () => {
    for (let i = next++; i < count; i = next++) {
      const t0 = process.hrtime.bigint()
      await op(i)
      latencyNs[i] = Number(process.hrtime.bigint() - t0)
    }
  }
  await Promise.all(Array.from({ length: producers }, loop))
  const seconds = secondsSince(started)
  return { seconds, latencyNs, threads: threadTimesSince(clock) }
}

/**
 * What `parse` returns (a parseArgs call), or null once its error has been printed with `usage`
 * and the exit status set to 2: a bad option is a usage error, not a stack trace.
 */
export function parseOrUsage<T>(parse: () => T, usage: string): T | null {
  try {
    return parse()
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${usage}`)
    process.exitCode = 2
    return null
  }
}

/**
 * A script's options (parseArgs of `config`, whose options include `help`); null when the script
 * stops here: --help printed the usage, or a bad option printed it on stderr with exit code 2.
 */
export function scriptOptions<T extends ParseArgsConfig>(config: T, usage: string): ReturnType<typeof parseArgs<T>>['values'] | null {
  const parsed = parseOrUsage(() => parseArgs(config), usage)
  if (parsed === null) return null
  if ((parsed.values as { help?: unknown }).help === true) {
    process.stdout.write(usage)
    return null
  }
  return parsed.values
}

/**
 * A script's integer options (`values` as parseArgs gives them), each at least its minimum in
 * `minimums`; null, with `message` and the usage on stderr and exit code 2, when one is not.
 */
export function integerOptions<K extends string>(
  values: { readonly [name: string]: unknown },
  minimums: Readonly<Record<K, number>>,
  message: string,
  usage: string,
): Record<K, number> | null {
  const numbers = {} as Record<K, number>
  for (const name of Object.keys(minimums) as K[]) {
    const value = Number(values[name])
    if (!Number.isSafeInteger(value) || value < minimums[name]) {
      process.stderr.write(`${message}\n${usage}`)
      process.exitCode = 2
      return null
    }
    numbers[name] = value
  }
  return numbers
}
