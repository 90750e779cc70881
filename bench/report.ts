// The benchmark's report: every engine's figures side by side (the median of the runs, with their
// spread), the two limits measured in the same run, then issue 22's targets as ratios against lmdb
// and as fractions of the limits, as text, JSON and Markdown. Ratios are marked not valid when the
// machine was busy at the start (load average above 1).
import * as os from 'node:os'

import { FIRST_PASS_RUNS } from './first-pass-runs.js'
import { type LimitsResult, PUT_LOOP_MESSAGES, WORK_SLICE } from './limits.js'
import { formatProfileSummary, type ProfileSummary } from './profile.js'
import {
  ENGINES,
  SCAN_BATCH,
  SCAN_RUNS,
  SCAN_STEADY_WARMUP_RUNS,
  PUT_BATCH,
  PUT_WARMUP,
  PUT_WARMUP_STORES,
  QUEUES,
  SCAN_WARMUP_RUNS,
  spreadOf,
  SYNC_PRODUCERS,
  SYNC_WARMUP,
  TOPICS,
  type BenchConfig,
  type EngineName,
  type EngineResult,
  type Spread,
  type ThreadTimes,
} from './workload.js'

/** Above this 1-minute load average at the start, ratios between engines are not valid. */
export const MAX_LOAD = 1

/** Everything one invocation measured: each run's engines (in the run's order) and limits. */
export interface BenchRuns {
  config: BenchConfig
  /** Per run, each engine's result (an engine that failed in a run is missing from it). */
  runs: Partial<Record<EngineName, EngineResult>>[]
  /** Per run, the order the engines ran in. */
  orders: EngineName[][]
  /** Per run, the limits (undefined when their child failed). */
  limits: (LimitsResult | undefined)[]
  /** The load averages (1, 5, 15 min) at the start, and whether ratios are valid. */
  load: { atStart: number[]; valid: boolean }
  errors: string[]
  /** CPU profile summaries of mqstore (--cpu-prof): one extra run after the measured ones. */
  profiles: { run: 'profiled'; file: string; summaries: ProfileSummary[] }[]
}

type Pick = (r: EngineResult) => number | undefined

/** An engine's figure over the runs: median and spread. */
export function figure(b: BenchRuns, engine: EngineName, pick: Pick): Spread | undefined {
  return spreadOf(b.runs.map((run) => (run[engine] === undefined ? undefined : pick(run[engine] as EngineResult))))
}

export type LimitName =
  | 'jsEncode'
  | 'putLoopEncode'
  | 'putLoopWork'
  | 'putLoopWorkFirstPass'
  | 'putLoopWorkFirstPassAhead'
  | 'memcpy'
  | 'scatteredCopy'
  | 'pageFaultUs'
  | 'groupSyncMs'
  | 'privateCopyP99Us'
  | 'lookupTouches'
  | 'lookupTouchesOnly'
  | 'arrayBufferNs'
  | 'arrayBufferUnsweptNs'

export function limitFigure(b: BenchRuns, limit: LimitName): Spread | undefined {
  return spreadOf(b.limits.map((l) => l?.[limit]))
}

/** The node flags the engines' children inherit (the bench's own profiling flags aside). */
export function nodeFlags(): string[] {
  return process.execArgv.filter((flag) => !flag.startsWith('--cpu-prof'))
}

function nodeFlagsText(): string {
  const flags = nodeFlags()
  return flags.length === 0 ? 'no node flags' : `node flags: ${flags.join(' ')}`
}

/** What every ratio carries when the machine was busy at the start. */
export function invalidMark(b: BenchRuns): string {
  return b.load.valid ? '' : `not valid: load average ${b.load.atStart[0].toFixed(2)} at start`
}

/** A ratio as the report prints it: '1.23x', marked when not valid. */
export function ratioText(value: number | undefined, b: BenchRuns, suffix = 'x'): string {
  if (value === undefined || !Number.isFinite(value)) return '-'
  const text = `${fmt(value, 2)}${suffix}`
  const mark = invalidMark(b)
  return mark === '' ? text : `${text} (${mark})`
}

type Direction = 'higher' | 'lower'

interface Row {
  phase: string
  unit: string
  direction: Direction
  value: Pick
  digits: number
  /** The limit the mqstore figure is read against. */
  limit?: LimitName
}

const GB = 1e9

/** `total / count`, undefined when either is unknown (an old result, or a platform without the count). */
function perMessage(total: number | undefined, count: number | undefined): number | undefined {
  return total === undefined || count === undefined || count === 0 ? undefined : total / count
}

/** `ns` as a share of the phase's wall time; undefined when unknown. */
function perCommit(total: number | undefined, commits: { commits: number } | undefined): number | undefined {
  return total === undefined || commits === undefined || commits.commits <= 0 ? undefined : total / commits.commits
}

function share(ns: number | undefined, threads: ThreadTimes | undefined): number | undefined {
  return ns === undefined || threads === undefined || threads.wallNs <= 0 ? undefined : ns / threads.wallNs
}

function rate(bytes: number, ms: number): number {
  return bytes / GB / (ms / 1000)
}

