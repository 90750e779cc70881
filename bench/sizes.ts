// Put throughput against message size (64 B ... 64 KiB) for mqstore, lmdb, better-sqlite3 and a
// raw fs.writeSync append, drawn as bench/throughput-by-size.svg. See bench/README.md.
//
//   npm run bench:sizes                           # every engine, 32 MiB of bodies per point
//   node dist/bench/sizes.js --budget 8 --json    # quicker, machine-readable
import { fork } from 'node:child_process'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

import { Progress } from '../lib/cli/frame.js'
import { MessageStore } from '../lib/index.js'
import { renderThroughputSvg, sizeLabel, type EngineSeries, type SizePoint } from './plot.js'
import { BenchError, makeTempDir, now, removeDir, secondsSince } from './workload.js'

export const SIZES = [64, 256, 1024, 4096, 16_384, 65_536]
export const SIZE_ENGINES = ['mqstore', 'lmdb', 'sqlite', 'raw'] as const
export type SizeEngine = (typeof SIZE_ENGINES)[number]
const LABELS: Record<SizeEngine, string> = {
  mqstore: 'mqstore (async flush, indexed)',
  lmdb: 'lmdb (lmdb-js, default sync)',
  sqlite: 'better-sqlite3 (WAL, NORMAL)',
  raw: 'fs.writeSync append (no fsync)',
}
/** Messages per batch (one putMessages / transaction), fewer for big bodies: at most 4 MiB a batch. */
const BATCH = 1000
const BATCH_BYTES = 4 * 1024 * 1024
const MIN_COUNT = 1000
const MAX_COUNT = 100_000
const DEFAULT_OUT = fileURLToPath(new URL('../../bench/throughput-by-size.svg', import.meta.url))

const USAGE = `usage: node dist/bench/sizes.js [options]   (or: mqstore bench sizes [options])

Puts messages of ${SIZES.map(sizeLabel).join(', ')} into each engine and plots messages/s and MiB/s
against the size. Each engine runs in its own child process; each point in a fresh directory.
  --budget MIB     body bytes written per point (default 32; between ${MIN_COUNT} and ${MAX_COUNT} messages)
  --only LIST      comma-separated subset of ${SIZE_ENGINES.join(',')}
  --out FILE       where to write the SVG (default bench/throughput-by-size.svg; '-' for none)
  --json           results as JSON on stdout
  --help           this text
`

export function countFor(size: number, budgetBytes: number): number {
  return Math.max(MIN_COUNT, Math.min(MAX_COUNT, Math.floor(budgetBytes / size)))
}

function batchFor(size: number): number {
  return Math.max(1, Math.min(BATCH, Math.floor(BATCH_BYTES / size)))
}

/** Bodies of `size` bytes, distinct per message (first 4 bytes = i), from one random template. */
function bodies(first: number, n: number, size: number, template: Buffer): Buffer[] {
  const slab = Buffer.allocUnsafe(n * size)
  const out: Buffer[] = []
  for (let j = 0; j < n; j++) {
    const body = slab.subarray(j * size, (j + 1) * size)
    template.copy(body, 0, 0, size)
    if (size >= 4) body.writeUInt32BE((first + j) >>> 0, 0)
    out.push(body)
  }
  return out
}

type Writer = (first: number, batch: Buffer[]) => Promise<void> | void

