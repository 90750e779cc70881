// `mqstore clean <dir> [--dry-run] [--json]`: runs one cleanup pass on a store, or with --dry-run
// only shows what the policy would delete and why. It opens the store (taking its lock), so a store
// that another process has open is refused with LOCKED.
import * as fs from 'node:fs'
import { join } from 'node:path'

import { MQStoreError } from '../errors.js'
import { describeCommitLogPlan } from '../store/cleanup/commit-log-policy.js'
import { describeDerivedPlan } from '../store/cleanup/derived-policy.js'
import { percent } from '../store/cleanup/disk-policy.js'
import type { CleanupPass, CleanupPlan } from '../store/cleanup/cleanup-service.js'
import { EMBEDDED_DEFAULTS, ROCKETMQ_SIZES, type MessageStoreOptions } from '../store/config.js'
import { indexFileSize } from '../store/index/index-file.js'
import { MessageStore } from '../store/message-store.js'

export const CLEAN_USAGE = `usage: mqstore clean <dir> [--dry-run] [--json] [--manual]
                     [--file-reserved-time HOURS] [--delete-when HOURS] [--disk-max-used-space-ratio PERCENT]
                     [--max-hash-slot-num N --max-index-num N]

Runs one cleanup pass on a store: commit-log files past fileReservedTime at a deleteWhen hour or
under disk pressure (any age above 85 %), then the consume-queue and index files below the
commit log's new minimum. Takes the store's lock: a store open elsewhere is refused.
  --dry-run      show what would be deleted and why; delete nothing
  --json         print the plan (and the pass) as JSON
  --manual       as store.executeDeleteFilesManually(): expired files go whatever the hour
  --file-reserved-time, --delete-when, --disk-max-used-space-ratio
                 the store's retention options when they differ from the defaults (72, "04", 75)
  --max-hash-slot-num, --max-index-num
                 the store's index dimensions; without them they are read from the index files
File sizes are read from the files in the store.
Exit code: 0 done, 1 the store could not be opened (locked, damaged), 2 usage error.
`

interface Output {
  write(text: string): unknown
}

class UsageError extends Error {}

interface CleanArgs {
  dir: string
  dryRun: boolean
  json: boolean
  manual: boolean
  options: MessageStoreOptions
}

const VALUE_OPTIONS: Record<string, keyof MessageStoreOptions> = {
  'file-reserved-time': 'fileReservedTime',
  'delete-when': 'deleteWhen',
  'disk-max-used-space-ratio': 'diskMaxUsedSpaceRatio',
  'max-hash-slot-num': 'maxHashSlotNum',
  'max-index-num': 'maxIndexNum',
}

function parseArgs(args: readonly string[]): CleanArgs | 'help' {
  const parsed: CleanArgs = { dir: '', dryRun: false, json: false, manual: false, options: {} }
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === '-h' || arg === '--help') return 'help'
    if (arg === '--dry-run') parsed.dryRun = true
    else if (arg === '--json') parsed.json = true
    else if (arg === '--manual') parsed.manual = true
    else if (arg.startsWith('--')) {
      const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg)
      const name = m === null ? undefined : VALUE_OPTIONS[m[1]]
      if (m === null || name === undefined) throw new UsageError(`unknown option ${arg}`)
      const text = m[2] ?? args[++i]
      if (text === undefined || text === '') throw new UsageError(`--${m[1]} needs a value`)
      if (name === 'deleteWhen') parsed.options.deleteWhen = text
      else {
        const value = Number(text)
        if (!Number.isSafeInteger(value) || value < 0) throw new UsageError(`--${m[1]} needs a non-negative integer`)
        ;(parsed.options as Record<string, number>)[name] = value
      }
    } else {
      if (parsed.dir !== '') throw new UsageError('only one store directory may be given')
      parsed.dir = arg
    }
  }
  if (parsed.dir === '') throw new UsageError('the store directory is missing')
  if ((parsed.options.maxHashSlotNum === undefined) !== (parsed.options.maxIndexNum === undefined)) {
    throw new UsageError('give both --max-hash-slot-num and --max-index-num, or neither')
  }
  return parsed
}

/** The first regular file in `dir` (recursively), or null. */
function firstFile(dir: string): string | null {
  let entries: fs.Dirent[]
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true })
  } catch {
    return null
  }
  entries.sort((a, b) => a.name.localeCompare(b.name))
  for (const entry of entries) {
    const path = join(dir, entry.name)
    if (entry.isFile() && !entry.name.endsWith('.tmp')) return path
    if (entry.isDirectory()) {
      const found = firstFile(path)
      if (found !== null) return found
    }
  }
  return null
}

