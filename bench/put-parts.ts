// The put phase's CPU time part by part, beside the work engine's (limits.ts) doing the same work
// with nothing around it. Issue 22 asks that a missed put target be shown to be in the limit
// itself, not in mqstore's own code; this puts the two side by side: the bench's loop, the put's
// own JavaScript (mqstore's modules, or the engine), the native calls and Node built-ins that code
// makes, and the garbage collector.
//
//   npm run bench:put-parts                        # 3 rounds of 400,000, engines alternating
//   node dist/bench/put-parts.js --count 100000 --runs 5 --json
//
// Each side runs as the bench's put phase meets it: a process of its own, the warm-up stores (or
// warm-up passes) first, then one pass of `count` messages, CPU-profiled through the inspector at
// 100 us. Each sample's time goes to the frame on top of the stack; a native function's or a Node
// built-in's goes to the innermost JS frame of mqstore, the engine or the loop below it.
import { Session } from 'node:inspector/promises'
import { fileURLToPath } from 'node:url'

import { MessageStore } from '../lib/index.js'
import { resultFromChild } from './child-result.js'
import { prefaulted, recordLength, workEngine, workRegions } from './limits.js'
import { MQSTORE_OPTIONS } from './mqstore.js'
import type { CpuProfile } from './profile.js'
import {
  integerOptions,
  makeTempDir,
  median,
  scriptOptions,
  PUT_WARMUP,
  PUT_WARMUP_STORES,
  putInBatches,
  QUEUES,
  removeDir,
  TOPICS,
} from './workload.js'

const USAGE = `usage: node dist/bench/put-parts.js [options]

Profiles mqstore's put phase and the work engine's first pass (the same loop, the work a put cannot
leave out with nothing around it), each in a process of its own, alternating, and prints their CPU
time part by part (medians over the rounds).
  --count N        messages of the profiled pass (default 400000)
  --warmup N       messages of each warm-up store or pass (default ${PUT_WARMUP})
  --runs N         rounds of the two (default 3)
  --json           results as JSON on stdout
  --help           this text
`

/** Profiler sampling interval, microseconds. */
const SAMPLING_US = 100

export type PutSide = 'mqstore' | 'engine'

/** Milliseconds of sampled CPU time of one profiled pass, by part. */
export interface PutParts {
  /** The bench's put loop: bodies, message objects, batches, result checks (workload.ts). */
  loop: number
  /** The put's own JavaScript: mqstore's modules, or the work engine (limits.ts) and the store's layout helpers it calls. */
  own: number
  /** Native functions (the addon's, V8's) and Node built-ins that the put's own code calls. */
  calls: number
  gc: number
  /** Anything else: the VM's own entries ('(program)', '(idle)'), frames of neither. */
  other: number
  total: number
  /** `own` by module (mqstore's file under lib/, or the engine's). */
  modules: Record<string, number>
}

export interface PutPartsRun {
  side: PutSide
  /** Wall time of the profiled pass, ms. */
  passMs: number
  parts: PutParts
}

const LIB = new URL('../lib/', import.meta.url).href
const LOOP = new URL('./workload.js', import.meta.url).href
const ENGINE = new URL('./limits.js', import.meta.url).href

type Owner = 'loop' | 'own' | null

/** Whose code a frame's script is: the loop's, the put's own (mqstore or the engine), or neither. */
function ownerOf(url: string): Owner {
  if (url === LOOP) return 'loop'
  if (url.startsWith(LIB) || url === ENGINE) return 'own'
  return null
}

function moduleOf(url: string): string {
  return url.startsWith(LIB) ? url.slice(LIB.length) : url.slice(url.lastIndexOf('/') + 1)
}