/** Opens an engine in `dir`; returns its batch writer and its close. */
async function openEngine(engine: SizeEngine, dir: string): Promise<{ write: Writer; close: () => Promise<void> | void }> {
  const require = createRequire(import.meta.url)
  switch (engine) {
    case 'mqstore': {
      const store = await MessageStore.open(dir, { flushDiskType: 'ASYNC_FLUSH' })
      return {
        write: async (first, batch) => {
          const results = await store.putMessages(
            batch.map((body, j) => ({ topic: `T${(first + j) % 4}`, queueId: ((first + j) >> 2) % 4, body, keys: [`k${first + j}`] })),
          )
          for (const r of results) if (r.status !== 'PUT_OK') throw new BenchError(`mqstore put: ${r.status}`)
        },
        close: () => store.close(),
      }
    }
    case 'lmdb': {
      const lmdb = await import('lmdb')
      const root = lmdb.open({ path: dir })
      const messages = root.openDB<Buffer, string>({ name: 'messages', encoding: 'binary' })
      const keys = root.openDB<string, string>({ name: 'keys', encoding: 'string' })
      return {
        // One event turn of puts is one transaction; the last put's promise resolves at its commit.
        write: async (first, batch) => {
          let last: Promise<boolean> | null = null
          for (let j = 0; j < batch.length; j++) {
            const i = first + j
            const pk = `T${i % 4}/${(i >> 2) % 4}/${String(i).padStart(10, '0')}`
            messages.put(pk, batch[j])
            last = keys.put(`k${i}`, pk)
          }
          if (last !== null && !(await last)) throw new BenchError('lmdb put failed')
        },
        close: () => root.close(),
      }
    }
    case 'sqlite': {
      type Db = {
        pragma(s: string): unknown
        exec(s: string): unknown
        prepare(s: string): { run(...a: unknown[]): unknown }
        transaction(fn: (...a: any[]) => void): (...a: any[]) => void
        close(): unknown
      }
      const Sqlite = require('better-sqlite3') as new (file: string) => Db
      const db = new Sqlite(join(dir, 'bench.db'))
      db.pragma('journal_mode = WAL')
      db.pragma('synchronous = NORMAL')
      db.exec(`CREATE TABLE messages (topic TEXT, queue INTEGER, qoffset INTEGER, msg_key TEXT, body BLOB);
        CREATE UNIQUE INDEX messages_by_queue ON messages (topic, queue, qoffset);
        CREATE INDEX messages_by_key ON messages (msg_key);`)
      const insert = db.prepare('INSERT INTO messages (topic, queue, qoffset, msg_key, body) VALUES (?, ?, ?, ?, ?)')
      const tx = db.transaction((first: number, batch: Buffer[]) => {
        for (let j = 0; j < batch.length; j++) {
          const i = first + j
          insert.run(`T${i % 4}`, (i >> 2) % 4, i >> 4, `k${i}`, batch[j])
        }
      })
      return { write: (first, batch) => tx(first, batch), close: () => void db.close() }
    }
    case 'raw': {
      // The floor: one length-prefixed append per message, as a hand-rolled log would do it.
      const fd = fs.openSync(join(dir, 'log'), 'a')
      const header = Buffer.alloc(4)
      return {
        write: (_first, batch) => {
          for (const body of batch) {
            header.writeUInt32BE(body.length, 0)
            fs.writeSync(fd, header)
            fs.writeSync(fd, body)
          }
        },
        close: () => fs.closeSync(fd),
      }
    }
  }
}

/** Puts `count` messages of `size` bytes into a fresh `engine` store; the time excludes open and close. */
async function measure(engine: SizeEngine, size: number, count: number, template: Buffer): Promise<SizePoint> {
  const dir = makeTempDir(`sizes-${engine}`)
  try {
    const { write, close } = await openEngine(engine, dir)
    const batchSize = batchFor(size)
    let seconds: number
    try {
      const started = now()
      for (let first = 0; first < count; first += batchSize)
        await write(first, bodies(first, Math.min(batchSize, count - first), size, template))
      seconds = secondsSince(started)
    } finally {
      await close()
    }
    return { size, messagesPerSecond: count / seconds, mibPerSecond: (count * size) / seconds / 1024 / 1024 }
  } finally {
    removeDir(dir)
  }
}

async function runEngine(engine: SizeEngine, budgetBytes: number, onPoint: (done: number) => void): Promise<SizePoint[]> {
  const template = Buffer.alloc(SIZES[SIZES.length - 1])
  let x = 0x2545f491
  for (let i = 0; i < template.length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    template[i] = x & 0xff
  }
  // An unmeasured warm-up, so the first point does not pay for the JIT.
  await measure(engine, 256, MIN_COUNT * 5, template)
  const points: SizePoint[] = []
  for (const size of SIZES) {
    points.push(await measure(engine, size, countFor(size, budgetBytes), template))
    onPoint(points.length)
  }
  return points
}