/** The store's file sizes, read from its files, so that open() accepts them. */
function sizesOnDisk(dir: string, given: MessageStoreOptions): MessageStoreOptions {
  const sizes: MessageStoreOptions = {}
  const commitLogFile = firstFile(join(dir, 'commitlog'))
  if (commitLogFile !== null) sizes.mappedFileSizeCommitLog = fs.statSync(commitLogFile).size
  const queueFile = firstFile(join(dir, 'consumequeue'))
  if (queueFile !== null) sizes.mappedFileSizeConsumeQueue = fs.statSync(queueFile).size
  const indexFile = firstFile(join(dir, 'index'))
  if (indexFile !== null && given.maxHashSlotNum === undefined) {
    const size = fs.statSync(indexFile).size
    const known = [EMBEDDED_DEFAULTS, ROCKETMQ_SIZES].find((c) => indexFileSize(c.maxHashSlotNum!, c.maxIndexNum!) === size)
    if (known === undefined) {
      throw new UsageError(`index files of ${size} bytes fit no known dimensions: pass --max-hash-slot-num and --max-index-num`)
    }
    sizes.maxHashSlotNum = known.maxHashSlotNum
    sizes.maxIndexNum = known.maxIndexNum
  }
  return sizes
}

export interface CleanReport {
  dir: string
  dryRun: boolean
  plan: CleanupPlan
  pass: CleanupPass | null
}

export function formatCleanReport(report: CleanReport): string {
  const { plan, pass } = report
  const lines = [`mqstore clean ${report.dir}${report.dryRun ? ' (dry run)' : ''}`]
  for (const reading of plan.readings) {
    const used = reading.usedRatio < 0 ? `unreadable (${reading.error})` : `${percent(reading.usedRatio)} used`
    lines.push(`disk ${reading.role}: ${used}`)
  }
  lines.push(`disk: ${plan.disk.why}${plan.disk.diskFull ? ' (DISK_FULL: puts refused)' : ''}`)
  lines.push(...describeCommitLogPlan(plan.commitLog))
  lines.push(...describeDerivedPlan(plan.derived))
  const planned = plan.commitLog.deletions.length
  lines.push(
    `${report.dryRun ? 'would delete' : 'planned'}: ${planned} commit-log file(s), ` +
      `${plan.derived.consumeQueues.reduce((n, q) => n + q.files.length, 0)} consume-queue file(s), ` +
      `${plan.derived.indexFiles.length} index file(s), ${plan.commitLog.bytes + plan.derived.bytes} bytes`,
  )
  if (pass !== null) {
    lines.push(
      `deleted: ${pass.commitLogFiles} commit-log file(s), ${pass.consumeQueueFiles} consume-queue file(s), ` +
        `${pass.indexFiles} index file(s), ${pass.bytes} bytes; commit log now starts at ${pass.commitLogMinOffset}`,
    )
  }
  return `${lines.join('\n')}\n`
}

/** `mqstore clean ...`: returns the exit code. */
export async function runClean(args: readonly string[], out: Output = process.stdout, err: Output = process.stderr): Promise<number> {
  let parsed: CleanArgs | 'help'
  let sizes: MessageStoreOptions
  try {
    parsed = parseArgs(args)
    if (parsed === 'help') {
      out.write(CLEAN_USAGE)
      return 0
    }
    if (!fs.existsSync(join(parsed.dir, 'commitlog'))) throw new UsageError(`${parsed.dir} is not a store (no commitlog/)`)
    sizes = sizesOnDisk(parsed.dir, parsed.options)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    err.write(`mqstore clean: ${error.message}\n${CLEAN_USAGE}`)
    return 2
  }
  const { dir, dryRun, json, manual, options } = parsed
  let store: MessageStore
  try {
    store = await MessageStore.open(dir, {
      ...sizes,
      ...options,
      // One pass, now, between files as fast as the disk allows.
      deleteCommitLogFilesInterval: 0,
      deleteConsumeQueueFilesInterval: 0,
      logger: (level, message) => {
        if (level !== 'info') err.write(`mqstore clean: ${level}: ${message}\n`)
      },
    })
  } catch (error) {
    if (!(error instanceof MQStoreError)) throw error
    err.write(`mqstore clean: cannot open ${dir}: ${error.code}: ${error.message}\n`)
    return 1
  }
  try {
    if (manual) store.executeDeleteFilesManually()
    const plan = await store.planCleanup()
    const pass = dryRun ? null : await store.runCleanupPass()
    const report: CleanReport = { dir, dryRun, plan, pass }
    out.write(json ? `${JSON.stringify(report, null, 2)}\n` : formatCleanReport(report))
    return 0
  } finally {
    await store.close()
  }
}
