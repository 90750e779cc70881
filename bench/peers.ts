// The peers: lmdb (lmdb-js) and SQLite (better-sqlite3), each storing the same messages in the
// way that engine is normally used for this job. Both are loaded lazily, so a run limited to
// mqstore does not need them.
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

import type { Database, RootDatabase } from 'lmdb'

import {
  BODY_SIZE,
  check,
  diskUsage,
  keyOf,
  log,
  LOOKUP_WARMUP,
  makeBodies,
  makeBody,
  makeTempDir,
  now,
  PUT_BATCH,
  PUT_WARMUP,
  PUT_WARMUP_STORES,
  queueOf,
  queueOffsetOf,
  removeDir,
  runProducers,
  SYNC_WARMUP,
  sampleIndexes,
  SCAN_QUEUE,
  SCAN_RUNS,
  SCAN_TOPIC,
  scannedQueueSize,
  secondsSince,
  timeScan,
  summarizeNs,
  SYNC_PRODUCERS,
  timeLookups,
  lookupResult,
  TOPICS,
  QUEUES,
  topicOf,
  addFaultsSince,
  jsThreadFaults,
  threadClock,
  threadTimesSince,
  type BenchConfig,
  type EngineResult,
} from './workload.js'

const require = createRequire(import.meta.url)

/** The version in the package.json above the file `require.resolve(name)` finds. */
function installedVersion(name: string): string {
  let dir = dirname(require.resolve(name))
  for (;;) {
    const file = join(dir, 'package.json')
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string; version?: string }
      if (pkg.name === name) return pkg.version ?? '?'
    }
    const parent = dirname(dir)
    if (parent === dir) return '?'
    dir = parent
  }
}

// ---- lmdb ----------------------------------------------------------------------------------------

/** Primary key: `topic/queue/offset`, the offset zero-padded so that keys sort in queue order. */
function primaryKey(i: number): string {
  return `${topicOf(i)}/${queueOf(i)}/${String(queueOffsetOf(i)).padStart(10, '0')}`
}

/** Whether a lookup's body is the one of message picks[j] (its first four bytes hold its number). */
function bodyIsRight(picks: Uint32Array): (body: Buffer | undefined, j: number) => boolean {
  return (body, j) => body !== undefined && body.readUInt32BE(0) === picks[j]
}

/** Put batches allowed in flight before the producer waits for the oldest one to commit. */
const LMDB_PUT_WINDOW = 4

interface LmdbHandles {
  root: RootDatabase
  /** primary key → body */
  messages: Database<Buffer, string>
  /** message key → primary key */
  keys: Database<string, string>
}

/** Puts messages 0 .. count - 1 as the put phase times it: a transaction per batch, a few in flight. */
async function lmdbPutAll(db: LmdbHandles, count: number): Promise<void> {
  const inFlight: Promise<boolean>[] = []
  for (let first = 0; first < count; first += PUT_BATCH) {
    const n = Math.min(PUT_BATCH, count - first)
    const bodies = makeBodies(first, n)
    let last: Promise<boolean> | null = null
    for (let j = 0; j < n; j++) {
      const i = first + j
      const pk = primaryKey(i)
      db.messages.put(pk, bodies[j])
      last = db.keys.put(keyOf(i), pk)
    }
    inFlight.push(last as Promise<boolean>)
    if (inFlight.length >= LMDB_PUT_WINDOW) check(await (inFlight.shift() as Promise<boolean>), 'lmdb put failed')
  }
  for (const p of inFlight) check(await p, 'lmdb put failed')
}

