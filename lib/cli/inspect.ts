// `mqstore inspect <dir>`: what a store holds, read-only: files, offsets, sizes, topics and queues
// with their offset ranges, consumer groups with their lag, disk usage, shutdown state.
import * as fs from 'node:fs'
import { join } from 'node:path'

import { statfsDiskUsage } from '../store/environment.js'
import { EXIT, type Command, type CommandContext } from './frame.js'
import { formatSchedule, scheduleReport, type ScheduleReport } from './schedule-report.js'
import { StoreReader, type Segment } from './store-reader.js'
import { formatTimers, timerReport, type TimerReport } from './timer-report.js'
import { type HaRoleRecord, readHaRole } from '../store/ha/ha-role-file.js'

export interface QueueSummary {
  topic: string
  queueId: number
  files: number
  minOffset: number
  maxOffset: number
  messages: number
}

export interface GroupSummary {
  group: string
  topic: string
  queueId: number
  committedOffset: number
  maxOffset: number
  /** Messages between the committed offset and the queue's end (0 when caught up). */
  lag: number
}

export interface InspectReport {
  dir: string
  /** False when the abort file is present: the store is open now, or its last process crashed. */
  lastShutdownClean: boolean
  /** True when a process holds the store's lock (Linux, from /proc/locks); null when unknown. */
  openElsewhere: boolean | null
  /**
   * RunningFlags live in the memory of the process that has the store open; a store on disk has
   * none. Always empty here: `stats --open` and `MessageStore.stats()` report a live store's.
   */
  runningFlags: string[]
  commitLog: {
    files: { name: string; offset: number; size: number; allocatedBytes: number }[]
    minOffset: number
    maxOffset: number
  }
  topics: { topic: string; queues: number; messages: number }[]
  queues: QueueSummary[]
  groups: GroupSummary[]
  index: { files: { name: string; size: number; entries: number }[] }
  checkpoint: { physicMsgTimestamp: number; logicsMsgTimestamp: number; indexMsgTimestamp: number } | null
  disk: DiskReport
  /** Delayed messages pending in SCHEDULE_TOPIC_XXXX (schedule-report.ts). */
  schedule: ScheduleReport
  /** Timers pending in the timer wheel (timer-report.ts). */
  timer: TimerReport
  /** The replication role the store last ran with (config/haRole.json); null when that file is unreadable. */
  role: HaRoleRecord | null
}

export interface DiskReport {
  /** Bytes the store's files occupy on disk, by area. */
  commitLogBytes: number
  consumeQueueBytes: number
  indexBytes: number
  otherBytes: number
  totalBytes: number
  /** The partition holding the store. */
  partition: { totalBytes: number; availableBytes: number; usedRatio: number } | null
}

function allocated(segments: Segment[]): number {
  return segments.reduce((sum, s) => sum + s.allocated, 0)
}

/** Allocated bytes of every file under `path`. */
function treeBytes(path: string): number {
  let sum = 0
  for (const entry of fs.readdirSync(path, { withFileTypes: true })) {
    const full = join(path, entry.name)
    if (entry.isDirectory()) sum += treeBytes(full)
    else if (entry.isFile()) sum += fs.statSync(full).blocks * 512
  }
  return sum
}

export function diskReport(reader: StoreReader): DiskReport {
  const commitLogBytes = allocated(reader.commitLog)
  const consumeQueueBytes = fs.existsSync(reader.paths.consumeQueues) ? treeBytes(reader.paths.consumeQueues) : 0
  const indexBytes = allocated(reader.indexFiles())
  const totalBytes = treeBytes(reader.dir)
  let partition: DiskReport['partition'] = null
  try {
    partition = statfsDiskUsage.usage(reader.dir)
  } catch {
    partition = null
  }
  return {
    commitLogBytes,
    consumeQueueBytes,
    indexBytes,
    otherBytes: totalBytes - commitLogBytes - consumeQueueBytes - indexBytes,
    totalBytes,
    partition,
  }
}

export function queueSummaries(reader: StoreReader): QueueSummary[] {
  return reader.queues().map((q) => {
    const maxOffset = reader.maxOffset(q)
    const minOffset = reader.minOffset(q)
    return { topic: q.topic, queueId: q.queueId, files: q.segments.length, minOffset, maxOffset, messages: maxOffset - minOffset }
  })
}

export function groupSummaries(reader: StoreReader, queues: QueueSummary[]): GroupSummary[] {
  const max = new Map(queues.map((q) => [`${q.topic}\0${q.queueId}`, q.maxOffset]))
  return reader.consumerOffsets().map((row) => {
    const maxOffset = max.get(`${row.topic}\0${row.queueId}`) ?? 0
    return {
      group: row.group,
      topic: row.topic,
      queueId: row.queueId,
      committedOffset: row.offset,
      maxOffset,
      lag: Math.max(0, maxOffset - row.offset),
    }
  })
}

export function topicSummaries(queues: QueueSummary[]): InspectReport['topics'] {
  const topics = new Map<string, { topic: string; queues: number; messages: number }>()
  for (const q of queues) {
    const t = topics.get(q.topic) ?? { topic: q.topic, queues: 0, messages: 0 }
    t.queues++
    t.messages += q.messages
    topics.set(q.topic, t)
  }
  return [...topics.values()]
}

