// Readers in other processes and worker threads following a writer in another process, with
// retention and compaction at work, the writer SIGKILLed and restarted, and the readers started
// before the writer ever ran. The children run the compiled package (`npm run build:ts`).
import { fork, type ChildProcess } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { distEntry, tempDir } from '../helpers/tmp.js'
import { snapshotStore } from './store-snapshot.js'

const WRITER = fileURLToPath(new URL('../fixtures/sharing-writer.mjs', import.meta.url))
const READER = fileURLToPath(new URL('../fixtures/sharing-reader.mjs', import.meta.url))
const QUEUES = 3

type Message = Record<string, any>

/** A child process or worker thread and the messages it sent. */
class Peer {
  readonly messages: Message[] = []
  last: Message = {}
  readonly exited: Promise<number | null>
  /** The exit code (or signal) once the peer ended. */
  exit: string | null = null
  private waiters: (() => void)[] = []

  constructor(readonly handle: ChildProcess | Worker) {
    handle.on('message', (message: Message) => {
      this.messages.push(message)
      this.last = message
      for (const wake of this.waiters.splice(0)) wake()
    })
    this.exited = new Promise((resolve) =>
      handle.once('exit', (code: number | null, signal?: string | null) => {
        this.exit = `code ${code}, signal ${signal ?? null}`
        for (const wake of this.waiters.splice(0)) wake()
        resolve(code)
      }),
    )
  }

  send(message: unknown): void {
    if (this.handle instanceof Worker) this.handle.postMessage(message)
    else this.handle.send(message as string)
  }

