// How the store scales with the number of queues and files: for each size, a child process writes
// 4 messages of 100 B to every queue (spread over 100 topics) and closes, timing the first round
// (each put creates its queue) apart as the cost of a new queue (and the JS thread's share of it);
// a second child reopens the store and reports the reopen time, its open descriptors, mapped bytes
// and RSS, and the disk the store takes, then reads every queue once (a clean reopen defers each
// queue's work to its first use, so this is where that work shows). A last row writes a commit log
// of 1,000 small files, reopens it, and reads it all under a 16 MiB mapping budget (old commit-log
// files are mapped on first use and unmapped past the budget): mapped bytes after the reopen, and
// after the reads.
// Another writes 100 index files (small entry tables, 1 MB slot tables) and reopens them: index
// files are mapped by the first query that needs them, not at open (its log is read back too).
//
//   node dist/bench/scale.js                         # 50, 500, 5000, 20000 queues, and 1,000 files
//   node dist/bench/scale.js --queues 50,500 --json
import { fork } from 'node:child_process'
import * as fs from 'node:fs'
import { fileURLToPath } from 'node:url'

import { MessageStore, type Message, type OpenOptions } from '../lib/index.js'
import { diskUsage, makeTempDir, removeDir, scriptOptions, threadClock, threadTimesSince } from './workload.js'

const USAGE = `usage: node dist/bench/scale.js [options]   (or: npm run bench:scale -- [options])

Times puts that create queues (4 messages each over 100 topics), reopens and reads the store, and
measures a log of 1,000 small files and 100 index files. See bench/README.md, "Scale".
  --queues LIST    comma-separated queue counts (default 50,500,5000,20000)
  --no-files       leave out the small-files and index-files rows
  --json           rows as JSON on stdout
  --help           this text
`

const TOPICS = 100
const MESSAGES_PER_QUEUE = 4
const BODY = Buffer.alloc(100, 'x')
const BATCH = 512
const SMALL_FILE_BYTES = 64 * 1024
const SMALL_FILES = 1000
/** Index files of 250,000 slots and 2,000 entries (1.04 MB): one key per message fills 100 of them. */
const INDEX_FILES = 100
const INDEX_OPTIONS: OpenOptions = { maxHashSlotNum: 250_000, maxIndexNum: 2_000 }
/** The mapping budget of the small-files row: a quarter of its log, so the reads must unmap. */
const SMALL_FILES_BUDGET_BYTES = 16 * 1024 * 1024

export interface ScaleRow {
  name: string
  queues: number
  commitLogFiles: number
  writeMsgPerSec: number
  /** Put time per queue of the round that creates every queue (µs; -1: not measured). */
  newQueueUs: number
  /**
   * The JS thread's CPU time per queue in that round (µs; -1: not measured, or not Linux): the
   * put path's own cost, apart from the waits for the files made on the libuv pool.
   */
  newQueueJsUs: number
  reopenMs: number
  /** Reading the first messages of every queue after the reopen (-1: not measured). */
  readAllMs: number
  openFiles: number
  mappedBytes: number
  /** Mapped bytes once every message was read (-1: not measured). */
  mappedAfterReadBytes: number
  rssBytes: number
  diskBytes: number
}

interface ChildRequest {
  step: 'write' | 'reopen'
  dir: string
  queues: number
  options: OpenOptions
  messages?: number
}

/** Descriptors this process holds (Linux; -1 elsewhere). */
function openFiles(): number {
  try {
    return fs.readdirSync('/proc/self/fd').length - 1 // the readdir's own descriptor
  } catch {
    return -1
  }
}

/** Bytes of file mappings under `dir` (Linux; -1 elsewhere). */
function mappedBytes(dir: string): number {
  try {
    let total = 0
    for (const line of fs.readFileSync('/proc/self/maps', 'utf8').split('\n')) {
      const parts = line.trim().split(/\s+/)
      if (parts.length < 6 || !parts[5].startsWith(dir)) continue
      const [from, to] = parts[0].split('-').map((h) => parseInt(h, 16))
      total += to - from
    }
    return total
  } catch {
    return -1
  }
}

function queueMessages(queues: number): Message[] {
  const perTopic = Math.max(1, Math.ceil(queues / TOPICS))
  const messages: Message[] = []
  for (let round = 0; round < MESSAGES_PER_QUEUE; round++) {
    for (let q = 0; q < queues; q++) {
      messages.push({ topic: `scale-${Math.floor(q / perTopic)}`, queueId: q % perTopic, body: BODY, keys: `k${q}-${round}` })
    }
  }
  return messages
}

