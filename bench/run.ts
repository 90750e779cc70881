// mqstore vs lmdb vs SQLite on one workload: put, ordered scan of one queue, random lookups by key,
// reopen, and durable puts from 64 concurrent producers; three runs with the engines alternating,
// each engine in its own child process, and the JS encode and memcpy limits measured alongside.
// See bench/README.md.
//
//   npm run bench -- --count 400000 --phases put,scan,lookup,reopen
//   npm run bench -- --count 100000 --json         # machine-readable
//   npm run bench -- --cpu-prof                    # and a profiled mqstore run, summarised
//   node dist/bench/run.js --only mqstore          # one engine, in this process (for profiling)
import * as fs from 'node:fs'
import * as os from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

import { resultFromChild } from './child-result.js'
import type { LimitsResult } from './limits.js'
import { readProfile, summarizeProfile, type ProfileSummary } from './profile.js'
import { jsonReport, markdownReport, MAX_LOAD, missedTargets, textReport, type BenchRuns } from './report.js'
import {
  BenchError,
  ENGINES,
  log,
  PHASES,
  rotation,
  type BenchConfig,
  type EngineName,
  type EngineResult,
  type PhaseName,
} from './workload.js'

const USAGE = `usage: node dist/bench/run.js [options]

  --count N         messages in the put phase (default 1000000; env BENCH_COUNT)
  --lookups N       random key lookups (default 100000, at most --count; env BENCH_LOOKUPS)
  --sync-count N    messages in the SYNC put phase (default 20000; env BENCH_SYNC_COUNT)
  --big-mib N       MiB of commit log in the crash/reopen phase 'big' (default 1024; env BENCH_BIG_MIB)
  --out DIR         where the JSON and Markdown results go (default bench/results; env BENCH_OUT)
  --phases LIST     comma-separated subset of ${PHASES.join(',')} (scan, lookup and reopen imply put)
  --runs N          runs, engines alternating from run to run; figures are medians (default 3;
                    1 with --only)
  --only LIST       comma-separated subset of ${ENGINES.join(',')}, run in this process
                    (default: every engine, each in its own child process per run)
  --allow-load      run although the 1-minute load average is above ${MAX_LOAD} (ratios are then marked
                    not valid; without it such a run is refused)
  --cpu-prof        after the measured runs, one more mqstore child with a CPU profile (in
                    <out>/prof; its figures are not measured) and its top self-time functions per phase
  --seed N          seed of the lookup key sample (default 42)
  --json            print the results as JSON on stdout (progress stays on stderr)
  --strict          exit with status 2 when mqstore misses a target (3 when ratios are not valid)
  --help            this text
`

interface Cli {
  config: BenchConfig
  engines: EngineName[]
  runs: number
  allowLoad: boolean
  cpuProf: boolean
  inProcess: boolean
  json: boolean
  strict: boolean
  child: boolean
  out: string
}

function positiveInt(text: string | undefined, name: string): number {
  const value = Number(text)
  if (text === undefined || text === '' || !Number.isSafeInteger(value) || value < 1) {
    throw new BenchError(`${name} must be a positive integer, got ${JSON.stringify(text)}`)
  }
  return value
}