export async function runLmdb(config: BenchConfig): Promise<EngineResult> {
  const lmdb = await import('lmdb')
  const result: EngineResult = { engine: 'lmdb', version: installedVersion('lmdb') }
  const phases = config.phases

  // Default root options: lmdb-js's durable mode (overlappingSync on Linux: the commit returns once
  // the transaction is visible and the fsync of it follows off the write lock).
  const openAll = (path: string, rootOptions: Parameters<typeof lmdb.open>[0] = {}): LmdbHandles => {
    const root = lmdb.open({ ...(rootOptions as object), path })
    return {
      root,
      messages: root.openDB<Buffer, string>({ name: 'messages', encoding: 'binary' }),
      keys: root.openDB<string, string>({ name: 'keys', encoding: 'string' }),
    }
  }

  if (phases.has('put') || phases.has('scan') || phases.has('lookup') || phases.has('reopen')) {
    const dir = makeTempDir('lmdb')
    try {
      // The untimed warm-up of the put path (PUT_WARMUP), in scratch environments.
      for (let k = 0; k < PUT_WARMUP_STORES; k++) {
        const warmDir = makeTempDir('lmdb-warmup')
        try {
          const warm = openAll(warmDir)
          await lmdbPutAll(warm, Math.min(PUT_WARMUP, config.count))
          await warm.root.close()
        } finally {
          removeDir(warmDir)
        }
      }
      let db = openAll(dir)
      try {
        // (1) put: every batch's puts fall in one event turn, hence one transaction.
        log(`lmdb: put ${config.count} messages (default durability, batches of ${PUT_BATCH}, ${LMDB_PUT_WINDOW} in flight)`)
        const started = now()
        const putFaults = jsThreadFaults()
        const putClock = threadClock()
        await lmdbPutAll(db, config.count)
        const putSeconds = secondsSince(started)
        const putThreads = threadTimesSince(putClock)
        result.put = {
          count: config.count,
          seconds: putSeconds,
          rate: config.count / putSeconds,
          diskBytes: diskUsage(dir),
          bodyBytes: config.count * BODY_SIZE,
          rssBytes: process.memoryUsage().rss,
          jsThreadFaults: addFaultsSince(0, putFaults),
          threads: putThreads,
        }

        // (2) ordered scan of one queue: a key range.
        if (phases.has('scan')) {
          const expected = scannedQueueSize(config.count)
          const prefix = `${SCAN_TOPIC}/${SCAN_QUEUE}/`
          log(`lmdb: scan ${prefix} (${expected} messages) x${SCAN_RUNS}, twice`)
          result.scan = await timeScan(expected, () => {
            let seen = 0
            let bytes = 0
            for (const { value } of db.messages.getRange({ start: prefix, end: `${prefix}~` })) {
              if (value.readUInt32BE(0) !== seen * TOPICS * QUEUES) throw new Error(`lmdb scan out of order at ${seen}`)
              bytes += value.length
              seen++
            }
            check(seen === expected && bytes === expected * BODY_SIZE, `lmdb scan saw ${seen} messages`)
          })
        }

        // (3) random lookups: key → primary key → body.
        if (phases.has('lookup')) {
          const n = config.lookups
          log(`lmdb: ${n} random lookups by key`)
          for (const i of sampleIndexes(Math.min(LOOKUP_WARMUP, n), config.count, config.seed + 1)) {
            const pk = db.keys.get(keyOf(i))
            if (pk !== undefined) db.messages.get(pk)
          }
          const picks = sampleIndexes(n, config.count, config.seed)
          const keys = Array.from(picks, keyOf)
          const lookup = (j: number) => {
            const pk = db.keys.get(keys[j])
            return pk === undefined ? undefined : db.messages.get(pk)
          }
          const lookupFaults = jsThreadFaults()
          const t0 = now()
          const { latency, found } = timeLookups(n, lookup, bodyIsRight(picks))
          const seconds = secondsSince(t0)
          check(found === n, `lmdb lookups found ${found} of ${n}`)
          const faults = addFaultsSince(0, lookupFaults)
          const repeat = timeLookups(n, lookup, bodyIsRight(picks))
          result.lookup = lookupResult(n, found, seconds, latency, repeat.latency, faults)
        }

        // (4) reopen
        if (phases.has('reopen')) {
          log('lmdb: close + open')
          const t0 = now()
          await db.root.close()
          const t1 = now()
          db = openAll(dir)
          const t2 = now()
          const probe = config.count - 1
          check(db.keys.get(keyOf(probe)) === primaryKey(probe), 'lmdb lost data across reopen')
          await db.root.close()
          const t3 = now()
          db = openAll(dir)
          const secondOpenMs = Number(now() - t3) / 1e6
          check(db.keys.get(keyOf(probe)) === primaryKey(probe), 'lmdb lost data across the second reopen')
          const closeMs = Number(t1 - t0) / 1e6
          const openMs = Number(t2 - t1) / 1e6
          result.reopen = { closeMs, openMs, totalMs: closeMs + openMs, secondOpenMs }
        }
      } finally {
        await db.root.close()
      }
    } finally {
      removeDir(dir)
    }
  }

  // (5) durable put, 64 producers. The put promise of default lmdb-js resolves at commit, before
  // the fsync (overlappingSync); `separateFlushed` adds a per-write `flushed` promise for the
  // fsync of that write's transaction without changing what is written or when.
  if (phases.has('sync')) {
    const n = config.syncCount
    const runSync = async (awaitFlush: boolean) => {
      const dir = makeTempDir('lmdb-sync')
      try {
        const db = openAll(dir, awaitFlush ? { separateFlushed: true } : {})
        try {
          return await runProducers(
            n,
            SYNC_PRODUCERS,
            async (i) => {
              const pk = primaryKey(i)
              db.messages.put(pk, makeBody(i))
              const put = db.keys.put(keyOf(i), pk) as Promise<boolean> & { flushed?: Promise<unknown> }
              check(await put, 'lmdb put failed')
              if (awaitFlush) {
                check(put.flushed !== undefined, 'lmdb put has no flushed promise')
                await put.flushed
              }
            },
            SYNC_WARMUP,
          )
        } finally {
          await db.root.close()
        }
      } finally {
        removeDir(dir)
      }
    }
    log(`lmdb: durable put of ${n} messages by ${SYNC_PRODUCERS} producers (awaiting put and its flush)`)
    const durable = await runSync(true)
    log(`lmdb: put of ${n} messages by ${SYNC_PRODUCERS} producers (awaiting the put promise only)`)
    const committed = await runSync(false)
    result.sync = {
      count: n,
      producers: SYNC_PRODUCERS,
      seconds: durable.seconds,
      rate: n / durable.seconds,
      latencyUs: summarizeNs(durable.latencyNs),
      threads: durable.threads,
      mode: `default open + separateFlushed; ${SYNC_PRODUCERS} concurrent producers await put() and then put().flushed (fsync done)`,
      alternative: {
        mode: `default open; ${SYNC_PRODUCERS} concurrent producers await put() only (committed and visible, fsync may still be running)`,
        seconds: committed.seconds,
        rate: n / committed.seconds,
        latencyUs: summarizeNs(committed.latencyNs),
      },
    }
  }
  return result
}