export function inspectStore(dir: string): InspectReport {
  using reader = StoreReader.open(dir)
  const queues = queueSummaries(reader)
  return {
    dir,
    lastShutdownClean: reader.lastShutdownClean(),
    openElsewhere: reader.lockedByAnotherProcess(),
    runningFlags: [],
    commitLog: {
      files: reader.commitLog.map((s) => ({ name: s.name, offset: s.offset, size: s.size, allocatedBytes: s.allocated })),
      minOffset: reader.minPhyOffset,
      maxOffset: reader.maxPhyOffset,
    },
    topics: topicSummaries(queues),
    queues,
    groups: groupSummaries(reader, queues),
    index: { files: reader.indexFiles().map((f) => ({ name: f.name, size: f.size, entries: reader.indexEntries(f) })) },
    checkpoint: reader.checkpoint(),
    disk: diskReport(reader),
    schedule: scheduleReport(reader),
    timer: timerReport(reader),
    role: readHaRole(reader.paths.haRole),
  }
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let value = n
  let unit = -1
  do {
    value /= 1024
    unit++
  } while (value >= 1024 && unit < units.length - 1)
  return `${value.toFixed(1)} ${units[unit]}`
}

function time(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString() : '-'
}

function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)))
  return rows.map((r) => `  ${r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ')}`)
}

export function formatInspect(r: InspectReport): string {
  const lines = [`store ${r.dir}`]
  const open = r.openElsewhere === true ? 'open in a process now' : r.openElsewhere === false ? 'not open' : 'open or not: unknown'
  lines.push(`state: ${open}; last shutdown ${r.lastShutdownClean ? 'clean' : 'NOT clean (abort file present)'}`)
  lines.push(`role: ${formatRole(r.role)}`)
  lines.push(
    `commit log: ${r.commitLog.files.length} file(s), offsets ${r.commitLog.minOffset}..${r.commitLog.maxOffset} (${bytes(r.commitLog.maxOffset - r.commitLog.minOffset)} of data)`,
  )
  for (const f of r.commitLog.files) lines.push(`  ${f.name}  ${bytes(f.size)} (${bytes(f.allocatedBytes)} on disk)`)
  lines.push(`topics: ${r.topics.length}, queues: ${r.queues.length}`)
  if (r.queues.length > 0) {
    lines.push(
      ...table([
        ['topic/queue', 'min', 'max', 'messages', 'files'],
        ...r.queues.map((q) => [`${q.topic}/${q.queueId}`, String(q.minOffset), String(q.maxOffset), String(q.messages), String(q.files)]),
      ]),
    )
  }
  lines.push(`consumer groups: ${new Set(r.groups.map((g) => g.group)).size}`)
  if (r.groups.length > 0) {
    lines.push(
      ...table([
        ['group', 'topic/queue', 'committed', 'max', 'lag'],
        ...r.groups.map((g) => [g.group, `${g.topic}/${g.queueId}`, String(g.committedOffset), String(g.maxOffset), String(g.lag)]),
      ]),
    )
  }
  lines.push(...formatSchedule(r.schedule, time))
  lines.push(...formatTimers(r.timer, time))
  lines.push(`index: ${r.index.files.length} file(s), ${r.index.files.reduce((s, f) => s + f.entries, 0)} entries`)
  const cp = r.checkpoint
  lines.push(
    cp === null
      ? 'checkpoint: absent'
      : `checkpoint: physic ${time(cp.physicMsgTimestamp)}, logics ${time(cp.logicsMsgTimestamp)}, index ${time(cp.indexMsgTimestamp)}`,
  )
  const d = r.disk
  lines.push(
    `disk: ${bytes(d.totalBytes)} (commit log ${bytes(d.commitLogBytes)}, consume queues ${bytes(d.consumeQueueBytes)}, index ${bytes(d.indexBytes)}, other ${bytes(d.otherBytes)})`,
  )
  if (d.partition !== null)
    lines.push(
      `partition: ${(d.partition.usedRatio * 100).toFixed(1)}% used, ${bytes(d.partition.availableBytes)} free of ${bytes(d.partition.totalBytes)}`,
    )
  lines.push('running flags: none on disk (they live in the process that has the store open; see stats --open)')
  return `${lines.join('\n')}\n`
}

export const inspectCommand: Command = {
  name: 'inspect',
  summary: 'files, offsets, topics and queues, consumer lag, disk usage (read-only)',
  synopsis: 'inspect <dir> [--json]',
  description: `Shows what a store holds: commit-log files and offsets, every topic and queue with its
min and max offsets, consumer groups with their committed offsets and lag, delayed messages still
pending (per level, with their due times and destinations), timers pending (count, next due time,
the earliest ones with their destinations), index files, the checkpoint, disk
usage, and whether the last shutdown was clean.

Read-only: takes no lock and changes nothing, so it works on a store another process has open (the
live tail it reports may then be a moment old).`,
  positionals: [1, 1],
  async run(ctx: CommandContext) {
    const report = inspectStore(ctx.positionals[0])
    if (ctx.json) ctx.emitJson(report)
    else ctx.out.write(formatInspect(report))
    return EXIT.OK
  },
}

/** The role line: the role, then a slave's master or a master's HA port. */
function formatRole(role: HaRoleRecord | null): string {
  if (role === null) return 'unknown (config/haRole.json is unreadable)'
  if (role.haMasterAddress !== undefined) return `${role.brokerRole}, replicating from ${role.haMasterAddress}`
  if (role.haListen !== undefined) return `${role.brokerRole}, serving slaves on ${role.haListen}`
  return role.brokerRole
}