/** Sums a CPU profile's samples into the parts of a put. */
export function putPartsOf(profile: CpuProfile): PutParts {
  const parts: PutParts = { loop: 0, own: 0, calls: 0, gc: 0, other: 0, total: 0, modules: {} }
  const parent = new Map<number, number>()
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  // What each node's time counts as, worked out once per node.
  const verdicts = new Map<number, { part: keyof Omit<PutParts, 'modules' | 'total'>; module: string | null }>()
  const verdict = (id: number) => {
    const known = verdicts.get(id)
    if (known !== undefined) return known
    const frame = nodes.get(id)!.callFrame
    let result: { part: keyof Omit<PutParts, 'modules' | 'total'>; module: string | null }
    const own = ownerOf(frame.url)
    if (own === 'loop') result = { part: 'loop', module: null }
    else if (own === 'own') result = { part: 'own', module: moduleOf(frame.url) }
    else if (frame.functionName === '(garbage collector)') result = { part: 'gc', module: null }
    else {
      // A native function or a built-in: charged to the innermost frame of ours below it.
      let below = parent.get(id)
      let owner: Owner = null
      while (below !== undefined && owner === null) {
        owner = ownerOf(nodes.get(below)!.callFrame.url)
        below = parent.get(below)
      }
      result = { part: owner === 'own' ? 'calls' : owner === 'loop' ? 'loop' : 'other', module: null }
    }
    verdicts.set(id, result)
    return result
  }
  for (let i = 0; i < profile.samples.length; i++) {
    const ms = profile.timeDeltas[i] / 1000
    const { part, module } = verdict(profile.samples[i])
    parts[part] += ms
    parts.total += ms
    if (module !== null) parts.modules[module] = (parts.modules[module] ?? 0) + ms
  }
  return parts
}

/** Runs `pass` with the CPU profiler on; its wall time and the profile. */
async function profiled(pass: () => Promise<void>): Promise<{ passMs: number; profile: CpuProfile }> {
  const session = new Session()
  session.connect()
  try {
    await session.post('Profiler.enable')
    await session.post('Profiler.setSamplingInterval', { interval: SAMPLING_US })
    await session.post('Profiler.start')
    const t0 = process.hrtime.bigint()
    await pass()
    const passMs = Number(process.hrtime.bigint() - t0) / 1e6
    const { profile } = await session.post('Profiler.stop')
    return { passMs, profile: profile as unknown as CpuProfile }
  } finally {
    session.disconnect()
  }
}

/** mqstore's put phase: warm-up stores, then `count` puts into a fresh store, profiled. */
async function storeRun(count: number, warmup: number): Promise<PutPartsRun> {
  for (let k = 0; k < PUT_WARMUP_STORES; k++) {
    const dir = makeTempDir('mqstore-parts-warmup')
    try {
      const store = await MessageStore.open(dir, MQSTORE_OPTIONS)
      await putInBatches(Math.min(warmup, count), (batch) => store.putMessages(batch)).finally(() => store.close())
    } finally {
      removeDir(dir)
    }
  }
  const dir = makeTempDir('mqstore-parts')
  try {
    const store = await MessageStore.open(dir, MQSTORE_OPTIONS)
    try {
      const { passMs, profile } = await profiled(() => putInBatches(count, (batch) => store.putMessages(batch)))
      return { side: 'mqstore', passMs, parts: putPartsOf(profile) }
    } finally {
      await store.close()
    }
  } finally {
    removeDir(dir)
  }
}

/** The work engine's first pass (first-pass.ts): warm-up passes, then one pass of `count` into new regions, profiled. */
async function engineRun(count: number, warmup: number): Promise<PutPartsRun> {
  const pass = async (n: number, profile: boolean) => {
    const target = prefaulted(n * recordLength(Math.max(0, n - 1)) + 4096)
    const view = new DataView(target.buffer, target.byteOffset, target.byteLength)
    const engine = workEngine(target, view, workRegions(Math.ceil(n / (TOPICS * QUEUES))))
    if (!profile) {
      await putInBatches(n, engine)
      return null
    }
    const { passMs, profile: p } = await profiled(() => putInBatches(n, engine))
    return { side: 'engine' as const, passMs, parts: putPartsOf(p) }
  }
  for (let k = 0; k < PUT_WARMUP_STORES; k++) await pass(Math.min(warmup, count), false)
  return (await pass(count, true))!
}

/** One side in a process of its own (no node flags, as the bench's engines run). */
function runInChild(side: PutSide, count: number, warmup: number): Promise<PutPartsRun> {
  const args = ['--child', side, '--count', String(count), '--warmup', String(warmup)]
  return resultFromChild<PutPartsRun>(fileURLToPath(import.meta.url), args, (why) => new Error(`put parts (${side}): ${why}`))
}