// ---- SQLite ------------------------------------------------------------------------------------

// better-sqlite3 ships no type declarations; these are the few members used here.
interface SqliteStatement {
  run(...params: unknown[]): unknown
  get(...params: unknown[]): unknown
  iterate(...params: unknown[]): IterableIterator<unknown>
  raw(on?: boolean): SqliteStatement
  pluck(on?: boolean): SqliteStatement
}

interface SqliteDatabase {
  pragma(source: string, options?: { simple?: boolean }): unknown
  exec(sql: string): unknown
  prepare(sql: string): SqliteStatement
  transaction<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void
  close(): unknown
}

type SqliteConstructor = new (file: string) => SqliteDatabase

const SCHEMA = `
CREATE TABLE IF NOT EXISTS messages (
  topic   TEXT    NOT NULL,
  queue   INTEGER NOT NULL,
  qoffset INTEGER NOT NULL,
  msg_key TEXT    NOT NULL,
  body    BLOB    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_by_queue ON messages (topic, queue, qoffset);
CREATE INDEX IF NOT EXISTS messages_by_key ON messages (msg_key);
`

export async function runSqlite(config: BenchConfig): Promise<EngineResult> {
  const Sqlite = require('better-sqlite3') as SqliteConstructor
  const phases = config.phases
  const openDb = (file: string, synchronous: 'NORMAL' | 'FULL'): SqliteDatabase => {
    const db = new Sqlite(file)
    db.pragma('journal_mode = WAL')
    db.pragma(`synchronous = ${synchronous}`)
    db.exec(SCHEMA)
    return db
  }
  const probe = new Sqlite(':memory:')
  const sqliteVersion = probe.prepare('SELECT sqlite_version()').pluck().get() as string
  probe.close()
  const result: EngineResult = { engine: 'sqlite', version: `${installedVersion('better-sqlite3')} (SQLite ${sqliteVersion})` }
  const insertSql = 'INSERT INTO messages (topic, queue, qoffset, msg_key, body) VALUES (?, ?, ?, ?, ?)'

  if (phases.has('put') || phases.has('scan') || phases.has('lookup') || phases.has('reopen')) {
    const dir = makeTempDir('sqlite')
    const file = join(dir, 'bench.db')
    try {
      let db = openDb(file, 'NORMAL')
      try {
        // (1) put: one transaction per batch.
        log(`sqlite: put ${config.count} messages (WAL, synchronous=NORMAL, transactions of ${PUT_BATCH})`)
        // One transaction per batch; the untimed warm-up (PUT_WARMUP) goes into a scratch database.
        const insertAll = (target: SqliteDatabase, count: number) => {
          const insert = target.prepare(insertSql)
          const insertBatch = target.transaction((first: number, bodies: Buffer[]) => {
            for (let j = 0; j < bodies.length; j++) {
              const i = first + j
              insert.run(topicOf(i), queueOf(i), queueOffsetOf(i), keyOf(i), bodies[j])
            }
          })
          for (let first = 0; first < count; first += PUT_BATCH) insertBatch(first, makeBodies(first, Math.min(PUT_BATCH, count - first)))
        }
        for (let k = 0; k < PUT_WARMUP_STORES; k++) {
          const warmDir = makeTempDir('sqlite-warmup')
          try {
            const warm = openDb(join(warmDir, 'bench.db'), 'NORMAL')
            insertAll(warm, Math.min(PUT_WARMUP, config.count))
            warm.close()
          } finally {
            removeDir(warmDir)
          }
        }
        const started = now()
        const putFaults = jsThreadFaults()
        const putClock = threadClock()
        insertAll(db, config.count)
        const putSeconds = secondsSince(started)
        const putThreads = threadTimesSince(putClock)
        result.put = {
          count: config.count,
          seconds: putSeconds,
          rate: config.count / putSeconds,
          diskBytes: diskUsage(dir),
          bodyBytes: config.count * BODY_SIZE,
          rssBytes: process.memoryUsage().rss,
          jsThreadFaults: addFaultsSince(0, putFaults),
          threads: putThreads,
        }

        // (2) ordered scan of one queue: an index range, in qoffset order.
        if (phases.has('scan')) {
          const expected = scannedQueueSize(config.count)
          log(`sqlite: scan ${SCAN_TOPIC}/${SCAN_QUEUE} (${expected} messages) x${SCAN_RUNS}, twice`)
          const select = db.prepare('SELECT qoffset, body FROM messages WHERE topic = ? AND queue = ? ORDER BY qoffset').raw()
          result.scan = await timeScan(expected, () => {
            let seen = 0
            let bytes = 0
            for (const row of select.iterate(SCAN_TOPIC, SCAN_QUEUE)) {
              const [qoffset, body] = row as [number, Buffer]
              if (qoffset !== seen) throw new Error(`sqlite scan out of order at ${seen}`)
              bytes += body.length
              seen++
            }
            check(seen === expected && bytes === expected * BODY_SIZE, `sqlite scan saw ${seen} messages`)
          })
        }

        // (3) random lookups through the key index.
        if (phases.has('lookup')) {
          const n = config.lookups
          log(`sqlite: ${n} random lookups by key`)
          const select = db.prepare('SELECT body FROM messages WHERE msg_key = ?').pluck()
          for (const i of sampleIndexes(Math.min(LOOKUP_WARMUP, n), config.count, config.seed + 1)) select.get(keyOf(i))
          const picks = sampleIndexes(n, config.count, config.seed)
          const keys = Array.from(picks, keyOf)
          const lookup = (j: number) => select.get(keys[j]) as Buffer | undefined
          const lookupFaults = jsThreadFaults()
          const t0 = now()
          const { latency, found } = timeLookups(n, lookup, bodyIsRight(picks))
          const seconds = secondsSince(t0)
          check(found === n, `sqlite lookups found ${found} of ${n}`)
          const faults = addFaultsSince(0, lookupFaults)
          const repeat = timeLookups(n, lookup, bodyIsRight(picks))
          result.lookup = lookupResult(n, found, seconds, latency, repeat.latency, faults)
        }

        // (4) reopen
        if (phases.has('reopen')) {
          log('sqlite: close + open')
          const t0 = now()
          db.close()
          const t1 = now()
          db = openDb(file, 'NORMAL')
          const t2 = now()
          const rows = db.prepare('SELECT count(*) FROM messages WHERE topic = ? AND queue = ?').pluck().get(SCAN_TOPIC, SCAN_QUEUE)
          check(rows === scannedQueueSize(config.count), `sqlite holds ${String(rows)} rows of the queue after reopen`)
          db.close()
          const t3 = now()
          db = openDb(file, 'NORMAL')
          const secondOpenMs = Number(now() - t3) / 1e6
          const again = db.prepare('SELECT count(*) FROM messages WHERE topic = ? AND queue = ?').pluck().get(SCAN_TOPIC, SCAN_QUEUE)
          check(again === rows, `sqlite holds ${String(again)} rows of the queue after the second reopen`)
          const closeMs = Number(t1 - t0) / 1e6
          const openMs = Number(t2 - t1) / 1e6
          result.reopen = { closeMs, openMs, totalMs: closeMs + openMs, secondOpenMs }
        }
      } finally {
        db.close()
      }
    } finally {
      removeDir(dir)
    }
  }

  // (5) durable put: synchronous=FULL, one row per transaction. better-sqlite3 is synchronous and
  // one connection runs one transaction at a time, so the producers are effectively sequential.
  if (phases.has('sync')) {
    const dir = makeTempDir('sqlite-sync')
    try {
      const db = openDb(join(dir, 'bench.db'), 'FULL')
      try {
        const n = config.syncCount
        log(`sqlite: synchronous=FULL put of ${n} messages, one per transaction`)
        const insert = db.prepare(insertSql)
        const { seconds, latencyNs, threads } = await runProducers(
          n,
          1,
          async (i) => {
            insert.run(topicOf(i), queueOf(i), queueOffsetOf(i), keyOf(i), makeBody(i))
          },
          SYNC_WARMUP,
        )
        result.sync = {
          count: n,
          producers: 1,
          seconds,
          rate: n / seconds,
          latencyUs: summarizeNs(latencyNs),
          mode: 'WAL, synchronous=FULL, one autocommit INSERT per message, sequential (one connection serialises them anyway)',
          threads,
        }
      } finally {
        db.close()
      }
    } finally {
      removeDir(dir)
    }
  }
  return result
}
