// config/delayOffset.json: per delay level, the next offset to deliver in SCHEDULE_TOPIC_XXXX queue
// level − 1. Written byte for byte as RocketMQ's fastjson writes it (integer keys unquoted, a tab
// before "offsetTable", no line break before a key, no trailing newline):
//
//   {
//   <TAB>"offsetTable":{1:120,2:0,3:57
//   <TAB>}
//   }
//
// and an empty table as `{` LF TAB `"offsetTable":{}` LF `}`. Read with quoted or unquoted keys,
// pretty or compact. Saved as RocketMQ's config files are: .tmp, old file kept as .bak, rename.
import { parseLenientJson } from '../consumer-offsets.js'
import { readTextIfExists, writeFileDurably } from '../mapped/directory.js'

/** What a load found: the table, and why the file could not be used as it was (null when it could). */
export interface LoadedDelayOffsets {
  readonly table: Map<number, number>
  /** Null when the file was read as is (or both files are absent); else what was wrong with it. */
  readonly damage: string | null
  /** True when the table came from `<file>.bak`. */
  readonly fromBackup: boolean
}

/** The file's text for a table (levels in ascending order, as RocketMQ writes levels < 64). */
export function formatDelayOffsets(table: ReadonlyMap<number, number>): string {
  const entries = [...table].sort((a, b) => a[0] - b[0])
  if (entries.length === 0) return '{\n\t"offsetTable":{}\n}'
  return `{\n\t"offsetTable":{${entries.map(([level, offset]) => `${level}:${offset}`).join(',')}\n\t}\n}`
}

/**
 * Parses the file's text: the table, or why it is not one (unparsable, no offsetTable object, a
 * key that is not a positive level, an offset that is not a non-negative integer).
 */
export function parseDelayOffsets(text: string): Map<number, number> | string {
  let parsed: unknown
  try {
    parsed = parseLenientJson(text)
  } catch (error) {
    return `not JSON: ${(error as Error).message}`
  }
  const offsetTable = (parsed as { offsetTable?: unknown } | null)?.offsetTable
  if (offsetTable === null || typeof offsetTable !== 'object' || Array.isArray(offsetTable)) return 'no "offsetTable" object'
  const table = new Map<number, number>()
  for (const [key, value] of Object.entries(offsetTable as Record<string, unknown>)) {
    const level = Number(key)
    if (!/^\d+$/.test(key) || !Number.isSafeInteger(level) || level < 1) return `level ${JSON.stringify(key)} is not a positive integer`
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
      return `offset ${JSON.stringify(value)} of level ${level} is not a non-negative integer`
    }
    table.set(level, value)
  }
  return table
}

/** Reads `path`, falling back to `<path>.bak` when it is missing, empty or damaged (RocketMQ's rule). */
export function loadDelayOffsets(path: string): LoadedDelayOffsets {
  const main = readTable(path)
  if (main instanceof Map) return { table: main, damage: null, fromBackup: false }
  const backup = readTable(`${path}.bak`)
  // A missing or empty file is not damage: a new store has none yet.
  const damage = main === null ? null : main
  if (backup instanceof Map) return { table: backup, damage: damage ?? 'the file is missing or empty', fromBackup: true }
  if (damage === null && backup === null) return { table: new Map(), damage: null, fromBackup: false }
  return { table: new Map(), damage: damage ?? `the backup ${backup}`, fromBackup: false }
}

/** The table of one file, null when the file is missing or empty, or why it is damaged. */
function readTable(path: string): Map<number, number> | string | null {
  let text: string | null
  try {
    text = readTextIfExists(path)
  } catch {
    return null
  }
  if (text === null || text.trim() === '') return null
  return parseDelayOffsets(text)
}

/** Writes the table durably (temp file synced, .bak kept, rename, folder synced). */
export function saveDelayOffsets(path: string, table: ReadonlyMap<number, number>): void {
  writeFileDurably(path, formatDelayOffsets(table), { backup: true })
}