const ROWS: Row[] = [
  {
    phase: 'put, putMessages batches (ASYNC, queues + index)',
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.put?.rate,
    limit: 'jsEncode',
  },
  {
    phase: 'put, against the put loop with an engine that only encodes',
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.put?.rate,
    limit: 'putLoopEncode',
  },
  {
    phase: "put, against the put loop with an engine that does the put's own work in one pass",
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.put?.rate,
    limit: 'putLoopWork',
  },
  {
    phase: "put, against that engine's first pass in a process of its own, as the put phase's",
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.put?.rate,
    limit: 'putLoopWorkFirstPass',
  },
  {
    phase: 'put, against that first pass with its new memory faulted in ahead by a thread of its own',
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.put?.rate,
    limit: 'putLoopWorkFirstPassAhead',
  },
  {
    phase: `scan one queue, getMessage ${SCAN_BATCH} at a time`,
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.scan?.rate,
    limit: 'memcpy',
  },
  {
    phase: 'scan one queue, consume()',
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.scanConsume?.rate,
    limit: 'memcpy',
  },
  {
    phase: `scan one queue, getMessage ${SCAN_BATCH} at a time, a fresh process's first passes`,
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.scan?.first?.rate,
    limit: 'memcpy',
  },
  {
    phase: "scan one queue, consume(), a fresh process's first passes",
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.scanConsume?.first?.rate,
    limit: 'memcpy',
  },
  {
    phase: `scan one queue, getMessage ${SCAN_BATCH} at a time, zero-copy (copyMessageBody: false)`,
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.scanZeroCopy?.rate,
  },
  {
    phase: `scan a compacted queue (each key put twice), getMessage ${SCAN_BATCH} at a time`,
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.scanCompacted?.rate,
  },
  {
    phase: `scan one queue, getMessage ${SCAN_BATCH} at a time, a read-only opener (pread)`,
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.scanReader?.rate,
  },
  { phase: 'lookup by key', unit: 'lookups/s', direction: 'higher', digits: 0, value: (r) => r.lookup?.rate, limit: 'lookupTouches' },
  {
    phase: 'lookup by key, a read-only opener (pread)',
    unit: 'lookups/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.lookupReader?.rate,
  },
  {
    phase: 'lookup by key, zero-copy (copyMessageBody: false)',
    unit: 'lookups/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.lookupZeroCopy?.rate,
  },
  { phase: 'lookup latency p50', unit: 'us', direction: 'lower', digits: 2, value: (r) => r.lookup?.latencyUs.p50 },
  { phase: 'lookup latency p99', unit: 'us', direction: 'lower', digits: 2, value: (r) => r.lookup?.latencyUs.p99 },
  { phase: 'lookup latency p99.9', unit: 'us', direction: 'lower', digits: 2, value: (r) => r.lookup?.latencyUs.p999 },
  {
    phase: 'lookup latency p99, the same keys again',
    unit: 'us',
    direction: 'lower',
    digits: 2,
    value: (r) => r.lookup?.repeatLatencyUs?.p99,
  },
  {
    phase: 'lookup latency p99, zero-copy',
    unit: 'us',
    direction: 'lower',
    digits: 2,
    value: (r) => r.lookupZeroCopy?.latencyUs.p99,
  },
  {
    phase: 'lookup latency p99, zero-copy, the same keys again',
    unit: 'us',
    direction: 'lower',
    digits: 2,
    value: (r) => r.lookupZeroCopy?.repeatLatencyUs?.p99,
  },
  { phase: `SYNC put, ${SYNC_PRODUCERS} producers`, unit: 'msg/s', direction: 'higher', digits: 0, value: (r) => r.sync?.rate },
  { phase: 'SYNC put latency p50', unit: 'us', direction: 'lower', digits: 0, value: (r) => r.sync?.latencyUs.p50 },
  { phase: 'SYNC put latency p99', unit: 'us', direction: 'lower', digits: 0, value: (r) => r.sync?.latencyUs.p99 },
  {
    phase: 'put in-process, batches (ASYNC, shareWrites store)',
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.forward?.inProcessRate,
  },
  {
    phase: 'put forwarded from another process, batches (connect())',
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.forward?.forwardedRate,
  },
  {
    phase: 'reader in another process: follow latency p50',
    unit: 'ms',
    direction: 'lower',
    digits: 2,
    value: (r) => r.follow?.latencyMs.p50,
  },
  {
    phase: 'reader in another process: follow latency p99',
    unit: 'ms',
    direction: 'lower',
    digits: 2,
    value: (r) => r.follow?.latencyMs.p99,
  },
  { phase: 'reader waiting idle: CPU', unit: '% core', direction: 'lower', digits: 2, value: (r) => r.follow?.idleCpuPercent },
  {
    phase: 'replicated to a slave in another process, batches (ASYNC_MASTER)',
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.replicate?.rate,
  },
  {
    phase: 'put latency p50, ASYNC_MASTER with a slave',
    unit: 'us',
    direction: 'lower',
    digits: 0,
    value: (r) => r.replicate?.asyncLatencyUs.p50,
  },
  {
    phase: 'put latency p99, ASYNC_MASTER with a slave',
    unit: 'us',
    direction: 'lower',
    digits: 0,
    value: (r) => r.replicate?.asyncLatencyUs.p99,
  },
  {
    phase: 'put latency p50, SYNC_MASTER (slave ack)',
    unit: 'us',
    direction: 'lower',
    digits: 0,
    value: (r) => r.replicate?.syncLatencyUs.p50,
  },
  {
    phase: 'put latency p99, SYNC_MASTER (slave ack)',
    unit: 'us',
    direction: 'lower',
    digits: 0,
    value: (r) => r.replicate?.syncLatencyUs.p99,
  },
  { phase: 'slave lag under steady load p50', unit: 'ms', direction: 'lower', digits: 2, value: (r) => r.replicate?.steady.lagMs.p50 },
  { phase: 'slave lag under steady load p99', unit: 'ms', direction: 'lower', digits: 2, value: (r) => r.replicate?.steady.lagMs.p99 },
  { phase: 'timer insert (put until in the wheel)', unit: 'msg/s', direction: 'higher', digits: 0, value: (r) => r.timer?.rate },
  { phase: 'timer delivery lag p50, N pending', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.timer?.lagMs.p50 },
  { phase: 'timer delivery lag p99, N pending', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.timer?.lagMs.p99 },
  {
    phase: 'timer RSS growth, N pending',
    unit: 'MiB',
    direction: 'lower',
    digits: 1,
    value: (r) => (r.timer === undefined ? undefined : r.timer.rssGrowthBytes / 2 ** 20),
  },
  {
    phase: 'JS-thread page faults per message: put',
    unit: 'faults',
    direction: 'lower',
    digits: 3,
    value: (r) => perMessage(r.put?.jsThreadFaults, r.put?.count),
  },
  {
    phase: 'put: JS thread on a CPU, share of the put time',
    unit: 'share',
    direction: 'higher',
    digits: 2,
    value: (r) => share(r.put?.threads?.jsRunNs, r.put?.threads),
  },
  {
    phase: 'put: JS thread ready but waiting for a CPU, share of the put time',
    unit: 'share',
    direction: 'lower',
    digits: 2,
    value: (r) => share(r.put?.threads?.jsWaitNs, r.put?.threads),
  },
  {
    phase: "put: the process's other threads' CPU time, share of the put time",
    unit: 'share',
    direction: 'lower',
    digits: 2,
    value: (r) => share(r.put?.threads?.otherCpuNs, r.put?.threads),
  },
  {
    phase: 'SYNC put: JS thread on a CPU, share of the phase',
    unit: 'share',
    direction: 'higher',
    digits: 2,
    value: (r) => share(r.sync?.threads?.jsRunNs, r.sync?.threads),
  },
  {
    phase: 'SYNC put: puts answered per group commit (mqstore)',
    unit: 'puts',
    direction: 'higher',
    digits: 1,
    value: (r) => perCommit(r.sync?.groupCommits?.requests, r.sync?.groupCommits),
  },
  {
    phase: 'SYNC put: mean group commit, the write and the sync on the libuv pool (mqstore)',
    unit: 'us',
    direction: 'lower',
    digits: 0,
    value: (r) => perCommit(r.sync?.groupCommits?.micros, r.sync?.groupCommits),
  },
  {
    phase: 'SYNC put: time in group commits, share of the phase (mqstore)',
    unit: 'share',
    direction: 'higher',
    digits: 2,
    value: (r) =>
      r.sync?.groupCommits === undefined || r.sync.seconds <= 0 ? undefined : r.sync.groupCommits.micros / 1e6 / r.sync.seconds,
  },
  {
    phase: 'JS-thread page faults per message: scan, getMessage / getRange',
    unit: 'faults',
    direction: 'lower',
    digits: 3,
    value: (r) => perMessage(r.scan?.jsThreadFaults, r.scan === undefined ? undefined : r.scan.count * r.scan.runs.length),
  },
  {
    phase: "JS-thread page faults per message: scan, getMessage / getRange, a fresh process's first passes",
    unit: 'faults',
    direction: 'lower',
    digits: 3,
    value: (r) =>
      perMessage(r.scan?.first?.jsThreadFaults, r.scan?.first === undefined ? undefined : r.scan.count * r.scan.first.runs.length),
  },
  {
    phase: 'JS-thread page faults per lookup',
    unit: 'faults',
    direction: 'lower',
    digits: 3,
    value: (r) => perMessage(r.lookup?.jsThreadFaults, r.lookup?.count),
  },
  { phase: 'reopen of the put store: close', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.reopen?.closeMs },
  { phase: 'reopen of the put store: open', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.reopen?.openMs },
  {
    phase: "reopen of the put store: a second close and open, the open's code run once before",
    unit: 'ms',
    direction: 'lower',
    digits: 1,
    value: (r) => r.reopen?.secondOpenMs,
  },
  { phase: 'big store: clean open', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.big?.cleanOpenMs },
  { phase: 'big store: open after SIGKILL', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.big?.crashOpenMs },
  {
    phase: 'big store: open after SIGKILL, log bytes recovered',
    unit: 'GB/s',
    direction: 'higher',
    digits: 2,
    value: (r) => (r.big === undefined ? undefined : rate(r.big.logicalBytes, r.big.crashOpenMs)),
  },
  { phase: 'big store: open after a power cut', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.big?.rebootOpenMs },
  {
    phase: 'big store: recovery scan (after a power cut)',
    unit: 'GB/s',
    direction: 'higher',
    digits: 2,
    value: (r) => recoveryRate(r),
  },
  {
    phase: 'big store: raw read of its commit log (1 MiB reads into one buffer)',
    unit: 'GB/s',
    direction: 'higher',
    digits: 2,
    value: (r) => rawReadRate(r),
  },
  {
    phase: 'big store: recovery scan after a power cut / raw read',
    unit: 'x',
    direction: 'higher',
    digits: 2,
    value: (r) => {
      const scan = recoveryRate(r)
      const raw = rawReadRate(r)
      return scan === undefined || raw === undefined || raw <= 0 ? undefined : scan / raw
    },
  },
  {
    phase: 'RSS per body byte after put',
    unit: 'x',
    direction: 'lower',
    digits: 2,
    value: (r) => (r.put === undefined ? undefined : r.put.rssBytes / r.put.bodyBytes),
  },
  {
    phase: 'disk per body byte after put',
    unit: 'x',
    direction: 'lower',
    digits: 2,
    value: (r) => (r.put === undefined ? undefined : r.put.diskBytes / r.put.bodyBytes),
  },
  {
    phase: 'big store: disk per logical byte',
    unit: 'x',
    direction: 'lower',
    digits: 2,
    value: (r) => (r.big === undefined ? undefined : r.big.diskBytes / r.big.logicalBytes),
  },
]