function parseList<T extends string>(text: string | undefined, allowed: readonly T[], name: string): T[] {
  const items = (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
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
  let bigMiB = env.BENCH_BIG_MIB ? positiveInt(env.BENCH_BIG_MIB, 'BENCH_BIG_MIB') : 1024
  let out = env.BENCH_OUT ?? fileURLToPath(new URL('../../bench/results/', import.meta.url))
  let phases: PhaseName[] = [...PHASES]
  let engines: EngineName[] = [...ENGINES]
  let inProcess = false
  let runs: number | undefined
  let allowLoad = false
  let cpuProf = false
  let seed = 42
  let json = false
  let strict = false
  let child = false
  for (let k = 0; k < argv.length; k++) {
    const arg = argv[k]
    const [flag, inline] =
      arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined]
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
      case '--big-mib':
        bigMiB = positiveInt(value(), '--big-mib')
        break
      case '--out':
        out = value() ?? ''
        if (out === '') throw new BenchError('--out needs a directory')
        break
      case '--phases':
        phases = parseList(value(), PHASES, '--phases')
        break
      case '--only':
        engines = parseList(value(), ENGINES, '--only')
        inProcess = true
        break
      case '--runs':
        runs = positiveInt(value(), '--runs')
        break
      case '--allow-load':
        allowLoad = true
        break
      case '--cpu-prof':
        cpuProf = true
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
  if (cpuProf && inProcess) {
    throw new BenchError('--cpu-prof profiles the child processes; with --only, run node --cpu-prof --cpu-prof-dir=DIR dist/bench/run.js')
  }
  const phaseSet = new Set<PhaseName>(phases)
  if (phaseSet.has('scan') || phaseSet.has('lookup') || phaseSet.has('reopen')) phaseSet.add('put')
  return {
    config: { count, lookups: Math.min(lookups, count), syncCount, bigBytes: bigMiB * 2 ** 20, phases: phaseSet, seed },
    engines,
    runs: runs ?? (inProcess ? 1 : 3),
    allowLoad,
    cpuProf,
    out,
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

/** Runs one engine in a child process (same node flags, and `execArgv`), so engines share no heap, GC or caches. */
function runEngineInChild(engine: EngineName, config: BenchConfig, execArgv: string[] = []): Promise<EngineResult> {
  const args = [
    '--child',
    '--only',
    engine,
    '--count',
    String(config.count),
    '--lookups',
    String(config.lookups),
    '--sync-count',
    String(config.syncCount),
    '--big-mib',
    String(config.bigBytes / 2 ** 20),
    '--phases',
    [...config.phases].join(','),
    '--seed',
    String(config.seed),
  ]
  const failure = (why: string) => new BenchError(`${engine}: ${why}`)
  return resultFromChild<EngineResult>(fileURLToPath(import.meta.url), args, failure, [...process.execArgv, ...execArgv])
}

/** The JS encode and memcpy limits, measured in a child process of their own. */
function measureLimitsInChild(): Promise<LimitsResult> {
  // Without the engines' node flags: the limits are the machine's, whatever the engines ran with.
  const script = fileURLToPath(new URL('./limits.js', import.meta.url))
  return resultFromChild<LimitsResult>(script, [], (why) => new BenchError(`limits: ${why}`))
}

/** Top self-time functions of a profile, over the whole run and per phase of `result`. */
function profileSummaries(path: string, result: EngineResult | undefined): ProfileSummary[] {
  const profile = readProfile(path)
  return [summarizeProfile(profile), ...(result?.windows ?? []).map((w) => summarizeProfile(profile, w))]
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

  // Other work on the cores slows the engines unequally: ratios measured then do not hold.
  const atStart = os.loadavg()
  const loadValid = atStart[0] <= MAX_LOAD
  if (!loadValid) {
    const text = `load average ${atStart[0].toFixed(2)} at start is above ${MAX_LOAD}: ratios between engines would not be valid`
    if (!cli.allowLoad && !cli.inProcess) {
      log(`${text}; wait for a quiet machine, or pass --allow-load to run anyway (every ratio is then marked not valid)`)
      return 3
    }
    log(`${text}; running anyway, every ratio is marked not valid`)
  }

  const bench: BenchRuns = { config, runs: [], orders: [], limits: [], load: { atStart, valid: loadValid }, errors: [], profiles: [] }
  const profDir = join(cli.out, 'prof')
  for (let run = 0; run < cli.runs; run++) {
    const order = rotation(cli.engines, run)
    bench.orders.push(order)
    log(`run ${run + 1} of ${cli.runs}: limits, then ${order.join(', ')}`)
    try {
      bench.limits.push(await measureLimitsInChild())
    } catch (error) {
      bench.limits.push(undefined)
      bench.errors.push(`run ${run + 1}: ${(error as Error).message}`)
    }
    const results: Partial<Record<EngineName, EngineResult>> = {}
    for (const engine of order) {
      try {
        results[engine] = cli.inProcess ? await runEngine(engine, config) : await runEngineInChild(engine, config, [])
      } catch (error) {
        const message = `run ${run + 1}, ${engine}: ${(error as Error)?.stack ?? String(error)}`
        bench.errors.push(message)
        log(`FAILED ${message}`)
      }
    }
    bench.runs.push(results)
  }
  // The profile comes from a run of its own, after the measured ones: V8's profiler slows the
  // process it samples (each function compiled is logged; an open, which runs code once, the most),
  // and the peers run unprofiled, so a profiled run's figures would not compare with theirs.
  if (cli.cpuProf) {
    const profName = 'mqstore-profiled.cpuprofile'
    log('profiled run: mqstore, with --cpu-prof (its figures are not among the measured runs)')
    let profiled: EngineResult | undefined
    try {
      profiled = await runEngineInChild('mqstore', config, ['--cpu-prof', `--cpu-prof-dir=${profDir}`, `--cpu-prof-name=${profName}`])
    } catch (error) {
      const message = `profiled run, mqstore: ${(error as Error)?.stack ?? String(error)}`
      bench.errors.push(message)
      log(`FAILED ${message}`)
    }
    if (fs.existsSync(join(profDir, profName))) {
      bench.profiles.push({
        run: 'profiled',
        // Relative to the working directory: results are kept, and name no machine's folders.
        file: relative(process.cwd(), join(profDir, profName)),
        summaries: profileSummaries(join(profDir, profName), profiled),
      })
    }
  }

  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const base = join(cli.out, `bench-${stamp}`)
  fs.mkdirSync(cli.out, { recursive: true })
  fs.writeFileSync(`${base}.json`, `${JSON.stringify(jsonReport(bench), null, 2)}\n`)
  fs.writeFileSync(`${base}.md`, markdownReport(bench))
  log(`results written to ${base}.json and ${base}.md`)
  if (cli.json) process.stdout.write(`${JSON.stringify(jsonReport(bench), null, 2)}\n`)
  else process.stdout.write(`\n${textReport(bench)}\n`)
  if (bench.errors.length > 0) return 1
  if (cli.strict && !loadValid) return 3
  if (cli.strict && missedTargets(bench).length > 0) return 2
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
