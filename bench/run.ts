// mqstore vs lmdb vs SQLite on one workload: put, ordered scan of one queue, random lookups by key,
// reopen, and durable puts from 64 concurrent producers. See bench/README.md.
//
//   npm run bench                                  # 1,000,000 messages, every engine
//   npm run bench -- --count 100000 --json         # smaller, machine-readable
//   node dist/bench/run.js --only mqstore          # one engine, in this process (for profiling)
import { fork } from 'node:child_process'
import * as os from 'node:os'
import { fileURLToPath } from 'node:url'

import {
  BenchError,
  ENGINES,
  log,
  PHASES,
  SCAN_RUNS,
  SYNC_PRODUCERS,
  type BenchConfig,
  type EngineName,
  type EngineResult,
  type PhaseName,
} from './workload.js'

const USAGE = `usage: node dist/bench/run.js [options]

  --count N         messages in the put phase (default 1000000; env BENCH_COUNT)
  --lookups N       random key lookups (default 100000, at most --count; env BENCH_LOOKUPS)
  --sync-count N    messages in the SYNC put phase (default 20000; env BENCH_SYNC_COUNT)
  --phases LIST     comma-separated subset of ${PHASES.join(',')} (scan, lookup and reopen imply put)
  --only LIST       comma-separated subset of ${ENGINES.join(',')}, run in this process
                    (default: every engine, each in its own child process)
  --seed N          seed of the lookup key sample (default 42)
  --json            print the results as JSON on stdout (progress stays on stderr)
  --strict          exit with status 2 when mqstore misses a target
  --help            this text
`

interface Cli {
  config: BenchConfig
  engines: EngineName[]
  inProcess: boolean
  json: boolean
  strict: boolean
  child: boolean
}

function positiveInt(text: string | undefined, name: string): number {
  const value = Number(text)
  if (text === undefined || text === '' || !Number.isSafeInteger(value) || value < 1) {
    throw new BenchError(`${name} must be a positive integer, got ${JSON.stringify(text)}`)
  }
  return value
}

function parseList<T extends string>(text: string | undefined, allowed: readonly T[], name: string): T[] {
  const items = (text ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')
  if (items.length === 0) throw new BenchError(`${name} needs a comma-separated list of ${allowed.join(', ')}`)
  for (const item of items) {
    if (!allowed.includes(item as T)) throw new BenchError(`${name}: unknown '${item}' (expected ${allowed.join(', ')})`)
  }
  return [...new Set(items as T[])]
}

function parseArgs(argv: string[]): Cli | null {
  const env = process.env
  let count = env.BENCH_COUNT ? positiveInt(env.BENCH_COUNT, 'BENCH_COUNT') : 1_000_000
  let lookups = env.BENCH_LOOKUPS ? positiveInt(env.BENCH_LOOKUPS, 'BENCH_LOOKUPS') : 100_000
  let syncCount = env.BENCH_SYNC_COUNT ? positiveInt(env.BENCH_SYNC_COUNT, 'BENCH_SYNC_COUNT') : 20_000
  let phases: PhaseName[] = [...PHASES]
  let engines: EngineName[] = [...ENGINES]
  let inProcess = false
  let seed = 42
  let json = false
  let strict = false
  let child = false
  for (let k = 0; k < argv.length; k++) {
    const arg = argv[k]
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined]
    const value = () => inline ?? argv[++k]
    switch (flag) {
      case '--count':
        count = positiveInt(value(), '--count')
        break
      case '--lookups':
        lookups = positiveInt(value(), '--lookups')
        break
      case '--sync-count':
        syncCount = positiveInt(value(), '--sync-count')
        break
      case '--phases':
        phases = parseList(value(), PHASES, '--phases')
        break
      case '--only':
        engines = parseList(value(), ENGINES, '--only')
        inProcess = true
        break
      case '--seed':
        seed = positiveInt(value(), '--seed')
        break
      case '--json':
        json = true
        break
      case '--strict':
        strict = true
        break
      case '--child':
        child = true
        break
      case '--help':
      case '-h':
        process.stdout.write(USAGE)
        return null
      default:
        throw new BenchError(`unknown argument '${arg}'\n\n${USAGE}`)
    }
  }
  const phaseSet = new Set<PhaseName>(phases)
  if (phaseSet.has('scan') || phaseSet.has('lookup') || phaseSet.has('reopen')) phaseSet.add('put')
  return {
    config: { count, lookups: Math.min(lookups, count), syncCount, phases: phaseSet, seed },
    engines,
    inProcess,
    json,
    strict,
    child,
  }
}