export interface TargetOutcome {
  phase: string
  target: string
  mqstore: string
  lmdb: string
  ratio: string
  result: 'PASS' | 'MISS' | 'n/a' | 'reported' | 'not valid'
}

type Judge = (b: BenchRuns) => Omit<TargetOutcome, 'phase' | 'target'>

/** A throughput target: mqstore / lmdb >= factor (medians; not valid on a busy machine). */
function ratioJudge(pick: Pick, factor: number, unit: string, peerPick = pick): Judge {
  return (b) => {
    const mq = figure(b, 'mqstore', pick)?.median
    const peer = figure(b, 'lmdb', peerPick)?.median
    const ratio = mq !== undefined && peer !== undefined && peer > 0 ? mq / peer : undefined
    return {
      mqstore: mq === undefined ? '-' : `${fmt(mq, 0)} ${unit}`,
      lmdb: peer === undefined ? '-' : `${fmt(peer, 0)} ${unit}`,
      ratio: ratioText(ratio, b),
      result: ratio === undefined ? 'n/a' : !b.load.valid ? 'not valid' : ratio >= factor ? 'PASS' : 'MISS',
    }
  }
}

/** mqstore's figure as a fraction of a limit measured in the same run: >= fraction. */
function limitJudge(pick: Pick, limit: LimitName, fraction: number, unit: string): Judge {
  return (b) => {
    const mq = figure(b, 'mqstore', pick)?.median
    const bound = limitFigure(b, limit)?.median
    const share = mq !== undefined && bound !== undefined && bound > 0 ? mq / bound : undefined
    return {
      mqstore: mq === undefined ? '-' : `${fmt(mq, 0)} ${unit}`,
      lmdb: bound === undefined ? '-' : `limit ${fmt(bound, 0)} ${unit}`,
      ratio: ratioText(share, b, ' of the limit'),
      result: share === undefined ? 'n/a' : !b.load.valid ? 'not valid' : share >= fraction ? 'PASS' : 'MISS',
    }
  }
}

