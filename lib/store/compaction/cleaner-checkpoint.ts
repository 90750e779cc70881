// The cleaner checkpoint: per compacted queue, the first dirty offset of its next pass (Kafka's
// cleaner-offset-checkpoint format). Text, one item per line:
//   0                  format version (only 0 is read)
//   2                  number of entry lines
//   orders 0 1834211   "<topic> <queueId> <offset>", single spaces
// Written whole: <name>.tmp, fsync, rename over the file, directory fsync. A malformed file is
// reported and read as empty, which only means re-cleaning those queues from their start.
import * as fs from 'node:fs'
import { dirname } from 'node:path'

import { MQStoreError } from '../../errors.js'
import { readTextIfExists, syncDirectory } from '../mapped/directory.js'

export const CHECKPOINT_FILE_NAME = 'cleaner-offset-checkpoint'
const VERSION = 0

export function queueKey(topic: string, queueId: number): string {
  return `${topic} ${queueId}`
}

export function parseCheckpoint(text: string): Map<string, number> {
  const out = new Map<string, number>()
  const lines = text.split('\n')
  if (lines.at(-1) === '') lines.pop()
  if (lines.length === 0) return out
  if (lines[0].trim() !== String(VERSION)) throw new MQStoreError('CORRUPTION', `unknown checkpoint version ${JSON.stringify(lines[0])}`)
  if (lines.length === 1) return out
  const count = Number(lines[1].trim())
  if (!Number.isSafeInteger(count) || count < 0) throw new MQStoreError('CORRUPTION', `bad entry count ${JSON.stringify(lines[1])}`)
  const entries = lines.slice(2)
  if (entries.length !== count) {
    throw new MQStoreError('CORRUPTION', `checkpoint says ${count} entries and holds ${entries.length}`)
  }
  for (const line of entries) {
    const fields = line.trim().split(/\s+/)
    const queueId = Number(fields[1])
    const offset = Number(fields[2])
    if (fields.length !== 3 || !Number.isSafeInteger(queueId) || !Number.isSafeInteger(offset) || offset < 0) {
      throw new MQStoreError('CORRUPTION', `bad checkpoint line ${JSON.stringify(line)}`)
    }
    out.set(queueKey(fields[0], queueId), offset)
  }
  return out
}

export function formatCheckpoint(entries: Map<string, number>): string {
  const lines = [String(VERSION), String(entries.size)]
  for (const [key, offset] of [...entries].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) {
    lines.push(`${key} ${offset}`)
  }
  return `${lines.join('\n')}\n`
}

export class CleanerCheckpoint {
  readonly path: string
  private entries = new Map<string, number>()
  /** The error met reading the file at load, if it was malformed. */
  loadError: Error | null = null

  constructor(path: string) {
    this.path = path
  }

  load(): void {
    const text = readTextIfExists(this.path) ?? ''
    try {
      this.entries = parseCheckpoint(text)
    } catch (error) {
      this.loadError = error as Error
      this.entries = new Map()
    }
  }

  get(topic: string, queueId: number): number | undefined {
    return this.entries.get(queueKey(topic, queueId))
  }

  /** Sets (or with undefined, removes) a queue's entry and rewrites the file. */
  update(topic: string, queueId: number, offset: number | undefined): void {
    const key = queueKey(topic, queueId)
    if (offset === undefined) this.entries.delete(key)
    else this.entries.set(key, offset)
    this.write()
  }

  private write(): void {
    fs.mkdirSync(dirname(this.path), { recursive: true })
    const temp = `${this.path}.tmp`
    const fd = fs.openSync(temp, 'w')
    try {
      fs.writeSync(fd, formatCheckpoint(this.entries))
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    fs.renameSync(temp, this.path)
    syncDirectory(this.path)
  }
}
