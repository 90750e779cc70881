// Heap bytes the put path allocates per message, by where: mqstore's own code, and the bench's
// loop (bodies, message objects, batches), which every engine's put phase pays. Issue 22 asks that
// a put allocate nothing per message beyond the result it returns; this shows what it does.
//
//   npm run bench:alloc                         # 200,000 puts after the bench's warm-up
//   node dist/bench/allocations.js --json       # machine-readable
//
// V8's sampling heap profiler (the inspector's HeapProfiler.startSampling) records one allocation
// in every `interval` bytes on average, with the JS stack that made it; objects a scavenge freed are
// kept in the profile. Each sample is charged to the innermost frame in mqstore's or the bench's
// code (a builtin or Node internal is charged to its JS caller). The figures are averages over the
// pass, so the warm-up (PUT_WARMUP in scratch stores) matters: unoptimised code boxes numbers.
import { Session } from 'node:inspector/promises'
import { fileURLToPath } from 'node:url'

import { MessageStore } from '../lib/index.js'
import { MQSTORE_OPTIONS } from './mqstore.js'
import { integerOptions, makeTempDir, PUT_WARMUP, PUT_WARMUP_STORES, putInBatches, removeDir, scriptOptions } from './workload.js'

const USAGE = `usage: node dist/bench/allocations.js [options]

Samples the heap allocations of mqstore's put phase (the bench's loop, ASYNC_FLUSH, queues and
index on) and prints bytes per message by origin and by allocating function.
  --count N        messages put while sampling (default 200000)
  --interval B     average bytes between samples (default 1024)
  --top N          allocating functions listed (default 12)
  --json           results as JSON on stdout
  --help           this text
`

/** One allocating function: where, and bytes per message put. */
export interface AllocationSite {
  origin: 'mqstore' | 'bench'
  site: string
  bytesPerMessage: number
}

export interface AllocationReport {
  count: number
  interval: number
  /** Sampled bytes per message, by origin (what no frame of either made goes to 'other'). */
  perMessage: { mqstore: number; bench: number; other: number }
  sites: AllocationSite[]
}

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number }
  selfSize: number
  children: ProfileNode[]
}

const LIB = new URL('../lib/', import.meta.url).href
const BENCH = new URL('./', import.meta.url).href

/** The origin of a frame's script: mqstore's library, this bench, or neither. */
function originOf(url: string): 'mqstore' | 'bench' | null {
  if (url.startsWith(LIB)) return 'mqstore'
  if (url.startsWith(BENCH)) return 'bench'
  return null
}

/** Sums a sampled heap profile into bytes per message by origin and by site. */
export function summarizeAllocations(head: ProfileNode, count: number, interval: number, top: number): AllocationReport {
  const perOrigin = { mqstore: 0, bench: 0, other: 0 }
  const bySite = new Map<string, AllocationSite>()
  // Depth-first, carrying the innermost frame of ours seen so far on the way down.
  const stack: { node: ProfileNode; owner: { origin: 'mqstore' | 'bench'; site: string } | null }[] = [{ node: head, owner: null }]
  while (stack.length > 0) {
    const { node, owner: outer } = stack.pop()!
    const frame = node.callFrame
    const origin = originOf(frame.url)
    const owner =
      origin === null
        ? outer
        : {
            origin,
            site: `${frame.functionName || '(anonymous)'} ${frame.url.slice(origin === 'mqstore' ? LIB.length : BENCH.length)}:${frame.lineNumber + 1}`,
          }
    if (node.selfSize > 0) {
      if (owner === null) perOrigin.other += node.selfSize
      else {
        perOrigin[owner.origin] += node.selfSize
        const key = `${owner.origin} ${owner.site}`
        const site = bySite.get(key) ?? { origin: owner.origin, site: owner.site, bytesPerMessage: 0 }
        site.bytesPerMessage += node.selfSize
        bySite.set(key, site)
      }
    }
    for (const child of node.children) stack.push({ node: child, owner })
  }
  const sites = [...bySite.values()]
    .map((s) => ({ ...s, bytesPerMessage: s.bytesPerMessage / count }))
    .sort((a, b) => b.bytesPerMessage - a.bytesPerMessage)
    .slice(0, top)
  return {
    count,
    interval,
    perMessage: { mqstore: perOrigin.mqstore / count, bench: perOrigin.bench / count, other: perOrigin.other / count },
    sites,
  }
}

/** Puts `count` messages into a fresh store (after the bench's warm-up) while sampling allocations. */
export async function measurePutAllocations(count: number, interval: number, top: number): Promise<AllocationReport> {
  for (let k = 0; k < PUT_WARMUP_STORES; k++) {
    const dir = makeTempDir('mqstore-alloc-warmup')
    try {
      const store = await MessageStore.open(dir, MQSTORE_OPTIONS)
      await putInBatches(Math.min(PUT_WARMUP, count), (batch) => store.putMessages(batch)).finally(() => store.close())
    } finally {
      removeDir(dir)
    }
  }
  const dir = makeTempDir('mqstore-alloc')
  const session = new Session()
  session.connect()
  try {
    const store = await MessageStore.open(dir, MQSTORE_OPTIONS)
    let head: ProfileNode
    try {
      await session.post('HeapProfiler.startSampling', {
        samplingInterval: interval,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      })
      await putInBatches(count, (batch) => store.putMessages(batch))
      head = (await session.post('HeapProfiler.stopSampling')).profile.head as ProfileNode
    } finally {
      await store.close()
    }
    return summarizeAllocations(head, count, interval, top)
  } finally {
    session.disconnect()
    removeDir(dir)
  }
}

function render(report: AllocationReport): string {
  const lines = [
    `heap bytes allocated per message, put phase (${report.count.toLocaleString('en-US')} messages, one sample per ~${report.interval} B):`,
    `  mqstore ${report.perMessage.mqstore.toFixed(1)}   bench loop ${report.perMessage.bench.toFixed(1)}   other ${report.perMessage.other.toFixed(1)}`,
    '',
    'by allocating function (innermost frame of mqstore or the bench):',
  ]
  for (const site of report.sites) lines.push(`  ${site.bytesPerMessage.toFixed(1).padStart(8)} B  ${site.origin.padEnd(7)}  ${site.site}`)
  return lines.join('\n')
}

async function main(): Promise<void> {
  const values = scriptOptions(
    {
      options: {
        count: { type: 'string', default: '200000' },
        interval: { type: 'string', default: '1024' },
        top: { type: 'string', default: '12' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    },
    USAGE,
  )
  if (values === null) return
  const numbers = integerOptions(values, { count: 1, interval: 1, top: 0 }, '--count, --interval and --top take positive integers', USAGE)
  if (numbers === null) return
  const { count, interval, top } = numbers
  const report = await measurePutAllocations(count, interval, top)
  process.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : `${render(report)}\n`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main()