/** An absolute bound on an mqstore figure (lmdb's alongside when `peerPick` is given). */
function boundJudge(pick: Pick, ok: (v: number) => boolean, unit: string, digits: number, peerPick?: Pick): Judge {
  return (b) => {
    const mq = figure(b, 'mqstore', pick)?.median
    const peer = peerPick === undefined ? undefined : figure(b, 'lmdb', peerPick)?.median
    return {
      mqstore: mq === undefined ? '-' : `${fmt(mq, digits)} ${unit}`,
      lmdb: peer === undefined ? '-' : `${fmt(peer, digits)} ${unit}`,
      ratio: mq !== undefined && peer !== undefined && peer > 0 ? ratioText(mq / peer, b) : '-',
      result: mq === undefined ? 'n/a' : ok(mq) ? 'PASS' : 'MISS',
    }
  }
}

/** The scan's rate where it reads the log: after a power cut (older results: after any crash). */
const recoveryRate: Pick = (e) => {
  if (e.big === undefined) return undefined
  if (e.big.rebootOpenMs === undefined) return rate(e.big.scannedBytes, e.big.crashOpenMs)
  return rate(e.big.rebootScannedBytes ?? 0, e.big.rebootOpenMs)
}

/** The raw read of the big store's log, the bound of its recovery scan (results before it have none). */
const rawReadRate: Pick = (e) =>
  e.big?.rawReadMs === undefined || e.big.rawReadBytes === undefined ? undefined : rate(e.big.rawReadBytes, e.big.rawReadMs)

/** Close after a burst is "not a stall" (issue 22); the bench reads that as at most this long. */
export const CLOSE_STALL_MS = 50

const TARGETS: { phase: string; target: string; judge: Judge }[] = [
  {
    phase: 'put (putMessages batches, ASYNC_FLUSH, queues and index on)',
    target: '>= 8x lmdb',
    judge: ratioJudge((e) => e.put?.rate, 8, 'msg/s'),
  },
  {
    phase: 'put, against the JS encode limit of the same run',
    target: '>= 0.6 of the limit',
    judge: limitJudge((e) => e.put?.rate, 'jsEncode', 0.6, 'msg/s'),
  },
  {
    phase: `scan one queue in order, getMessage ${SCAN_BATCH} at a time`,
    target: '>= 10x lmdb',
    judge: ratioJudge((e) => e.scan?.rate, 10, 'msg/s'),
  },
  {
    phase: 'scan one queue in order, consume()',
    target: '>= 10x lmdb',
    judge: ratioJudge(
      (e) => e.scanConsume?.rate,
      10,
      'msg/s',
      (e) => e.scan?.rate,
    ),
  },
  { phase: 'lookup by key', target: '>= 4x lmdb', judge: ratioJudge((e) => e.lookup?.rate, 4, '/s') },
  {
    phase: 'lookup by key, p99',
    target: '<= 10 us',
    judge: boundJudge(
      (e) => e.lookup?.latencyUs.p99,
      (v) => v <= 10,
      'us',
      2,
      (e) => e.lookup?.latencyUs.p99,
    ),
  },
  { phase: `SYNC_FLUSH, ${SYNC_PRODUCERS} concurrent producers`, target: '>= 2x lmdb', judge: ratioJudge((e) => e.sync?.rate, 2, 'msg/s') },
  {
    phase: 'clean open of the put store (reopen)',
    target: '<= 10 ms',
    judge: boundJudge(
      (e) => e.reopen?.openMs,
      (v) => v <= 10,
      'ms',
      1,
      (e) => e.reopen?.openMs,
    ),
  },
  {
    phase: 'clean open of the big store',
    target: '<= 10 ms',
    judge: boundJudge(
      (e) => e.big?.cleanOpenMs,
      (v) => v <= 10,
      'ms',
      1,
    ),
  },
  {
    phase: 'crash recovery scan (open after a power cut)',
    target: '>= 1 GB/s',
    judge: boundJudge(recoveryRate, (v) => v >= 1, 'GB/s', 2),
  },
  {
    phase: 'crash recovery (open after SIGKILL), log bytes per second',
    target: '>= 1 GB/s',
    judge: boundJudge(
      (e) => (e.big === undefined ? undefined : rate(e.big.logicalBytes, e.big.crashOpenMs)),
      (v) => v >= 1,
      'GB/s',
      2,
    ),
  },
  {
    phase: 'close after the put phase',
    target: `not a stall (<= ${CLOSE_STALL_MS} ms)`,
    judge: boundJudge(
      (e) => e.reopen?.closeMs,
      (v) => v <= CLOSE_STALL_MS,
      'ms',
      1,
      (e) => e.reopen?.closeMs,
    ),
  },
  {
    phase: 'memory: RSS per stored body byte',
    target: 'reported',
    judge: (b) => {
      const pick: Pick = (e) => (e.put === undefined ? undefined : e.put.rssBytes / e.put.bodyBytes)
      const j = boundJudge(pick, () => true, 'x', 2, pick)(b)
      return { ...j, result: j.result === 'n/a' ? 'n/a' : 'reported' }
    },
  },
  {
    phase: 'disk per logical byte, big store',
    target: '<= 1.3x',
    judge: boundJudge(
      (e) => (e.big === undefined ? undefined : e.big.diskBytes / e.big.logicalBytes),
      (v) => v <= 1.3,
      'x',
      2,
    ),
  },
]

export function judgeTargets(b: BenchRuns): TargetOutcome[] {
  return TARGETS.map((t) => ({ phase: t.phase, target: t.target, ...t.judge(b) }))
}

export function missedTargets(b: BenchRuns): string[] {
  return judgeTargets(b)
    .filter((t) => t.result === 'MISS')
    .map((t) => t.phase)
}

