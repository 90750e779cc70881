// Committed consumer offsets per group, topic and queue, persisted like RocketMQ's
// config/consumerOffset.json: {"offsetTable":{"<topic>@<group>":{<queueId>:<nextOffset>}}}.
//
// RocketMQ writes integer map keys unquoted (not strict JSON); we write them quoted and read both.
// A save is atomic: write <file>.tmp, copy <file> to <file>.bak, rename .tmp over <file>.
// A missing, empty or unparsable file falls back to the .bak copy.
import * as fs from 'node:fs'
import { dirname } from 'node:path'

import { syncDirectory } from './mapped/directory.js'

export class ConsumerOffsets {
  readonly path: string
  private readonly table = new Map<string, Map<number, number>>()
  private dirty = false

  constructor(path: string) {
    this.path = path
  }

  load(): void {
    const parsed = readJson(this.path) ?? readJson(`${this.path}.bak`)
    if (parsed === null) return
    const offsetTable = (parsed as { offsetTable?: Record<string, Record<string, unknown>> }).offsetTable ?? {}
    for (const [key, queues] of Object.entries(offsetTable)) {
      const map = new Map<number, number>()
      for (const [queueId, offset] of Object.entries(queues ?? {})) {
        const id = Number(queueId)
        const value = Number(offset)
        if (Number.isSafeInteger(id) && Number.isSafeInteger(value)) map.set(id, value)
      }
      this.table.set(key, map)
    }
  }

  commitOffset(group: string, topic: string, queueId: number, offset: number): void {
    const key = `${topic}@${group}`
    let queues = this.table.get(key)
    if (queues === undefined) {
      queues = new Map()
      this.table.set(key, queues)
    }
    queues.set(queueId, offset)
    this.dirty = true
  }

  /** The committed offset, or -1 when the group never committed one for the queue. */
  queryOffset(group: string, topic: string, queueId: number): number {
    return this.table.get(`${topic}@${group}`)?.get(queueId) ?? -1
  }

  /** Writes the table if it changed since the last save. */
  persist(force = false): void {
    if (!this.dirty && !force) return
    const offsetTable: Record<string, Record<string, number>> = {}
    for (const [key, queues] of this.table) {
      offsetTable[key] = Object.fromEntries([...queues].sort((a, b) => a[0] - b[0]))
    }
    const text = JSON.stringify({ offsetTable }, null, 2)
    fs.mkdirSync(dirname(this.path), { recursive: true })
    const temp = `${this.path}.tmp`
    const fd = fs.openSync(temp, 'w')
    try {
      fs.writeSync(fd, text)
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    if (fs.existsSync(this.path)) fs.copyFileSync(this.path, `${this.path}.bak`)
    fs.renameSync(temp, this.path)
    syncDirectory(this.path)
    this.dirty = false
  }
}

/** Parses JSON that may carry unquoted integer keys, as fastjson writes them; null on failure. */
export function parseLenientJson(text: string): unknown {
  return JSON.parse(quoteIntegerKeys(text))
}

/**
 * Quotes bare integer object keys (`{0:12}` → `{"0":12}`), leaving string contents alone, so a
 * name that happens to contain `,5:` is never rewritten.
 */
function quoteIntegerKeys(text: string): string {
  let out = ''
  let inString = false
  let expectKey = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      out += c
      if (c === '\\') {
        out += text[i + 1] ?? ''
        i++
      } else if (c === '"') {
        inString = false
      }
      continue
    }
    if (c === '"') {
      inString = true
      expectKey = false
      out += c
      continue
    }
    if (c === '{' || c === ',') {
      expectKey = true
      out += c
      continue
    }
    if (expectKey && (c === '-' || (c >= '0' && c <= '9'))) {
      let end = i + 1
      while (end < text.length && text[end] >= '0' && text[end] <= '9') end++
      let after = end
      while (after < text.length && /\s/.test(text[after])) after++
      if (text[after] === ':') {
        out += `"${text.slice(i, end)}"`
        i = end - 1
        expectKey = false
        continue
      }
    }
    if (!/\s/.test(c)) expectKey = false
    out += c
  }
  return out
}

function readJson(path: string): unknown {
  let text: string
  try {
    text = fs.readFileSync(path, 'utf8')
  } catch {
    return null
  }
  if (text.trim() === '') return null
  try {
    return parseLenientJson(text)
  } catch {
    return null
  }
}