async function childStep(request: ChildRequest): Promise<Record<string, number>> {
  const began = process.hrtime.bigint()
  const store = await MessageStore.open(request.dir, request.options)
  const openedMs = Number(process.hrtime.bigint() - began) / 1e6
  if (request.step === 'reopen') {
    const figures = {
      reopenMs: openedMs,
      openFiles: openFiles(),
      mappedBytes: mappedBytes(request.dir),
      rssBytes: process.memoryUsage().rss,
      readAllMs: -1,
      mappedAfterReadBytes: -1,
    }
    if (request.messages !== undefined) {
      // Every queue of the topic, from its first message to its last.
      const readBegan = process.hrtime.bigint()
      let read = 0
      const queueCount = store.listTopics().find((t) => t.topic === 'small')?.readQueueNums ?? 0
      for (let q = 0; q < queueCount; q++) {
        const max = store.getMaxOffsetInQueue('small', q)
        for (let from = 0; from < max; ) {
          const got = store.getMessage('scale', 'small', q, from, 32)
          if (got.messages.length === 0) throw new Error(`queue ${q} at ${from}: ${got.status}`)
          read += got.messages.length
          from = got.nextBeginOffset
        }
      }
      if (read !== request.messages) throw new Error(`read ${read} of ${request.messages} messages`)
      figures.readAllMs = Number(process.hrtime.bigint() - readBegan) / 1e6
      figures.mappedAfterReadBytes = mappedBytes(request.dir)
    } else {
      const perTopic = Math.max(1, Math.ceil(request.queues / TOPICS))
      const readBegan = process.hrtime.bigint()
      for (let q = 0; q < request.queues; q++) {
        const got = store.getMessage('scale', `scale-${Math.floor(q / perTopic)}`, q % perTopic, 0, MESSAGES_PER_QUEUE)
        if (got.messages.length !== MESSAGES_PER_QUEUE) throw new Error(`queue ${q}: ${got.status}, ${got.messages.length} messages`)
      }
      figures.readAllMs = Number(process.hrtime.bigint() - readBegan) / 1e6
      figures.mappedAfterReadBytes = mappedBytes(request.dir)
    }
    await store.close()
    return figures
  }
  const messages =
    request.messages === undefined
      ? queueMessages(request.queues)
      : Array.from({ length: request.messages }, (_, i) => ({ topic: 'small', body: BODY, keys: `s${i}` }))
  // The first round gives every queue its first message: its time per message is what creating a
  // queue costs on the put path (the queues' first flush is not in it).
  const firstRound = request.messages === undefined ? request.queues : 0
  const put = async (from: number, to: number): Promise<void> => {
    for (let i = from; i < to; i += BATCH) {
      const results = await store.putMessages(messages.slice(i, Math.min(to, i + BATCH)))
      const failed = results.find((r) => r.status !== 'PUT_OK')
      if (failed !== undefined) throw new Error(`put failed at message ${i}: ${failed.status}`)
    }
  }
  const start = process.hrtime.bigint()
  const clock = threadClock()
  await put(0, firstRound)
  const created = process.hrtime.bigint()
  const jsRunNs = threadTimesSince(clock)?.jsRunNs
  await put(firstRound, messages.length)
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  await store.close()
  const newQueueUs = firstRound > 0 ? Number(created - start) / 1e3 / firstRound : -1
  const newQueueJsUs = firstRound > 0 && jsRunNs !== undefined ? jsRunNs / 1e3 / firstRound : -1
  return { writeMsgPerSec: messages.length / seconds, newQueueUs, newQueueJsUs }
}

function inChild(request: ChildRequest): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ['--child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    child.once('message', (m) => resolve(m as Record<string, number>))
    child.once('error', reject)
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`scale child exited with ${code}`))
    })
    child.send(request)
  })
}

async function measure(name: string, queues: number, options: OpenOptions, messages?: number): Promise<ScaleRow> {
  const dir = makeTempDir('scale')
  try {
    const written = await inChild({ step: 'write', dir, queues, options, messages })
    const reopened = await inChild({ step: 'reopen', dir, queues, options, messages })
    const commitLogFiles = fs.readdirSync(`${dir}/commitlog`).length
    return {
      name,
      queues,
      commitLogFiles,
      writeMsgPerSec: Math.round(written.writeMsgPerSec),
      newQueueUs: Math.round(written.newQueueUs),
      newQueueJsUs: Math.round(written.newQueueJsUs),
      reopenMs: Math.round(reopened.reopenMs * 10) / 10,
      readAllMs: Math.round(reopened.readAllMs * 10) / 10,
      openFiles: reopened.openFiles,
      mappedBytes: reopened.mappedBytes,
      mappedAfterReadBytes: reopened.mappedAfterReadBytes,
      rssBytes: reopened.rssBytes,
      diskBytes: diskUsage(dir),
    }
  } finally {
    removeDir(dir)
  }
}