export function fmt(value: number | undefined, digits: number): string {
  if (value === undefined || !Number.isFinite(value)) return '-'
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
}

/** A rate in short form: 1.23 M, 456 k, 78. */
export function fmtRate(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return '-'
  if (value >= 1e6) return `${(value / 1e6).toFixed(2)} M`
  if (value >= 1e4) return `${(value / 1e3).toFixed(0)} k`
  return value.toFixed(0)
}

function renderTable(header: string[], rows: string[][], rightAligned: Set<number>): string {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)))
  const line = (cells: string[]) =>
    cells
      .map((cell, c) => (rightAligned.has(c) ? cell.padStart(widths[c]) : cell.padEnd(widths[c])))
      .join('  ')
      .trimEnd()
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

function renderMarkdownTable(header: string[], rows: string[][], rightAligned: Set<number>): string {
  const escapeCell = (cell: string) => cell.replaceAll('|', '\\|')
  const align = header.map((_, c) => (rightAligned.has(c) ? '---:' : '---'))
  return [header, align, ...rows].map((cells, k) => `| ${(k === 1 ? cells : cells.map(escapeCell)).join(' | ')} |`).join('\n')
}

interface Table {
  header: string[]
  rows: string[][]
  right: Set<number>
}

interface Tables {
  title: string[]
  targets: Table
  limits: Table
  figures: Table
  spread: Table | null
  notes: string[]
  profiles: string[]
}

function loadText(load: number[]): string {
  return load.map((l) => l.toFixed(2)).join(' ')
}

