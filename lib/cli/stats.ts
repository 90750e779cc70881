// `mqstore stats <dir>`: the store's figures. Read-only by default (computed from the files); with
// --open, the store is opened (lock, recovery) and MessageStore.stats() is printed, then closed.
import { MessageStore } from '../store/message-store.js'
import { EXIT, type Command } from './frame.js'
import { bytes, diskReport, groupSummaries, queueSummaries, type DiskReport } from './inspect.js'
import { sizesOf, StoreReader } from './store-reader.js'

export interface FileStats {
  dir: string
  lastShutdownClean: boolean
  commitLogFiles: number
  commitLogMinOffset: number
  commitLogMaxOffset: number
  /** Bytes of data between the two offsets. */
  commitLogBytes: number
  topics: number
  consumeQueueCount: number
  /** Messages reachable through the consume queues (sum of max - min). */
  messages: number
  indexFileCount: number
  indexEntries: number
  consumerGroups: number
  /** Largest lag of any group on any queue. */
  maxConsumerLag: number
  /** Store times of the first and last messages of the commit log (-1 when empty). */
  earliestMessageTime: number
  latestMessageTime: number
  disk: DiskReport
}

export function fileStats(dir: string): FileStats {
  using reader = StoreReader.open(dir)
  const queues = queueSummaries(reader)
  const groups = groupSummaries(reader, queues)
  const indexFiles = reader.indexFiles()
  const min = reader.minPhyOffset
  const max = reader.maxPhyOffset
  // The last record is the last unit of some queue; the queues tell where it is.
  let lastRecord = -1
  for (const q of reader.queues()) {
    const end = reader.maxOffset(q)
    const [unit] = end > 0 ? reader.readUnits(q, end - 1, 1) : []
    if (unit !== undefined && unit.commitLogOffset > lastRecord) lastRecord = unit.commitLogOffset
  }
  return {
    dir,
    lastShutdownClean: reader.lastShutdownClean(),
    commitLogFiles: reader.commitLog.length,
    commitLogMinOffset: min,
    commitLogMaxOffset: max,
    commitLogBytes: max - min,
    topics: new Set(queues.map((q) => q.topic)).size,
    consumeQueueCount: queues.length,
    messages: queues.reduce((sum, q) => sum + q.messages, 0),
    indexFileCount: indexFiles.length,
    indexEntries: indexFiles.reduce((sum, f) => sum + reader.indexEntries(f), 0),
    consumerGroups: new Set(groups.map((g) => g.group)).size,
    maxConsumerLag: groups.reduce((m, g) => Math.max(m, g.lag), 0),
    earliestMessageTime: max > min ? reader.storeTimestamp(min) : -1,
    latestMessageTime: lastRecord >= 0 ? reader.storeTimestamp(lastRecord) : -1,
    disk: diskReport(reader),
  }
}

function time(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString() : '-'
}

export function formatFileStats(s: FileStats): string {
  return `${[
    `store ${s.dir} (last shutdown ${s.lastShutdownClean ? 'clean' : 'NOT clean'})`,
    `messages:        ${s.messages} in ${s.consumeQueueCount} queue(s) of ${s.topics} topic(s)`,
    `commit log:      ${s.commitLogFiles} file(s), offsets ${s.commitLogMinOffset}..${s.commitLogMaxOffset} (${bytes(s.commitLogBytes)})`,
    `message times:   ${time(s.earliestMessageTime)} .. ${time(s.latestMessageTime)}`,
    `index:           ${s.indexFileCount} file(s), ${s.indexEntries} entries`,
    `consumer groups: ${s.consumerGroups}, largest lag ${s.maxConsumerLag}`,
    `disk:            ${bytes(s.disk.totalBytes)}` +
      (s.disk.partition === null
        ? ''
        : `; partition ${(s.disk.partition.usedRatio * 100).toFixed(1)}% used, ${bytes(s.disk.partition.availableBytes)} free`),
  ].join('\n')}\n`
}

export const statsCommand: Command = {
  name: 'stats',
  summary: "a store's figures: messages, offsets, index, lag, disk (read-only unless --open)",
  synopsis: 'stats <dir> [--open] [--json]',
  description: `Without --open, figures computed from the files, read-only (works on a store another process
has open): messages per queue summed, commit-log offsets and bytes, first and last message times,
index entries, consumer groups and their largest lag, disk usage.

With --open, the store is opened like a program opens it: the lock is taken (exit code 3 when
another process has the store open), a crash is recovered (with a progress bar on a TTY), and
MessageStore.stats() is printed (recovery outcome and repairs included); then it is closed cleanly.`,
  positionals: [1, 1],
  options: {
    open: { type: 'boolean', description: 'open the store (takes its lock, recovers) and print MessageStore.stats()' },
  },
  async run(ctx) {
    const dir = ctx.positionals[0]
    if (ctx.values.open !== true) {
      const stats = fileStats(dir)
      if (ctx.json) ctx.emitJson(stats)
      else ctx.out.write(formatFileStats(stats))
      return EXIT.OK
    }
    // A wrong path is a usage error, not a new empty store; the sizes come from the files.
    const sizes = (() => {
      using reader = StoreReader.open(dir)
      return sizesOf(reader)
    })()
    const progress = ctx.progress('recovering')
    const store = await MessageStore.open(dir, { ...sizes, onProgress: (p) => progress.update(p.scannedBytes, p.totalBytes) })
    progress.done()
    try {
      const stats = store.stats()
      if (ctx.json) ctx.emitJson(stats)
      else {
        for (const [name, value] of Object.entries(stats))
          ctx.line(`${name}: ${typeof value === 'object' ? JSON.stringify(value) : String(value)}`)
      }
    } finally {
      await store.close()
    }
    return EXIT.OK
  },
}