async function runEngine(engine: EngineName, config: BenchConfig): Promise<EngineResult> {
  switch (engine) {
    case 'mqstore':
      return (await import('./mqstore.js')).runMqstore(config)
    case 'lmdb':
      return (await import('./peers.js')).runLmdb(config)
    case 'sqlite':
      return (await import('./peers.js')).runSqlite(config)
  }
}

/** Runs one engine in a child process (same node flags), so engines share no heap, GC or caches. */
function runEngineInChild(engine: EngineName, config: BenchConfig): Promise<EngineResult> {
  const args = [
    '--child',
    '--only', engine,
    '--count', String(config.count),
    '--lookups', String(config.lookups),
    '--sync-count', String(config.syncCount),
    '--phases', [...config.phases].join(','),
    '--seed', String(config.seed),
  ]
  return new Promise((resolve, reject) => {
    let result: EngineResult | null = null
    const child = fork(fileURLToPath(import.meta.url), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    child.on('message', (message) => {
      result = message as EngineResult
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (result !== null && code === 0) resolve(result)
      else reject(new BenchError(`${engine}: child exited with ${signal ?? `status ${code}`}`))
    })
  })
}

// ---- report --------------------------------------------------------------------------------------

type Direction = 'higher' | 'lower'

interface Row {
  phase: string
  unit: string
  direction: Direction
  value: (r: EngineResult) => number | undefined
  digits: number
  target?: Target
}

interface Target {
  label: string
  check: (mq: number, results: Partial<Record<EngineName, EngineResult>>) => boolean | undefined
}

const SPEC_TARGETS: { name: string; text: string; check: (results: Partial<Record<EngineName, EngineResult>>) => { value: string; met: boolean | undefined } }[] = [
  {
    name: 'put',
    text: '>= 1,500,000 msg/s',
    check: (r) => {
      const v = r.mqstore?.put?.rate
      return { value: v === undefined ? 'n/a' : `${fmt(v, 0)} msg/s`, met: v === undefined ? undefined : v >= 1_500_000 }
    },
  },
  {
    name: 'put vs lmdb',
    text: '>= 8x lmdb',
    check: (r) => ratioTarget(r.mqstore?.put?.rate, r.lmdb?.put?.rate, 8),
  },
  {
    name: 'scan',
    text: '>= 5,000,000 msg/s',
    check: (r) => {
      const v = r.mqstore?.scan?.rate
      return { value: v === undefined ? 'n/a' : `${fmt(v, 0)} msg/s`, met: v === undefined ? undefined : v >= 5_000_000 }
    },
  },
  {
    name: 'lookup',
    text: '>= 500,000 lookups/s',
    check: (r) => {
      const v = r.mqstore?.lookup?.rate
      return { value: v === undefined ? 'n/a' : `${fmt(v, 0)} /s`, met: v === undefined ? undefined : v >= 500_000 }
    },
  },
  {
    name: 'lookup p99',
    text: '<= 10 us',
    check: (r) => {
      const v = r.mqstore?.lookup?.latencyUs.p99
      return { value: v === undefined ? 'n/a' : `${fmt(v, 2)} us`, met: v === undefined ? undefined : v <= 10 }
    },
  },
  {
    name: `SYNC put, ${SYNC_PRODUCERS} producers`,
    text: '>= 2x lmdb (durable)',
    check: (r) => ratioTarget(r.mqstore?.sync?.rate, r.lmdb?.sync?.rate, 2),
  },
]

function ratioTarget(mq: number | undefined, peer: number | undefined, factor: number): { value: string; met: boolean | undefined } {
  if (mq === undefined || peer === undefined) return { value: 'n/a', met: undefined }
  return { value: `${fmt(mq / peer, 2)}x`, met: mq / peer >= factor }
}

function targetFor(name: string): Target {
  const spec = SPEC_TARGETS.find((t) => t.name === name)
  if (spec === undefined) throw new Error(`no target ${name}`)
  return { label: spec.text, check: (_mq, results) => spec.check(results).met }
}

const ROWS: Row[] = [
  { phase: 'put, async (index on)', unit: 'msg/s', direction: 'higher', digits: 0, value: (r) => r.put?.rate, target: targetFor('put') },
  { phase: 'scan one queue, in order', unit: 'msg/s', direction: 'higher', digits: 0, value: (r) => r.scan?.rate, target: targetFor('scan') },
  { phase: 'lookup by key', unit: 'lookups/s', direction: 'higher', digits: 0, value: (r) => r.lookup?.rate, target: targetFor('lookup') },
  { phase: 'lookup latency p50', unit: 'us', direction: 'lower', digits: 2, value: (r) => r.lookup?.latencyUs.p50 },
  { phase: 'lookup latency p99', unit: 'us', direction: 'lower', digits: 2, value: (r) => r.lookup?.latencyUs.p99, target: targetFor('lookup p99') },
  { phase: 'lookup latency p99.9', unit: 'us', direction: 'lower', digits: 2, value: (r) => r.lookup?.latencyUs.p999 },
  { phase: 'reopen: close', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.reopen?.closeMs },
  { phase: 'reopen: open', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.reopen?.openMs },
  { phase: 'reopen: close + open', unit: 'ms', direction: 'lower', digits: 1, value: (r) => r.reopen?.totalMs },
  { phase: `SYNC put, ${SYNC_PRODUCERS} producers`, unit: 'msg/s', direction: 'higher', digits: 0, value: (r) => r.sync?.rate, target: targetFor(`SYNC put, ${SYNC_PRODUCERS} producers`) },
  { phase: 'SYNC put latency p50', unit: 'us', direction: 'lower', digits: 0, value: (r) => r.sync?.latencyUs.p50 },
  { phase: 'SYNC put latency p99', unit: 'us', direction: 'lower', digits: 0, value: (r) => r.sync?.latencyUs.p99 },
  { phase: 'disk used after put', unit: 'MiB', direction: 'lower', digits: 1, value: (r) => (r.put === undefined ? undefined : r.put.diskBytes / 1024 / 1024) },
]

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
    cells.map((cell, c) => (rightAligned.has(c) ? cell.padStart(widths[c]) : cell.padEnd(widths[c]))).join('  ').trimEnd()
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

function report(config: BenchConfig, results: Partial<Record<EngineName, EngineResult>>, errors: string[]): string {
  const out: string[] = []
  const mq = results.mqstore
  out.push(
    `mqstore benchmark: ${fmt(config.count, 0)} messages of 256 B over 4 topics x 4 queues, unique key each; ` +
      `${fmt(config.lookups, 0)} lookups; ${fmt(config.syncCount, 0)} SYNC puts`,
  )
  out.push(
    `node ${process.version}, ${os.platform()} ${os.arch()}, ${os.cpus().length} CPUs, ${fmt(os.totalmem() / 2 ** 30, 0)} GiB RAM, ` +
      `load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  )
  const versions = ENGINES.filter((e) => results[e] !== undefined).map((e) => `${e} ${results[e]?.version}`)
  out.push(versions.join(', '))
  out.push('')
  const header = ['phase', 'unit', 'mqstore', 'target (mqstore)', 'lmdb', 'sqlite', 'mqstore/lmdb', 'mqstore/sqlite']
  const rows: string[][] = []
  for (const row of ROWS) {
    const values = ENGINES.map((e) => (results[e] === undefined ? undefined : row.value(results[e] as EngineResult)))
    if (values.every((v) => v === undefined)) continue
    const [m, l, s] = values
    let target = ''
    if (row.target !== undefined && m !== undefined) {
      const met = row.target.check(m, results)
      target = `${row.target.label}: ${met === undefined ? 'n/a' : met ? 'PASS' : 'MISS'}`
    }
    rows.push([
      row.phase,
      `${row.unit} ${row.direction === 'higher' ? '(+)' : '(-)'}`,
      fmt(m, row.digits),
      target,
      fmt(l, row.digits),
      fmt(s, row.digits),
      ratio(m, l),
      ratio(m, s),
    ])
  }
  out.push(renderTable(header, rows, new Set([2, 4, 5, 6, 7])))
  out.push('(+) higher is better, (-) lower is better; ratios are mqstore / peer.')
  out.push('')

  out.push('Targets (from the spec), mqstore:')
  const targetRows = SPEC_TARGETS.map((t) => {
    const { value, met } = t.check(results)
    return [t.name, t.text, value, met === undefined ? 'n/a' : met ? 'PASS' : 'MISS']
  })
  out.push(renderTable(['target', 'required', 'measured', 'result'], targetRows, new Set([2])))
  out.push('')

  out.push('Notes:')
  out.push(`- scan: median of ${SCAN_RUNS} full passes over topic BenchTopic0 queue 0 (${fmt(mq?.scan?.count ?? results.lmdb?.scan?.count, 0)} messages).`)
  out.push('- lookup: latency of each lookup timed alone with process.hrtime.bigint(); throughput = lookups / total loop time.')
  for (const engine of ENGINES) {
    const sync = results[engine]?.sync
    if (sync === undefined) continue
    out.push(`- SYNC ${engine}: ${sync.mode}.`)
    if (sync.alternative !== undefined) {
      out.push(
        `  without waiting for the fsync (${sync.alternative.mode}): ${fmt(sync.alternative.rate, 0)} msg/s, ` +
          `p50 ${fmt(sync.alternative.latencyUs.p50, 0)} us, p99 ${fmt(sync.alternative.latencyUs.p99, 0)} us` +
          (mq?.sync !== undefined ? `; mqstore/that = ${ratio(mq.sync.rate, sync.alternative.rate)}` : ''),
      )
    }
  }
  for (const error of errors) out.push(`- ERROR ${error}`)
  return out.join('\n')
}

function missedTargets(results: Partial<Record<EngineName, EngineResult>>): string[] {
  return SPEC_TARGETS.filter((t) => t.check(results).met === false).map((t) => t.name)
}

// ---- main ----------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const cli = parseArgs(process.argv.slice(2))
  if (cli === null) return 0
  const { config } = cli

  if (cli.child) {
    const result = await runEngine(cli.engines[0], config)
    await new Promise<void>((resolve, reject) => process.send?.(result, (error: Error | null) => (error ? reject(error) : resolve())))
    return 0
  }

  const results: Partial<Record<EngineName, EngineResult>> = {}
  const errors: string[] = []
  for (const engine of cli.engines) {
    try {
      results[engine] = cli.inProcess ? await runEngine(engine, config) : await runEngineInChild(engine, config)
    } catch (error) {
      const message = `${engine}: ${(error as Error)?.stack ?? String(error)}`
      errors.push(message)
      log(`FAILED ${message}`)
    }
  }

  if (cli.json) {
    const json = {
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
      targets: SPEC_TARGETS.map((t) => ({ name: t.name, required: t.text, ...t.check(results) })),
      errors,
    }
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`)
  } else {
    process.stdout.write(`\n${report(config, results, errors)}\n`)
  }
  if (errors.length > 0) return 1
  if (cli.strict && missedTargets(results).length > 0) return 2
  return 0
}

main().then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`${error instanceof BenchError ? error.message : ((error as Error)?.stack ?? String(error))}\n`)
    process.exitCode = 1
  },
)
