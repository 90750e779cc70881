// The benchmark's report: every engine's figures side by side, then the targets of the read/write
// path issue as ratios against lmdb measured in the same run, as text, JSON and Markdown.
import * as os from 'node:os'

import { ENGINES, SCAN_BATCH, SCAN_RUNS, SYNC_PRODUCERS, type BenchConfig, type EngineName, type EngineResult } from './workload.js'

export type Results = Partial<Record<EngineName, EngineResult>>

type Direction = 'higher' | 'lower'

interface Row {
  phase: string
  unit: string
  direction: Direction
  value: (r: EngineResult) => number | undefined
  digits: number
}

const GB = 1e9

function rate(bytes: number, ms: number): number {
  return bytes / GB / (ms / 1000)
}

const ROWS: Row[] = [
  { phase: 'put, putMessages batches (ASYNC, queues + index)', unit: 'msg/s', direction: 'higher', digits: 0, value: (r) => r.put?.rate },
  {
    phase: `scan one queue, getMessage ${SCAN_BATCH} at a time`,
    unit: 'msg/s',
    direction: 'higher',
    digits: 0,
    value: (r) => r.scan?.rate,
  },
  { phase: 'scan one queue, consume()', unit: 'msg/s', direction: 'higher', digits: 0, value: (r) => r.scanConsume?.rate },
  { phase: 'lookup by key', unit: 'lookups/s', direction: 'higher', digits: 0, value: (r) => r.lookup?.rate },
  { phase: 'lookup latency p50', unit: 'us', direction: 'lower', digits: 2, value: (r) => r.lookup?.latencyUs.p50 },
  { phase: 'lookup latency p99', unit: 'us', direction: 'lower', digits: 2, value: (r) => r.lookup?.latencyUs.p99 },
  { phase: 'lookup latency p99.9', unit: 'us', direction: 'lower', digits: 2, value: (r) => r.lookup?.latencyUs.p999 },
  { phase: `SYNC put, ${SYNC_PRODUCERS} producers`, unit: 'msg/s', direction: 'higher', digits: 0, value: (r) => r.sync?.rate },
  { phase: 'SYNC put latency p50', unit: 'us', direction: 'lower', digits: 0, value: (r) => r.sync?.latencyUs.p50 },
  { phase: 'SYNC put latency p99', unit: 'us', direction: 'lower', digits: 0, value: (r) => r.sync?.latencyUs.p99 },
  { phase: 'reopen of the put store: close', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.reopen?.closeMs },
  { phase: 'reopen of the put store: open', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.reopen?.openMs },
  { phase: 'big store: clean open', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.big?.cleanOpenMs },
  { phase: 'big store: open after SIGKILL', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.big?.crashOpenMs },
  {
    phase: 'big store: recovery scan',
    unit: 'GB/s',
    direction: 'higher',
    digits: 2,
    value: (r) => (r.big === undefined ? undefined : rate(r.big.scannedBytes, r.big.crashOpenMs)),
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
  result: 'PASS' | 'MISS' | 'n/a' | 'reported'
}

type Judge = (r: Results) => Omit<TargetOutcome, 'phase' | 'target'>

/** A throughput target: mqstore / lmdb >= factor (higher is better). */
function ratioJudge(pick: (r: EngineResult) => number | undefined, factor: number, unit: string, peerPick = pick): Judge {
  return (r) => {
    const mq = r.mqstore === undefined ? undefined : pick(r.mqstore)
    const peer = r.lmdb === undefined ? undefined : peerPick(r.lmdb)
    const ratio = mq !== undefined && peer !== undefined && peer > 0 ? mq / peer : undefined
    return {
      mqstore: mq === undefined ? '-' : `${fmt(mq, 0)} ${unit}`,
      lmdb: peer === undefined ? '-' : `${fmt(peer, 0)} ${unit}`,
      ratio: ratio === undefined ? '-' : `${fmt(ratio, 2)}x`,
      result: ratio === undefined ? 'n/a' : ratio >= factor ? 'PASS' : 'MISS',
    }
  }
}

/** An absolute bound on an mqstore figure. */
function boundJudge(
  pick: (r: EngineResult) => number | undefined,
  ok: (v: number) => boolean,
  unit: string,
  digits: number,
  peerPick?: (r: EngineResult) => number | undefined,
): Judge {
  return (r) => {
    const mq = r.mqstore === undefined ? undefined : pick(r.mqstore)
    const peer = r.lmdb === undefined || peerPick === undefined ? undefined : peerPick(r.lmdb)
    return {
      mqstore: mq === undefined ? '-' : `${fmt(mq, digits)} ${unit}`,
      lmdb: peer === undefined ? '-' : `${fmt(peer, digits)} ${unit}`,
      ratio: mq !== undefined && peer !== undefined && peer > 0 ? `${fmt(mq / peer, 2)}x` : '-',
      result: mq === undefined ? 'n/a' : ok(mq) ? 'PASS' : 'MISS',
    }
  }
}

const TARGETS: { phase: string; target: string; judge: Judge }[] = [
  {
    phase: 'put (putMessages batches, ASYNC_FLUSH, queues and index on)',
    target: '>= 8x lmdb (>= 1.5 M msg/s here)',
    judge: ratioJudge((e) => e.put?.rate, 8, 'msg/s'),
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
    phase: 'clean reopen of the big store',
    target: '<= 10 ms',
    judge: boundJudge(
      (e) => e.big?.cleanOpenMs,
      (v) => v <= 10,
      'ms',
      1,
    ),
  },
  {
    phase: 'crash recovery scan',
    target: '>= 1 GB/s',
    judge: boundJudge(
      (e) => (e.big === undefined ? undefined : rate(e.big.scannedBytes, e.big.crashOpenMs)),
      (v) => v >= 1,
      'GB/s',
      2,
    ),
  },
  {
    phase: 'memory: RSS per stored body byte',
    target: 'reported',
    judge: (r) => {
      const j = boundJudge(
        (e) => (e.put === undefined ? undefined : e.put.rssBytes / e.put.bodyBytes),
        () => true,
        'x',
        2,
        (e) => (e.put === undefined ? undefined : e.put.rssBytes / e.put.bodyBytes),
      )(r)
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

export function judgeTargets(results: Results): TargetOutcome[] {
  return TARGETS.map((t) => ({ phase: t.phase, target: t.target, ...t.judge(results) }))
}

export function missedTargets(results: Results): string[] {
  return judgeTargets(results)
    .filter((t) => t.result === 'MISS')
    .map((t) => t.phase)
}

function fmt(value: number | undefined, digits: number): string {
  if (value === undefined || !Number.isFinite(value)) return '-'
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
}

function ratio(mq: number | undefined, peer: number | undefined): string {
  if (mq === undefined || peer === undefined || peer === 0) return '-'
  return `${fmt(mq / peer, 2)}x`
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

interface Tables {
  title: string[]
  figures: { header: string[]; rows: string[][]; right: Set<number> }
  targets: { header: string[]; rows: string[][]; right: Set<number> }
  notes: string[]
}

function tables(config: BenchConfig, results: Results, errors: string[]): Tables {
  const mq = results.mqstore
  const title = [
    `mqstore benchmark: ${fmt(config.count, 0)} messages of 256 B over 4 topics x 4 queues, unique key each; ` +
      `${fmt(config.lookups, 0)} lookups; ${fmt(config.syncCount, 0)} SYNC puts; big store ${fmt(config.bigBytes / 2 ** 20, 0)} MiB`,
    `node ${process.version}, ${os.platform()} ${os.arch()}, ${os.cpus().length} CPUs, ${fmt(os.totalmem() / 2 ** 30, 0)} GiB RAM, ` +
      `load average at the end ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    ENGINES.filter((e) => results[e] !== undefined)
      .map((e) => `${e} ${results[e]?.version}`)
      .join(', '),
  ]
  const rows: string[][] = []
  for (const row of ROWS) {
    const values = ENGINES.map((e) => (results[e] === undefined ? undefined : row.value(results[e] as EngineResult)))
    if (values.every((v) => v === undefined)) continue
    const [m, l, s] = values
    rows.push([
      row.phase,
      `${row.unit} ${row.direction === 'higher' ? '(+)' : '(-)'}`,
      fmt(m, row.digits),
      fmt(l, row.digits),
      fmt(s, row.digits),
      ratio(m, l),
      ratio(m, s),
    ])
  }
  const targetRows = judgeTargets(results).map((t) => [t.phase, t.target, t.mqstore, t.lmdb, t.ratio, t.result])
  const notes = [
    `scan: median of ${SCAN_RUNS} full passes over topic BenchTopic0 queue 0 (${fmt(mq?.scan?.count ?? results.lmdb?.scan?.count, 0)} messages); ` +
      'lmdb reads the same messages with one getRange; both consume() and getMessage are compared with it.',
    'mqstore runs with its safe read defaults: every read copies what it serves, and checks each body CRC.',
    'lookup: latency of each lookup timed alone with process.hrtime.bigint(); throughput = lookups / total loop time.',
    'big store: written with the put workload by a child process that SIGKILLs itself; "open after SIGKILL" includes ' +
      'the recovery scan and re-dispatch; the scan rate is scanned bytes / that open time. Logical bytes = commit-log record bytes; ' +
      'disk = allocated blocks of the whole directory (commit log, consume queues, index, checkpoint) after a clean close.',
  ]
  for (const engine of ENGINES) {
    const sync = results[engine]?.sync
    if (sync === undefined) continue
    notes.push(`SYNC ${engine}: ${sync.mode}.`)
    if (sync.alternative !== undefined) {
      notes.push(
        `SYNC ${engine} without waiting for the fsync (${sync.alternative.mode}): ${fmt(sync.alternative.rate, 0)} msg/s, ` +
          `p50 ${fmt(sync.alternative.latencyUs.p50, 0)} us, p99 ${fmt(sync.alternative.latencyUs.p99, 0)} us` +
          (mq?.sync !== undefined ? `; mqstore/that = ${ratio(mq.sync.rate, sync.alternative.rate)}` : ''),
      )
    }
  }
  for (const error of errors) notes.push(`ERROR ${error}`)
  return {
    title,
    figures: {
      header: ['phase', 'unit', 'mqstore', 'lmdb', 'sqlite', 'mqstore/lmdb', 'mqstore/sqlite'],
      rows,
      right: new Set([2, 3, 4, 5, 6]),
    },
    targets: { header: ['phase', 'target', 'mqstore', 'lmdb', 'mqstore/lmdb', 'result'], rows: targetRows, right: new Set([2, 3, 4]) },
    notes,
  }
}

/** The report as printed on stdout. */
export function textReport(config: BenchConfig, results: Results, errors: string[]): string {
  const t = tables(config, results, errors)
  return [
    ...t.title,
    '',
    'Targets (issue 10), ratios against lmdb in this run:',
    renderTable(t.targets.header, t.targets.rows, t.targets.right),
    '',
    'All figures:',
    renderTable(t.figures.header, t.figures.rows, t.figures.right),
    '(+) higher is better, (-) lower is better; ratios are mqstore / peer.',
    '',
    'Notes:',
    ...t.notes.map((n) => `- ${n}`),
  ].join('\n')
}

/** The same as Markdown, for bench/results/. */
export function markdownReport(config: BenchConfig, results: Results, errors: string[]): string {
  const t = tables(config, results, errors)
  return [
    `# ${t.title[0]}`,
    '',
    ...t.title.slice(1).map((line) => `${line}  `),
    '',
    '## Targets',
    '',
    renderMarkdownTable(t.targets.header, t.targets.rows, t.targets.right),
    '',
    '## All figures',
    '',
    renderMarkdownTable(t.figures.header, t.figures.rows, t.figures.right),
    '',
    '(+) higher is better, (-) lower is better; ratios are mqstore / peer.',
    '',
    '## Notes',
    '',
    ...t.notes.map((n) => `- ${n}`),
    '',
  ].join('\n')
}

/** The same as one JSON document. */
export function jsonReport(config: BenchConfig, results: Results, errors: string[]): unknown {
  return {
    config: { ...config, phases: [...config.phases] },
    environment: {
      node: process.version,
      platform: os.platform(),
      arch: os.arch(),
      cpus: os.cpus().length,
      totalMemory: os.totalmem(),
      loadAverage: os.loadavg(),
    },
    results,
    targets: judgeTargets(results),
    errors,
  }
}
