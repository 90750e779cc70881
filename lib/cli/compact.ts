// `mqstore compact <dir> [--topic T] [--json]`: opens the store (so no other process may have it
// open), runs one compaction pass over its compacted queues, prints what it did, and closes it.
import * as fs from 'node:fs'
import { join, resolve } from 'node:path'

import { EMBEDDED_DEFAULTS, ROCKETMQ_SIZES, type MessageStoreOptions } from '../store/config.js'
import { indexFileSize } from '../store/index/index-file.js'
import { MessageStore } from '../store/message-store.js'
import { COMMITLOG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR } from '../store/store-paths.js'
import type { CompactReport } from '../store/compaction/compaction-service.js'

export const COMPACT_USAGE = `usage: mqstore compact <dir> [--topic T] [--json] [--max-hash-slot-num N --max-index-num N]
  run a compaction pass now over the compacted queues of the store in dir (of topic T only);
  file sizes are read from the store's files (index sizes: the embedded or RocketMQ preset, or
  the two flags)
`

interface Output {
  write(text: string): unknown
  isTTY?: boolean
}

interface Parsed {
  dir: string
  topic: string | undefined
  json: boolean
  index: { maxHashSlotNum?: number; maxIndexNum?: number }
}

function parse(args: readonly string[]): Parsed | 'help' | string {
  let dir: string | undefined
  let topic: string | undefined
  let json = false
  const index: Parsed['index'] = {}
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    // '-h' and any other '-x' are options, never a store directory to open (and so create).
    if (a === '--help' || a === '-h') return 'help'
    if (a === '--json') json = true
    else if (a === '--max-hash-slot-num' || a === '--max-index-num') {
      const value = Number(args[++i])
      if (!Number.isSafeInteger(value) || value < 2) return `${a} needs an integer >= 2`
      if (a === '--max-hash-slot-num') index.maxHashSlotNum = value
      else index.maxIndexNum = value
    } else if (a === '--topic') {
      topic = args[++i]
      if (topic === undefined) return '--topic needs a topic name'
    } else if (a.startsWith('-') && a !== '-') return `unknown option ${a}`
    else if (dir === undefined) dir = a
    else return `unexpected argument ${a}`
  }
  if (dir === undefined) return 'missing <dir>'
  if ((index.maxHashSlotNum === undefined) !== (index.maxIndexNum === undefined))
    return 'give both --max-hash-slot-num and --max-index-num, or neither'
  return { dir: resolve(dir), topic, json, index }
}

function firstFileSize(dir: string, depth: number): number | undefined {
  let names: string[]
  try {
    names = fs.readdirSync(dir).sort()
  } catch {
    return undefined
  }
  for (const name of names) {
    const path = join(dir, name)
    const stat = fs.statSync(path)
    if (depth === 0 && stat.isFile() && /^\d+$/.test(name) && stat.size > 0) return stat.size
    if (depth > 0 && stat.isDirectory()) {
      const size = firstFileSize(path, depth - 1)
      if (size !== undefined) return size
    }
  }
  return undefined
}

/** The store's file sizes, read from its files (segments are created at full size). */
export function inferFileSizes(dir: string, index: Parsed['index']): MessageStoreOptions {
  const options: MessageStoreOptions = { ...index }
  const commitLog = firstFileSize(join(dir, COMMITLOG_DIR), 0)
  if (commitLog !== undefined) options.mappedFileSizeCommitLog = commitLog
  const queue = firstFileSize(join(dir, CONSUME_QUEUE_DIR), 2)
  if (queue !== undefined) options.mappedFileSizeConsumeQueue = queue
  if (index.maxHashSlotNum === undefined) {
    const size = firstFileSize(join(dir, INDEX_DIR), 0)
    for (const preset of [EMBEDDED_DEFAULTS, ROCKETMQ_SIZES]) {
      if (size === indexFileSize(preset.maxHashSlotNum!, preset.maxIndexNum!)) {
        options.maxHashSlotNum = preset.maxHashSlotNum
        options.maxIndexNum = preset.maxIndexNum
      }
    }
  }
  return options
}

const MiB = 1024 * 1024

export function formatCompactReport(r: CompactReport): string {
  const lines = [
    `queues cleaned: ${r.queues.length}${r.failed.length > 0 ? `, failed: ${r.failed.length}` : ''}`,
    `bytes read: ${r.bytesRead} (${(r.bytesRead / MiB).toFixed(1)} MiB), written: ${r.bytesWritten} (${(r.bytesWritten / MiB).toFixed(1)} MiB)`,
    `records kept: ${r.recordsKept}, dropped: ${r.recordsDropped}`,
    `duration: ${r.durationMs.toFixed(0)} ms`,
  ]
  for (const q of r.queues) {
    lines.push(
      `  ${q.topic}/${q.queueId}: offsets ${q.firstDirtyOffset}..${q.endOffset - 1} mapped (${q.keys} keys${q.mapFull ? ', map full: run again' : ''}), kept ${q.recordsKept}, dropped ${q.recordsDropped}`,
    )
  }
  for (const f of r.failed) lines.push(`  ${f.topic}/${f.queueId}: FAILED: ${f.error}`)
  return `${lines.join('\n')}\n`
}

export async function runCompact(args: readonly string[], out: Output = process.stdout, err: Output = process.stderr): Promise<number> {
  const parsed = parse(args)
  if (parsed === 'help') {
    out.write(COMPACT_USAGE)
    return 0
  }
  if (typeof parsed === 'string') {
    err.write(`mqstore compact: ${parsed}\n${COMPACT_USAGE}`)
    return 2
  }
  const store = await MessageStore.open(parsed.dir, { ...inferFileSizes(parsed.dir, parsed.index), compaction: { enabled: false } })
  const bar = !parsed.json && err.isTTY === true
  let report: CompactReport
  try {
    report = await store.compact(parsed.topic, {
      onProgress: bar
        ? (done, total) => {
            const width = 30
            const filled = total === 0 ? width : Math.round((done / total) * width)
            err.write(`\rcompacting [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} queues`)
          }
        : undefined,
    })
  } finally {
    if (bar) err.write('\r\x1b[K')
    await store.close()
  }
  out.write(parsed.json ? `${JSON.stringify(report, null, 2)}\n` : formatCompactReport(report))
  return report.failed.length > 0 ? 1 : 0
}
