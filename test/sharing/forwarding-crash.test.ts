// Shared writes across real processes (test/fixtures/forwarding-child.mjs, which runs the compiled
// package: `npm run build:ts` first). Eight node:cluster workers produce through connect() with
// SYNC_FLUSH into a store their primary owns; the primary is SIGKILLed, and every PUT_OK a worker
// got is in the store when it is reopened. A writer killed and restarted under a running producer
// leaves its socket behind; the new writer replaces it and the producer carries on through it.
import { type ChildProcess, spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { distEntry, tempDir } from '../helpers/tmp.js'
import { waitFor } from '../helpers/wait.js'

const CHILD = fileURLToPath(new URL('../fixtures/forwarding-child.mjs', import.meta.url))
/** How long a wait on the children may take: processes started and killed on a loaded machine. */
const CRASH_WAIT_MS = 90_000

interface Ack {
  key: string
  queueId: number
  wroteOffset: number
  queueOffset: number
  msgId: string
}

beforeAll(() => {
  if (!fs.existsSync(fileURLToPath(distEntry))) throw new Error('the children run the compiled package: run `npm run build:ts` first')
})

/** A child running the fixture, with its stdout lines as they come and its exit. */
class Child {
  readonly process: ChildProcess
  readonly lines: string[] = []
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  private stderr = ''

  constructor(args: string[]) {
    this.process = spawn(process.execPath, [CHILD, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let partial = ''
    this.process.stdout?.on('data', (chunk: Buffer) => {
      const text = partial + chunk.toString()
      const parts = text.split('\n')
      partial = parts.pop() ?? ''
      this.lines.push(...parts)
    })
    this.process.stderr?.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString()
    })
    this.exited = new Promise((resolve) => this.process.once('exit', (code, signal) => resolve({ code, signal })))
  }

  /** The first stdout line (JSON) that `accept` takes. */
  async line(accept: (value: Record<string, unknown>) => boolean, what: string, timeoutMs = 90_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      for (const line of this.lines) {
        const value = JSON.parse(line) as Record<string, unknown>
        if (accept(value)) return value
      }
      if (this.process.exitCode !== null || this.process.signalCode !== null)
        throw new Error(`the child exited before ${what}: ${this.stderr}`)
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${this.stderr}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
}

/** Every whole ack line of a file (a process killed while writing may leave half a last line). */
function readAcks(file: string): Ack[] {
  if (!fs.existsSync(file)) return []
  const acks: Ack[] = []
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    try {
      acks.push(JSON.parse(line) as Ack)
    } catch {
      // the cut last line, or the empty one after the final newline
    }
  }
  return acks
}

/** Every acknowledged message is in the reopened store, by commit-log offset and by queue offset. */
function checkAcks(store: MessageStore, acks: Ack[]): void {
  const missing: string[] = []
  for (const ack of acks) {
    const byOffset = store.lookMessageByOffset(ack.wroteOffset)
    if (byOffset === null || Buffer.from(byOffset.body).toString() !== ack.key || byOffset.msgId !== ack.msgId) {
      missing.push(`${ack.key} at commit-log offset ${ack.wroteOffset}`)
      continue
    }
    const inQueue = store.getMessage('check', 'fwd', ack.queueId, ack.queueOffset, 1)
    if (inQueue.status !== 'FOUND' || Buffer.from(inQueue.messages[0].body).toString() !== ack.key) {
      missing.push(`${ack.key} at queue ${ack.queueId} offset ${ack.queueOffset} (${inQueue.status})`)
    }
  }
  expect(missing).toEqual([])
  expect(new Set(acks.map((ack) => ack.wroteOffset)).size).toBe(acks.length)
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {
    // exited already
  }
}

describe('producers in other processes, writer killed', () => {
  it('8 cluster workers produce with SYNC_FLUSH; after SIGKILL of their primary every PUT_OK is in the store', async () => {
    const base = tempDir('mqstore-fwd-crash-')
    const dir = join(base, 'store')
    const ackDir = join(base, 'acks')
    fs.mkdirSync(ackDir)
    const primary = new Child(['cluster', dir, ackDir, '8'])
    let workers: number[] = []
    try {
      const ready = await primary.line((value) => value.ready === true, 'every worker to have 20 acknowledgements')
      workers = ready.workers as number[]
      expect(workers).toHaveLength(8)
      primary.process.kill('SIGKILL')
      expect(await primary.exited).toEqual({ code: null, signal: 'SIGKILL' })
    } finally {
      primary.process.kill('SIGKILL')
      // The workers exit when their primary's channel closes; make sure before reading their acks.
      for (const pid of workers) killQuietly(pid)
    }
    await waitFor(() => workers.every((pid) => !isAlive(pid)), 'the workers to exit', CRASH_WAIT_MS)
    // The killed writer's socket is still there.
    expect(fs.statSync(join(dir, 'writer.sock')).isSocket()).toBe(true)
    const acks = fs.readdirSync(ackDir).flatMap((file) => readAcks(join(ackDir, file)))
    expect(acks.length).toBeGreaterThanOrEqual(8 * 20)
    const store = await MessageStore.open(dir)
    try {
      expect(store.stats().lastExitOK).toBe(false)
      checkAcks(store, acks)
    } finally {
      await store.close()
    }
  }, 240_000)

  it('a writer killed and restarted: its socket is replaced, the producer reconnects, and no PUT_OK is lost', async () => {
    const base = tempDir('mqstore-fwd-crash-')
    const dir = join(base, 'store')
    const ackFile = join(base, 'acks.jsonl')
    const first = new Child(['writer', dir])
    const children: Child[] = [first]
    try {
      await first.line((value) => value.ready === true, 'the first writer')
      const producer = new Child(['producer', dir, ackFile, 'p'])
      children.push(producer)
      await waitFor(() => readAcks(ackFile).length >= 30, '30 acknowledgements from the first writer', CRASH_WAIT_MS)
      first.process.kill('SIGKILL')
      await first.exited
      const beforeRestart = readAcks(ackFile).length
      expect(fs.statSync(join(dir, 'writer.sock')).isSocket()).toBe(true)

      const second = new Child(['writer', dir])
      children.push(second)
      await second.line((value) => value.ready === true, 'the second writer')
      await waitFor(() => readAcks(ackFile).length >= beforeRestart + 30, '30 acknowledgements from the second writer', CRASH_WAIT_MS)
      producer.process.kill('SIGTERM')
      const summary = await producer.line((value) => 'acked' in value, 'the producer summary')
      expect(await producer.exited).toEqual({ code: 0, signal: null })
      expect(summary.reconnects).toBeGreaterThanOrEqual(1)
      second.process.kill('SIGTERM')
      expect(await second.exited).toEqual({ code: 0, signal: null })
      expect(fs.existsSync(join(dir, 'writer.sock'))).toBe(false)
    } finally {
      for (const child of children) child.process.kill('SIGKILL')
    }
    const acks = readAcks(ackFile)
    const store = await MessageStore.open(dir)
    try {
      expect(store.stats().lastExitOK).toBe(true)
      checkAcks(store, acks)
    } finally {
      await store.close()
    }
  }, 240_000)
})

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