export interface PutPartsReport {
  count: number
  runs: PutPartsRun[]
  /** Medians over the runs of each side. */
  median: Record<PutSide, { passMs: number; parts: PutParts }>
}

/** Medians of each part (and module) over the runs of one side. */
export function medianParts(runs: readonly PutPartsRun[]): { passMs: number; parts: PutParts } {
  const pick = (f: (r: PutPartsRun) => number) => (runs.length === 0 ? 0 : median(runs.map(f)))
  const modules: Record<string, number> = {}
  for (const name of new Set(runs.flatMap((r) => Object.keys(r.parts.modules)))) modules[name] = pick((r) => r.parts.modules[name] ?? 0)
  return {
    passMs: pick((r) => r.passMs),
    parts: {
      loop: pick((r) => r.parts.loop),
      own: pick((r) => r.parts.own),
      calls: pick((r) => r.parts.calls),
      gc: pick((r) => r.parts.gc),
      other: pick((r) => r.parts.other),
      total: pick((r) => r.parts.total),
      modules,
    },
  }
}

export async function measurePutParts(count: number, warmup: number, rounds: number): Promise<PutPartsReport> {
  const runs: PutPartsRun[] = []
  for (let k = 0; k < rounds; k++) {
    // Alternating which side goes first, as the bench alternates its engines.
    const order: PutSide[] = k % 2 === 0 ? ['mqstore', 'engine'] : ['engine', 'mqstore']
    for (const side of order) runs.push(await runInChild(side, count, warmup))
  }
  return {
    count,
    runs,
    median: {
      mqstore: medianParts(runs.filter((r) => r.side === 'mqstore')),
      engine: medianParts(runs.filter((r) => r.side === 'engine')),
    },
  }
}

function render(report: PutPartsReport): string {
  const { mqstore, engine } = report.median
  const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}x` : '-')
  const row = (name: string, a: number, b: number) => `| ${name} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${ratio(a, b)} |`
  const lines = [
    `# The put's CPU time by part: ${report.count.toLocaleString('en-US')} messages, ${report.runs.length / 2} round(s), medians, ms`,
    '',
    '| part | mqstore put | work engine | mqstore / engine |',
    '| --- | ---: | ---: | ---: |',
    row("the put's own JavaScript (mqstore's modules / the engine)", mqstore.parts.own, engine.parts.own),
    row('native calls and Node built-ins it makes', mqstore.parts.calls, engine.parts.calls),
    row('garbage collector', mqstore.parts.gc, engine.parts.gc),
    row("the bench's loop (bodies, messages, batches, checks)", mqstore.parts.loop, engine.parts.loop),
    row('other (the VM, idle)', mqstore.parts.other, engine.parts.other),
    row('sampled in all', mqstore.parts.total, engine.parts.total),
    row('wall time of the pass', mqstore.passMs, engine.passMs),
    '',
    "mqstore's own JavaScript by module (ms):",
  ]
  for (const [name, ms] of Object.entries(mqstore.parts.modules)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12)) {
    lines.push(`  ${ms.toFixed(1).padStart(7)}  ${name}`)
  }
  return lines.join('\n')
}

async function main(): Promise<void> {
  const values = scriptOptions(
    {
      options: {
        count: { type: 'string', default: '400000' },
        warmup: { type: 'string', default: String(PUT_WARMUP) },
        runs: { type: 'string', default: '3' },
        child: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    },
    USAGE,
  )
  if (values === null) return
  const numbers = integerOptions(values, { count: 1, warmup: 1, runs: 1 }, '--count, --warmup and --runs take positive integers', USAGE)
  if (numbers === null) return
  const { count, warmup, runs } = numbers
  if (values.child !== undefined) {
    if (values.child !== 'mqstore' && values.child !== 'engine') {
      process.stderr.write(`--child is mqstore or engine\n${USAGE}`)
      process.exitCode = 2
      return
    }
    const run = values.child === 'mqstore' ? await storeRun(count, warmup) : await engineRun(count, warmup)
    await new Promise<void>((resolve, reject) => process.send?.(run, (error: Error | null) => (error ? reject(error) : resolve())))
    return
  }
  const report = await measurePutParts(count, warmup, runs)
  process.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : `${render(report)}\n`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main()
