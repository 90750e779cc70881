// Committed consumer offsets per group, topic and queue, persisted like RocketMQ's
// config/consumerOffset.json: {"offsetTable":{"<topic>@<group>":{<queueId>:<nextOffset>}}}.
//
// RocketMQ writes integer map keys unquoted (not strict JSON); we write them quoted and read both.
// A save is atomic: write <file>.tmp, copy <file> to <file>.bak, rename .tmp over <file>.
// A missing, empty or unparsable file falls back to the .bak copy.
//
// Commits live in memory and reach the file every flushConsumerOffsetInterval ms (persist), or at
// once when a caller asks for a durable commit (persistDurable): the durable commits of one moment
// share one write, which runs on the libuv pool, and each resolves once a write that started after
// it is on disk.
import * as fs from 'node:fs'
import { dirname } from 'node:path'

import { ioError } from '../errors.js'
import { readFileWithBackup, writeFileDurably } from './mapped/directory.js'

export class ConsumerOffsets {
  readonly path: string
  private readonly table = new Map<string, Map<number, number>>()
  private dirty = false
  /** An asynchronous (durable) save in flight: the periodic save skips while it runs. */
  private writing: Promise<void> | null = null
  /** Durable commits waiting for the next save. */
  private waiting: { resolve: () => void; reject: (error: unknown) => void }[] = []

  constructor(path: string) {
    this.path = path
  }

  load(): void {
    this.mergeFrom(this.path)
  }

  /**
   * Adds what the file at `path` (or its .bak) holds for the queues this table has no offset for:
   * a read-only opener starts from the writer's file under the offsets it committed itself.
   */
  mergeFrom(path: string): void {
    const parsed = readFileWithBackup(path, parseLenientJson)
    if (parsed === null) return
    const offsetTable = (parsed as { offsetTable?: Record<string, Record<string, unknown>> }).offsetTable ?? {}
    for (const [key, queues] of Object.entries(offsetTable)) {
      const map = this.table.get(key) ?? new Map<number, number>()
      for (const [queueId, offset] of Object.entries(queues ?? {})) {
        const id = Number(queueId)
        const value = Number(offset)
        if (Number.isSafeInteger(id) && Number.isSafeInteger(value) && !map.has(id)) map.set(id, value)
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

  /** The file's text for the table as it is now. */
  private snapshot(): string {
    const offsetTable: Record<string, Record<string, number>> = {}
    for (const [key, queues] of this.table) {
      offsetTable[key] = Object.fromEntries([...queues].sort((a, b) => a[0] - b[0]))
    }
    return JSON.stringify({ offsetTable }, null, 2)
  }

  /**
   * Resolves once the table as it is now is on disk (file and directory synced); rejects with
   * the write's error, which `onError` also gets (so a caller that does not await never meets an
   * unhandled rejection). Commits made before the call are all covered.
   */
  persistDurable(onError: (error: Error) => void = () => {}): Promise<void> {
    const promise = new Promise<void>((resolve, reject) => this.waiting.push({ resolve, reject }))
    promise.catch((error: unknown) => onError(error instanceof Error ? error : new Error(String(error))))
    this.startDurableWrite()
    return promise
  }

  /** Starts one save for every waiting durable commit, unless a save is already running. */
  private startDurableWrite(): void {
    if (this.writing !== null || this.waiting.length === 0) return
    const batch = this.waiting
    this.waiting = []
    const text = this.snapshot()
    this.dirty = false
    this.writing = writeAtomically(this.path, text).then(
      () => {
        for (const waiter of batch) waiter.resolve()
      },
      (cause: unknown) => {
        this.dirty = true
        const error = ioError(`cannot save consumer offsets to ${this.path}`, cause)
        for (const waiter of batch) waiter.reject(error)
      },
    )
    void this.writing.finally(() => {
      this.writing = null
      this.startDurableWrite()
    })
  }

  /** Waits for durable saves in flight (close, before its last save). */
  async settle(): Promise<void> {
    while (this.writing !== null) await this.writing
  }

  /**
   * The save at close: offsets changed since the last save are written; a failure (a full disk)
   * goes to `onError` and close goes on: a lost commit means messages delivered again, never a
   * store left half shut.
   */
  saveAtClose(onError: (error: Error) => void): void {
    try {
      this.persist()
    } catch (error) {
      onError(error instanceof Error ? error : new Error(String(error)))
    }
  }

  /** Writes the table if it changed since the last save (skipped while a durable save runs). */
  persist(force = false): void {
    if (this.writing !== null || (!this.dirty && !force)) return
    const text = this.snapshot()
    writeFileDurably(this.path, text, { backup: true })
    this.dirty = false
  }
}

/** persist()'s steps on the libuv pool: temp file synced, old file kept as .bak, rename, directory synced. */
async function writeAtomically(path: string, text: string): Promise<void> {
  await fs.promises.mkdir(dirname(path), { recursive: true })
  const temp = `${path}.tmp`
  const handle = await fs.promises.open(temp, 'w')
  try {
    await handle.writeFile(text)
    await handle.sync()
  } finally {
    await handle.close()
  }
  try {
    await fs.promises.copyFile(path, `${path}.bak`)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  await fs.promises.rename(temp, path)
  // As syncDirectory: some file systems refuse fsync on directories; the rename is still atomic.
  const dir = await fs.promises.open(dirname(path), 'r').catch(() => null)
  try {
    await dir?.sync()
  } catch {
    // see above
  } finally {
    await dir?.close()
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