function tables(b: BenchRuns): Tables {
  const { config } = b
  const runCount = b.runs.length
  const engines = ENGINES.filter((e) => b.runs.some((r) => r[e] !== undefined))
  const version = (e: EngineName) => b.runs.find((r) => r[e] !== undefined)?.[e]?.version ?? '?'
  const mark = invalidMark(b)
  const title = [
    `mqstore benchmark: ${fmt(config.count, 0)} messages of 256 B over 4 topics x 4 queues, unique key each; ` +
      `${fmt(config.lookups, 0)} lookups; ${fmt(config.syncCount, 0)} SYNC puts; big store ${fmt(config.bigBytes / 2 ** 20, 0)} MiB`,
    `node ${process.version} (${nodeFlagsText()}), ${os.platform()} ${os.arch()}, ${os.cpus().length} CPUs, ${fmt(os.totalmem() / 2 ** 30, 0)} GiB RAM; ` +
      `load average at the start ${loadText(b.load.atStart)}, at the end ${loadText(os.loadavg())}`,
    `${runCount} run(s), engines alternating (${b.orders.map((o) => o.join(' > ')).join('; ')}); every figure is the median of the runs`,
    engines.map((e) => `${e} ${version(e)}`).join(', '),
  ]
  if (mark !== '') {
    title.push(
      `RATIOS NOT VALID: the 1-minute load average was ${b.load.atStart[0].toFixed(2)} at the start (above ${MAX_LOAD}); ` +
        'other work on the cores skews engines differently. Every ratio below says so.',
    )
  }

  const figureRows: string[][] = []
  const spreadRows: string[][] = []
  for (const row of ROWS) {
    const values = ENGINES.map((e) => figure(b, e, row.value))
    if (values.every((v) => v === undefined)) continue
    const [m, l, q] = values.map((v) => v?.median)
    const bound = row.limit === undefined ? undefined : limitFigure(b, row.limit)?.median
    figureRows.push([
      row.phase,
      `${row.unit} ${row.direction === 'higher' ? '(+)' : '(-)'}`,
      fmt(m, row.digits),
      fmt(l, row.digits),
      fmt(q, row.digits),
      ratioText(m !== undefined && l !== undefined && l !== 0 ? m / l : undefined, b),
      ratioText(m !== undefined && q !== undefined && q !== 0 ? m / q : undefined, b),
      row.limit === undefined ? '' : ratioText(m !== undefined && bound !== undefined && bound > 0 ? m / bound : undefined, b, ''),
    ])
    spreadRows.push([
      row.phase,
      row.unit,
      ...values.map((v) => (v === undefined ? '-' : `${fmt(v.min, row.digits)} - ${fmt(v.max, row.digits)}`)),
    ])
  }

  const recordBytes = b.limits.find((l) => l !== undefined)?.recordBytes
  const rates = (v: Spread | undefined) => [fmt(v?.median, 0), v === undefined ? '-' : `${fmtRate(v.min)} - ${fmtRate(v.max)}`]
  const times = (v: Spread | undefined) => [fmt(v?.median, 2), v === undefined ? '-' : `${fmt(v.min, 2)} - ${fmt(v.max, 2)}`]
  const nanos = (v: Spread | undefined) => [fmt(v?.median, 0), v === undefined ? '-' : `${fmt(v.min, 0)} - ${fmt(v.max, 0)}`]
  const groupSync = limitFigure(b, 'groupSyncMs')
  // Each limit: what it is, its unit, its median and spread, and the rows read against it.
  const limitRows: string[][] = [
    [
      `JS encode of the bench's record (${recordBytes ?? '?'} B) into a pre-faulted Buffer`,
      'records/s',
      ...rates(limitFigure(b, 'jsEncode')),
      'put',
    ],
    [
      `the put phase's own loop (messages built, batches of ${PUT_BATCH} awaited, results checked) with an engine that only does that encode and answers each message`,
      'msg/s',
      ...rates(limitFigure(b, 'putLoopEncode')),
      'put (what the put phase measures for a store whose put is the encode alone)',
    ],
    [
      `the same loop with an engine that does, per message, the work a put cannot leave out, in one pass: the record encoded, its body's CRC (one native call per ${WORK_SLICE} records) written into it, a queue unit, the key's index entry, hash slot and header counts, a result object; every region pre-faulted`,
      'msg/s',
      ...rates(limitFigure(b, 'putLoopWork')),
      'put (what the put phase measures for a store whose put is that work with nothing around it)',
    ],
    [
      `that engine's first pass in a process of its own, as the put phase meets it: after ${PUT_WARMUP_STORES} warm-up passes of ${PUT_WARMUP.toLocaleString('en-US')}, one pass of ${PUT_LOOP_MESSAGES.toLocaleString('en-US')} into regions no pass wrote before (pre-faulted); median of ${FIRST_PASS_RUNS} processes`,
      'msg/s',
      ...rates(limitFigure(b, 'putLoopWorkFirstPass')),
      "put (the same work in the put phase's conditions: a process's first long pass, over memory new to it)",
    ],
    [
      `the same first pass, its regions new to the process and faulted in during the pass by a thread of its own, ahead of the writer (one write a page, the index's slots and the pass's entries first, then the queues, then the log in order); median of ${FIRST_PASS_RUNS} processes`,
      'msg/s',
      ...rates(limitFigure(b, 'putLoopWorkFirstPassAhead')),
      "put (a store's put writes into pages new to it, which mqstore faults in on the libuv pool: the same work paying for its new memory as the put does)",
    ],
    [
      `memcpy of ${recordBytes ?? '?'}-byte records into a pre-faulted Buffer`,
      'records/s',
      ...rates(limitFigure(b, 'memcpy')),
      'scan, consume()',
    ],
    [
      `memcpy of ${recordBytes ?? '?'}-byte records from one queue's places in a shared log (one in ${TOPICS * QUEUES}, 400,000 records)`,
      'records/s',
      ...rates(limitFigure(b, 'scatteredCopy')),
      "scan, consume() (a queue's records lie a page apart in the commit log)",
    ],
    [
      'first write to a page of fresh memory (a page fault)',
      'us',
      ...times(limitFigure(b, 'pageFaultUs')),
      'JS-thread page faults of every phase',
    ],
    [
      `durable write of a group of ${SYNC_PRODUCERS} records (one pwrite + fdatasync, preallocated file)`,
      'ms',
      ...times(groupSync),
      `SYNC put: at most ${SYNC_PRODUCERS} / that = ${groupSync === undefined ? '-' : fmt((SYNC_PRODUCERS * 1000) / groupSync.median, 0)} msg/s`,
    ],
    [
      "a lookup's memory touches alone (hash slot, index entry, record head, then its properties, each read depending on the one before, in regions of the put phase's store's sizes) and the body's private copy",
      'lookups/s',
      ...rates(limitFigure(b, 'lookupTouches')),
      'lookup (each touch a cache and a TLB miss, as for a random key)',
    ],
    [
      'the same touches without the private copy',
      'lookups/s',
      ...rates(limitFigure(b, 'lookupTouchesOnly')),
      'lookup: 1 / this - 1 / the row above is the time of the copy and its buffer',
    ],
    [
      'one 256-byte body copied into a buffer of its own (allocUnsafeSlow + copy), p99, each timed alone',
      'us',
      ...times(limitFigure(b, 'privateCopyP99Us')),
      'lookup p99 (a safe read makes at least one such buffer)',
    ],
    [
      "one 256-byte ArrayBuffer (allocUnsafeSlow) in a loop that leaves garbage, with V8's concurrent array-buffer sweeping (the default)",
      'ns',
      ...nanos(limitFigure(b, 'arrayBufferNs')),
      "scan: lmdb's getRange makes one per value, mqstore's getMessage one per read of 32",
    ],
    [
      'the same with --no-concurrent-array-buffer-sweeping (in the limits child only)',
      'ns',
      ...nanos(limitFigure(b, 'arrayBufferUnsweptNs')),
      `scan (the engines ran with ${nodeFlagsText()})`,
    ],
  ]

  const targetRows = judgeTargets(b).map((t) => [t.phase, t.target, t.mqstore, t.lmdb, t.ratio, t.result])
  const mq = b.runs.find((r) => r.mqstore !== undefined)?.mqstore
  const lm = b.runs.find((r) => r.lmdb !== undefined)?.lmdb
  const notes = [
    `runs: ${runCount}; each engine runs in its own child process per run (unless --only), and each run starts with a different ` +
      'engine, so that none always runs first or last; the spread (min - max over the runs) is listed under the figures and in the JSON.',
    `limits: measured in a child process of their own, without the node flags the engines run with, at the start of each run (median of ${runCount}). The JS encode limit writes ` +
      'every field, the body, topic and KEYS bytes of a RocketMQ record with DataView and byte writes (the body CRC is written, not computed: that is native work); the memcpy limit copies whole records (the fastest of copyWithin, Buffer.copy and set). Put is read against the first, scan and consume() against the second. ' +
      "The put loop's limit runs the put phase's own loop (the same message building, batches and awaits) with an engine that does nothing but that encode and a result object per message: the put phase's figure for a store whose put is the encode alone. " +
      "The work engine's limit runs the same loop with an engine that also computes the body CRCs (one native call per slice), writes a queue unit and the key's index entry, slot and header counts per message, into pre-faulted regions: the put phase's figure for a store whose put is the work it cannot leave out, with no files, reservations, checks or dispatch around it. Its first-pass figure runs that engine as the put phase runs an engine: in a process of its own, after the same warm-up, one pass into regions no pass wrote before (pre-faulted, as a store's pool faults its files in ahead of the writer); the work engine's own figure is passes over the same regions after an untimed one. Its second first-pass figure gives the regions back their cost: new to the process, faulted in during the pass by a worker thread of its own ahead of the writer, as a store's new pages are by its pool (on a virtual machine a page new to the guest costs several microseconds). " +
      'The page-fault figure is the first write to a page of fresh memory; the JS-thread page-fault rows count the faults each phase took on the JS thread (Linux, /proc/thread-self/stat), so that faults x that figure is the time the phase spent in them. ' +
      "The private-copy figure is the p99 of one body copied into a buffer of its own, each copy timed alone as the lookups are: every safe read makes at least one such buffer (its malloc on the JS thread meets the frees of V8's concurrent array-buffer sweeper on the allocator's lock), so no safe lookup's p99 is below it. " +
      "The two ArrayBuffer figures are that meeting's cost per buffer, with the sweeper on and off: where they differ widely, an engine that makes a buffer per value (lmdb's getRange) spends most of its scan there, and its scan figure moves with the flag (run the bench as node --no-concurrent-array-buffer-sweeping dist/bench/run.js to give it to every engine).",
    `put: every engine first puts ${fmt(PUT_WARMUP, 0)} messages (or the count, if smaller) into each of ${PUT_WARMUP_STORES} scratch stores of its own in turn, untimed, so that the JIT has compiled the put path ` +
      '(V8 compiles again the code it built for the first store once a second one widens the shapes it assumed); the timed put starts in a new store.',
    `scan: full passes over topic BenchTopic0 queue 0 (${fmt(mq?.scan?.count ?? lm?.scan?.count, 0)} messages): ${SCAN_WARMUP_RUNS} untimed, ${SCAN_RUNS} timed ("a fresh process's first passes"), ` +
      `${SCAN_STEADY_WARMUP_RUNS} untimed, then ${SCAN_RUNS} timed again: the scan rows and their targets are the median of these last, the rate a process that has been reading for a while settles at. ` +
      "In the first passes every engine's memory is still growing: the buffers a read hands out come from fresh pages (a page fault each) until the ones the garbage collector frees come back; and lmdb's getRange makes an ArrayBuffer per value, whose allocations meet the concurrent array-buffer sweeper more often as its garbage grows (mqstore makes one per read of 32). " +
      'lmdb reads the same messages with one getRange; both consume() and getMessage are compared with it.',
    'mqstore runs with its safe read defaults: every read copies what it serves, and checks each body CRC.',
    'lookup: latency of each lookup timed alone with process.hrtime.bigint(); throughput = lookups / total loop time.',
    'big store: written with the put workload by a child process that SIGKILLs itself; "open after SIGKILL" includes ' +
      'the recovery scan, the re-dispatch and the sync of what the dead process left unsynced. A SIGKILL of this boot keeps ' +
      'the page cache, so that open resumes where dispatch had got to; "open after a power cut" opens a copy whose abort file ' +
      'names no boot (as after a reboot; fsynced first, so that nothing of the copy is left to write back), which scans from ' +
      'the file the checkpoint names and indexes again every record after the entries its index mark names as on disk ' +
      '(docs/recovery.md, I1c; the slot table is rebuilt, as nothing in a burst syncs it): the scan rate ' +
      'is its scanned bytes / its open time, and is read against a raw read of the same commit-log files afterwards ' +
      '(1 MiB positioned reads into one buffer, from the page cache as the open found them). Logical bytes = commit-log record bytes; ' +
      'disk = allocated blocks of the whole directory (commit log, consume queues, index, checkpoint) after a clean close.',
    `close: issue 22 asks that close after a burst is not a stall; the bench counts up to ${CLOSE_STALL_MS} ms as not a stall.`,
  ]
  const forward = mq?.forward
  if (forward !== undefined) {
    const inProcess = figure(b, 'mqstore', (e) => e.forward?.inProcessRate)?.median
    const forwarded = figure(b, 'mqstore', (e) => e.forward?.forwardedRate)?.median
    notes.push(
      `forward: ${fmt(forward.count, 0)} messages put in-process, then ${fmt(forward.count, 0)} more forwarded by a producer in another process ` +
        `(MessageStore.connect) into the same shareWrites store, both in putMessages batches of ${forward.batch} after an untimed warm-up; each side builds its messages in its own process ` +
        `(the forwarded ones also cross the socket, encoded and decoded); forwarded / in-process = ` +
        `${inProcess === undefined || forwarded === undefined ? '—' : (forwarded / inProcess).toFixed(2)} (medians of the runs).`,
    )
  }
  const follow = mq?.follow
  if (follow !== undefined) {
    notes.push(
      `follow: ${fmt(follow.count, 0)} messages put one at a time, 1-5 ms apart, by the writer and consumed by a read-only opener in another ` +
        "process (woken through the store's arrivals file); latency = put call to arrival in consume(), wall clock across the two processes. " +
        `Then the reader waits ${fmt(follow.idleMs / 1000, 0)} s with nothing arriving: its CPU time (process.cpuUsage) in % of one core.`,
    )
  }
  const replicate = mq?.replicate
  if (replicate !== undefined) {
    notes.push(
      `replicate: a master and a slave, each in a child process of its own, over loopback (ASYNC_FLUSH on both). On an ASYNC_MASTER, ` +
        `${fmt(replicate.count, 0)} messages put in batches of ${replicate.batch} after an untimed warm-up; the rate counts until the slave acknowledged the last byte ` +
        `(in its commit log, not yet on its disk). Then ${fmt(replicate.latencyCount, 0)} puts one at a time on that ASYNC_MASTER and as many on a SYNC_MASTER ` +
        `(each waits for the slave's acknowledgement). Lag: ${fmt(replicate.steady.rate, 0)} msg/s for ${replicate.steady.seconds} s in batches of 10; ` +
        `time from a put to the acknowledgement of its end, as the master sees it; at most ${fmt(replicate.steady.lagBytesMax, 0)} bytes behind.`,
    )
  }
  const timer = mq?.timer
  if (timer !== undefined) {
    notes.push(
      `timer: ${fmt(timer.count, 0)} messages with deliverAt 1-7 days ahead put in batches of 1,000 into a new store (timerPrecisionMs ${timer.precisionMs}); ` +
        'insert rate = messages / time from the first put until stats().timer.pending counts them all. Then ' +
        `${fmt(timer.due, 0)} timers due 3 s ahead, spread over a second, are consumed from their topic while the others stay pending: ` +
        'lag = arrival in consume() minus deliverAt. RSS growth from before the puts to after their entry ' +
        `(private memory: ${fmt(timer.anonGrowthBytes / 2 ** 20, 1)} MiB in the last run).`,
    )
  }
  if (b.runs.some((r) => ENGINES.some((engine) => r[engine]?.sync !== undefined))) {
    notes.push(
      `SYNC: every engine first makes ${fmt(SYNC_WARMUP, 0)} untimed durable puts into the same store, by the same producers, then times the rest.`,
    )
  }
  for (const engine of ENGINES) {
    const sync = b.runs.find((r) => r[engine]?.sync !== undefined)?.[engine]?.sync
    if (sync === undefined) continue
    notes.push(`SYNC ${engine}: ${sync.mode}.`)
    const alternative = figure(b, engine, (e) => e.sync?.alternative?.rate)
    if (sync.alternative !== undefined && alternative !== undefined) {
      const mqSync = figure(b, 'mqstore', (e) => e.sync?.rate)?.median
      notes.push(
        `SYNC ${engine} without waiting for the fsync (${sync.alternative.mode}): ${fmt(alternative.median, 0)} msg/s` +
          (mqSync !== undefined ? `; mqstore/that = ${ratioText(mqSync / alternative.median, b)}` : ''),
      )
    }
  }
  for (const error of b.errors) notes.push(`ERROR ${error}`)

  const profiles: string[] = []
  for (const p of b.profiles) {
    profiles.push(`mqstore, a run of its own after the measured ones (${p.file}), top self time per phase:`)
    for (const summary of p.summaries) profiles.push(...formatProfileSummary(summary).map((l) => `  ${l}`))
  }

  return {
    title,
    targets: { header: ['phase', 'target', 'mqstore', 'lmdb', 'mqstore/lmdb', 'result'], rows: targetRows, right: new Set([2, 3, 4]) },
    limits: { header: ['limit', 'unit', 'median', 'min - max', 'rows read against it'], rows: limitRows, right: new Set([2, 3]) },
    figures: {
      header: ['phase', 'unit', 'mqstore', 'lmdb', 'sqlite', 'mqstore/lmdb', 'mqstore/sqlite', 'mqstore/limit'],
      rows: figureRows,
      right: new Set([2, 3, 4, 5, 6, 7]),
    },
    spread:
      runCount > 1
        ? { header: ['phase', 'unit', ...ENGINES.map((e) => `${e} min - max`)], rows: spreadRows, right: new Set([2, 3, 4]) }
        : null,
    notes,
    profiles,
  }
}