function runInChild(engine: SizeEngine, budgetMiB: number, onPoint: (done: number) => void): Promise<SizePoint[]> {
  return new Promise((resolve, reject) => {
    let result: SizePoint[] | null = null
    const child = fork(fileURLToPath(import.meta.url), ['--child', engine, '--budget', String(budgetMiB)], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    })
    child.on('message', (message: { point?: number; points?: SizePoint[] }) => {
      if (message.point !== undefined) onPoint(message.point)
      if (message.points !== undefined) result = message.points
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (result !== null && code === 0) resolve(result)
      else reject(new BenchError(`${engine}: child exited with ${signal ?? `status ${code}`}`))
    })
  })
}

function table(series: EngineSeries[]): string {
  const header = ['size', ...series.map((s) => `${s.engine} msg/s`), ...series.map((s) => `${s.engine} MiB/s`)]
  const rows = SIZES.map((size) => [
    sizeLabel(size),
    ...series.map((s) => Math.round(s.points.find((p) => p.size === size)?.messagesPerSecond ?? 0).toLocaleString('en-US')),
    ...series.map((s) => (s.points.find((p) => p.size === size)?.mibPerSecond ?? 0).toFixed(1)),
  ])
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)))
  return [header, ...rows].map((r) => r.map((cell, c) => cell.padStart(widths[c])).join('  ')).join('\n')
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      budget: { type: 'string' },
      only: { type: 'string' },
      out: { type: 'string' },
      json: { type: 'boolean' },
      child: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  })
  if (values.help === true) {
    process.stdout.write(USAGE)
    return 0
  }
  const budgetMiB = Number(values.budget ?? 32)
  if (!(budgetMiB > 0) || !Number.isFinite(budgetMiB)) throw new BenchError(`--budget needs a positive number of MiB, got ${values.budget}`)
  if (values.child !== undefined) {
    const engine = values.child as SizeEngine
    const points = await runEngine(engine, budgetMiB * 1024 * 1024, (point) => process.send?.({ point }))
    await new Promise<void>((resolve, reject) => process.send?.({ points }, (error: Error | null) => (error ? reject(error) : resolve())))
    return 0
  }
  const engines = values.only === undefined ? [...SIZE_ENGINES] : values.only.split(',').map((e) => e.trim())
  for (const e of engines)
    if (!SIZE_ENGINES.includes(e as SizeEngine)) throw new BenchError(`--only: unknown engine '${e}' (expected ${SIZE_ENGINES.join(', ')})`)
  const progress = new Progress(process.stderr, 'bench sizes', process.stderr.isTTY === true)
  const total = engines.length * SIZES.length
  const series: EngineSeries[] = []
  for (const [n, engine] of (engines as SizeEngine[]).entries()) {
    if (!progress.enabled) process.stderr.write(`${engine}: ${SIZES.length} sizes\n`)
    const points = await runInChild(engine, budgetMiB, (done) => progress.update(n * SIZES.length + done, total))
    series.push({ engine, label: LABELS[engine], points })
  }
  progress.done()
  // The load average goes on the plot: on a shared machine it says how far to trust the numbers.
  const environment = `node ${process.version}, ${os.platform()} ${os.arch()}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model.trim() ?? '?'}), load ${os.loadavg()[0].toFixed(1)}`
  const out = values.out ?? DEFAULT_OUT
  if (out !== '-') {
    const subtitle = `${environment}; ${budgetMiB} MiB of bodies per point (${MIN_COUNT}..${MAX_COUNT} messages), puts not waiting for fsync`
    fs.writeFileSync(out, renderThroughputSvg(series, 'Put throughput by message size', subtitle))
  }
  if (values.json === true)
    process.stdout.write(`${JSON.stringify({ environment, budgetMiB, sizes: SIZES, series, svg: out === '-' ? null : out }, null, 2)}\n`)
  else process.stdout.write(`${environment}\n${table(series)}\n${out === '-' ? '' : `plot: ${out}\n`}`)
  return 0
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(
      `${error instanceof BenchError || (error as NodeJS.ErrnoException)?.code?.startsWith('ERR_PARSE_ARGS') ? (error as Error).message : ((error as Error)?.stack ?? String(error))}\n`,
    )
    process.exitCode = error instanceof BenchError ? 1 : 2
  },
)