const MB = 1e6

export function formatScaleTable(rows: ScaleRow[]): string {
  const header = [
    'scale',
    'queues',
    'log files',
    'write msg/s',
    'new queue µs',
    'of it JS µs',
    'reopen ms',
    'read all ms',
    'open files',
    'mapped MB',
    'after read MB',
    'RSS MB',
    'disk MB',
  ]
  const lines = rows.map((r) => [
    r.name,
    String(r.queues),
    String(r.commitLogFiles),
    r.writeMsgPerSec.toLocaleString('en-US'),
    r.newQueueUs < 0 ? '—' : r.newQueueUs.toLocaleString('en-US'),
    r.newQueueJsUs < 0 ? '—' : r.newQueueJsUs.toLocaleString('en-US'),
    String(r.reopenMs),
    r.readAllMs < 0 ? '—' : String(r.readAllMs),
    String(r.openFiles),
    (r.mappedBytes / MB).toFixed(1),
    r.mappedAfterReadBytes < 0 ? '—' : (r.mappedAfterReadBytes / MB).toFixed(1),
    (r.rssBytes / MB).toFixed(1),
    (r.diskBytes / MB).toFixed(1),
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)))
  return [header, ...lines].map((l) => l.map((c, i) => c.padStart(widths[i])).join('  ')).join('\n')
}

export async function runScale(queueCounts: number[], withSmallFiles: boolean): Promise<ScaleRow[]> {
  const rows: ScaleRow[] = []
  for (const queues of queueCounts) {
    process.stderr.write(`scale: ${queues} queues...\n`)
    rows.push(await measure(`${queues} queues`, queues, { flushDiskType: 'ASYNC_FLUSH' }))
  }
  if (withSmallFiles) {
    process.stderr.write(`scale: ${SMALL_FILES} commit-log files...\n`)
    // Records of ~200 B: about 320 per 64 KiB file.
    const messages = Math.ceil((SMALL_FILES * SMALL_FILE_BYTES) / 200)
    rows.push(
      await measure(
        `${SMALL_FILES} log files`,
        1,
        // No key index: its 84 MB file alone would not fit the budget (the index row measures it).
        {
          flushDiskType: 'ASYNC_FLUSH',
          mappedFileSizeCommitLog: SMALL_FILE_BYTES,
          mappingBudgetBytes: SMALL_FILES_BUDGET_BYTES,
          messageIndexEnable: false,
        },
        messages,
      ),
    )
    process.stderr.write(`scale: ${INDEX_FILES} index files...\n`)
    const keys = INDEX_FILES * (INDEX_OPTIONS.maxIndexNum! - 1)
    rows.push(await measure(`${INDEX_FILES} index files`, 1, { flushDiskType: 'ASYNC_FLUSH', ...INDEX_OPTIONS }, keys))
  }
  return rows
}

async function main(): Promise<void> {
  if (process.argv.includes('--child')) {
    process.once('message', (request) => {
      childStep(request as ChildRequest).then(
        (figures) => process.send?.(figures, () => process.exit(0)),
        (error: unknown) => {
          process.stderr.write(`${(error as Error).stack ?? String(error)}\n`)
          process.exit(1)
        },
      )
    })
    return
  }
  const values = scriptOptions(
    {
      options: {
        queues: { type: 'string' },
        json: { type: 'boolean' },
        'no-files': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    },
    USAGE,
  )
  if (values === null) return
  const counts = (values.queues ?? '50,500,5000,20000').split(',').map(Number)
  if (counts.some((n) => !Number.isSafeInteger(n) || n < 1)) {
    process.stderr.write(`--queues takes a comma-separated list of positive integers\n${USAGE}`)
    process.exitCode = 2
    return
  }
  const rows = await runScale(counts, values['no-files'] !== true)
  process.stdout.write(values.json === true ? `${JSON.stringify(rows, null, 2)}\n` : `${formatScaleTable(rows)}\n`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main()