/** The report as printed on stdout. */
export function textReport(b: BenchRuns): string {
  const t = tables(b)
  const out = [
    ...t.title,
    '',
    'Targets (issue 22), medians; ratios against lmdb and fractions of the limits measured in this run:',
    renderTable(t.targets.header, t.targets.rows, t.targets.right),
    '',
    'Limits:',
    renderTable(t.limits.header, t.limits.rows, t.limits.right),
    '',
    'All figures (medians):',
    renderTable(t.figures.header, t.figures.rows, t.figures.right),
    '(+) higher is better, (-) lower is better; ratios are mqstore / peer; mqstore/limit is the mqstore figure over its limit.',
  ]
  if (t.spread !== null) out.push('', 'Spread over the runs:', renderTable(t.spread.header, t.spread.rows, t.spread.right))
  out.push('', 'Notes:', ...t.notes.map((n) => `- ${n}`))
  if (t.profiles.length > 0) out.push('', 'CPU profiles (--cpu-prof):', ...t.profiles)
  return out.join('\n')
}

/** The same as Markdown, for bench/results/. */
export function markdownReport(b: BenchRuns): string {
  const t = tables(b)
  const out = [
    `# ${t.title[0]}`,
    '',
    ...t.title.slice(1).map((line) => `${line}  `),
    '',
    '## Targets',
    '',
    renderMarkdownTable(t.targets.header, t.targets.rows, t.targets.right),
    '',
    '## Limits',
    '',
    renderMarkdownTable(t.limits.header, t.limits.rows, t.limits.right),
    '',
    '## All figures (medians)',
    '',
    renderMarkdownTable(t.figures.header, t.figures.rows, t.figures.right),
    '',
    '(+) higher is better, (-) lower is better; ratios are mqstore / peer; mqstore/limit is the mqstore figure over its limit.',
  ]
  if (t.spread !== null) out.push('', '## Spread over the runs', '', renderMarkdownTable(t.spread.header, t.spread.rows, t.spread.right))
  out.push('', '## Notes', '', ...t.notes.map((n) => `- ${n}`))
  if (t.profiles.length > 0) out.push('', '## CPU profiles', '', '```', ...t.profiles, '```')
  out.push('')
  return out.join('\n')
}