  /** The first message (from now on, or already received when `past`) that satisfies `test`. */
  async waitFor(test: (message: Message) => boolean, what: string, timeoutMs = 60_000): Promise<Message> {
    const deadline = Date.now() + timeoutMs
    for (let from = 0; ; ) {
      for (; from < this.messages.length; from++) if (test(this.messages[from])) return this.messages[from]
      if (this.exit !== null) throw new Error(`ended (${this.exit}) while waiting for ${what}; last message ${JSON.stringify(this.last)}`)
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last message ${JSON.stringify(this.last)}`)
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve)
        setTimeout(resolve, 1000)
      })
    }
  }
}

const peers: Peer[] = []
afterEach(async () => {
  for (const peer of peers.splice(0)) {
    if (peer.handle instanceof Worker) await peer.handle.terminate()
    else if (peer.handle.exitCode === null && peer.handle.signalCode === null) peer.handle.kill('SIGKILL')
  }
})

function forkPeer(script: string, dir: string): Peer {
  const peer = new Peer(fork(script, [distEntry, dir], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }))
  peers.push(peer)
  return peer
}

function workerPeer(dir: string): Peer {
  const peer = new Peer(new Worker(READER, { workerData: [distEntry, dir] }))
  peers.push(peer)
  return peer
}

const reached = (message: Message, ends: number[]) =>
  Array.isArray(message.seen) && message.seen.every((n: number, q: number) => n >= ends[q])

/** Tells every reader to read up to `ends` and returns what each saw. */
async function finish(readers: Peer[], ends: number[]): Promise<Message[]> {
  for (const reader of readers) reader.send({ stopAt: ends })
  return Promise.all(readers.map((reader) => reader.waitFor((m) => m.final === true, 'the final report')))
}

beforeAll(() => {
  if (!fs.existsSync(fileURLToPath(distEntry))) throw new Error('the children run the compiled package: run `npm run build:ts` first')
})

describe('readers in other processes follow a writer in another process', () => {
  it('started before the writer, through a SIGKILL and a restart, retention and compaction: every message in order exactly once per reader, and no file changed by readers', async () => {
    const dir = join(tempDir(), 'store')
    const readers = [forkPeer(READER, dir), forkPeer(READER, dir), forkPeer(READER, dir)]
    for (const reader of readers) await reader.waitFor((m) => m.ready === true, 'a reader ready')
    expect(fs.existsSync(dir)).toBe(false)

    let writer = forkPeer(WRITER, dir)
    const early = await writer.waitFor((m) => Array.isArray(m.next) && m.next[0] >= 150, 'the first writer past 150 messages a queue')
    for (const reader of readers) await reader.waitFor((m) => reached(m, [50, 50, 50]), 'a reader past 50 messages a queue')
    ;(writer.handle as ChildProcess).kill('SIGKILL')
    await writer.exited

    writer = forkPeer(WRITER, dir)
    await writer.waitFor((m) => Array.isArray(m.next) && m.next[0] >= early.next[0] + 300, 'the second writer past 300 more')
    // Retention deletes only what every reader has read: pause, let them catch up, then clean.
    writer.send('pause')
    const paused = await writer.waitFor((m) => m.paused === true, 'the writer paused')
    for (const reader of readers) await reader.waitFor((m) => reached(m, paused.next), 'a reader caught up with the paused writer')
    writer.send('clean')
    const cleaned = await writer.waitFor((m) => m.cleaned !== undefined, 'a retention and compaction pass')
    expect(cleaned.cleaned).toBeGreaterThan(0)
    // The retention pass deletes files the restarted writer had not flushed yet: the flush must
    // move on past them, or no later record is ever durable and compaction never finds one to clean.
    expect(cleaned.compactFailed).toBe(0)
    expect(cleaned.compactedQueues).toBe(1)
    await writer.waitFor((m) => Array.isArray(m.next) && m.next[0] >= paused.next[0] + 150, 'the writer past 150 more after the pass')
    writer.send('stop')
    const closed = await writer.waitFor((m) => m.closed === true, 'the writer closed')
    const ends: number[] = closed.next

    const reports = await finish(readers, ends)
    for (const report of reports) {
      expect(report.errors).toEqual([])
      expect(report.seen).toEqual(ends)
      expect(report.kvCount).toBeGreaterThan(0)
      expect(report.stats).toMatchObject({ readOnly: true, needsRecovery: false })
    }

    // The store as the writer left it; three readers (two processes and a worker thread) read all
    // of it from the new minimum, and change nothing.
    const before = snapshotStore(dir)
    const again = [forkPeer(READER, dir), forkPeer(READER, dir), workerPeer(dir)]
    const rereads = await finish(again, ends)
    for (const report of rereads) {
      expect(report.errors).toEqual([])
      expect(report.seen).toEqual(ends)
    }
    expect(snapshotStore(dir)).toEqual(before)
    const store = await MessageStore.open(dir)
    for (let q = 0; q < QUEUES; q++) expect(store.getMaxOffsetInQueue('flow', q)).toBe(ends[q])
    await store.close()
  }, 300_000)

  it('a reader in a worker thread follows a writer in this process', async () => {
    const dir = tempDir()
    const writer = await MessageStore.open(dir, { mappedFileSizeCommitLog: 64 * 1024 })
    try {
      const workers = [workerPeer(dir), workerPeer(dir)]
      for (const worker of workers) await worker.waitFor((m) => m.ready === true, 'a worker ready')
      const ends = [0, 0, 0]
      for (let round = 0; round < 100; round++) {
        const batch = []
        for (let q = 0; q < QUEUES; q++) batch.push({ topic: 'flow', queueId: q, body: Buffer.from(`${q}:${ends[q]++}`) })
        batch.push({ topic: 'kv', queueId: 0, body: Buffer.from(`kv:${round}`) })
        for (const r of await writer.putMessages(batch)) expect(r.status).toBe('PUT_OK')
        if (round % 10 === 0) await new Promise((resolve) => setTimeout(resolve, 2))
      }
      const reports = await finish(workers, ends)
      for (const report of reports) {
        expect(report.errors).toEqual([])
        expect(report.seen).toEqual(ends)
        expect(report.kvCount).toBe(100)
        if (process.platform === 'linux') expect(report.stats.writerRunning).toBe(true)
      }
    } finally {
      await writer.close()
    }
  })
})