/** The same as one JSON document: every run, each figure's median and spread, the targets. */
export function jsonReport(b: BenchRuns): unknown {
  const figures = ROWS.map((row) => ({
    phase: row.phase,
    unit: row.unit,
    limit: row.limit,
    engines: Object.fromEntries(ENGINES.map((e) => [e, figure(b, e, row.value) ?? null])),
  })).filter((f) => Object.values(f.engines).some((v) => v !== null))
  return {
    config: { ...b.config, phases: [...b.config.phases] },
    environment: {
      node: process.version,
      nodeFlags: nodeFlags(),
      platform: os.platform(),
      arch: os.arch(),
      cpus: os.cpus().length,
      totalMemory: os.totalmem(),
      loadAverageAtStart: b.load.atStart,
      loadAverageAtEnd: os.loadavg(),
      ratiosValid: b.load.valid,
    },
    orders: b.orders,
    limits: {
      runs: b.limits,
      jsEncode: limitFigure(b, 'jsEncode') ?? null,
      putLoopEncode: limitFigure(b, 'putLoopEncode') ?? null,
      putLoopWork: limitFigure(b, 'putLoopWork') ?? null,
      putLoopWorkFirstPass: limitFigure(b, 'putLoopWorkFirstPass') ?? null,
      putLoopWorkFirstPassAhead: limitFigure(b, 'putLoopWorkFirstPassAhead') ?? null,
      memcpy: limitFigure(b, 'memcpy') ?? null,
      scatteredCopy: limitFigure(b, 'scatteredCopy') ?? null,
      pageFaultUs: limitFigure(b, 'pageFaultUs') ?? null,
      groupSyncMs: limitFigure(b, 'groupSyncMs') ?? null,
      privateCopyP99Us: limitFigure(b, 'privateCopyP99Us') ?? null,
      lookupTouches: limitFigure(b, 'lookupTouches') ?? null,
      lookupTouchesOnly: limitFigure(b, 'lookupTouchesOnly') ?? null,
      arrayBufferNs: limitFigure(b, 'arrayBufferNs') ?? null,
      arrayBufferUnsweptNs: limitFigure(b, 'arrayBufferUnsweptNs') ?? null,
    },
    figures,
    runs: b.runs,
    targets: judgeTargets(b),
    profiles: b.profiles,
    errors: b.errors,
  }
}
