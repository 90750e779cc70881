// Shared by the replication tests: small-file store options, opening and closing, waiting for a
// condition, reading a commit log's bytes from its files and a queue's messages, and children
// that report in JSON lines.
import type { ChildProcess } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { type MessageExt, MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { waitFor } from '../helpers/wait.js'

export { waitFor }

export const FILE = 64 * 1024

export function haOptions(over: OpenOptions = {}): OpenOptions {
  return {
    mappedFileSizeCommitLog: FILE,
    mappedFileSizeConsumeQueue: 20 * 1024,
    maxHashSlotNum: 256,
    maxIndexNum: 4096,
    cleanResourceInterval: 3_600_000,
    ...over,
  }
}

export const opened: MessageStore[] = []

export async function openStore(dir: string, over: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, haOptions(over))
  opened.push(store)
  return store
}

export async function closeAll(): Promise<void> {
  for (const store of opened.splice(0).reverse()) if (!store.isClosed) await store.close()
}

/**
 * Waits until the master has taken a slave's first report and sends it from the start. A slave
 * whose first report comes after the master's first file filled starts at the master's last file
 * (as RocketMQ's does): a test that compares the logs from offset 0 lets the slave join first.
 */
export function joinedFromStart(master: MessageStore): Promise<void> {
  return waitFor(() => master.stats().ha.connections.some((c) => c.transferOffset === 0), 'the slave to join from the start')
}

/** The commit log's bytes from `from` to `to`, read from its files. */
export function commitLogBytes(dir: string, from: number, to: number, fileSize = FILE): Buffer {
  const parts: Buffer[] = []
  for (let at = from; at < to; ) {
    const start = at - (at % fileSize)
    const name = join(dir, 'commitlog', String(start).padStart(20, '0'))
    const fd = fs.openSync(name, 'r')
    const length = Math.min(to, start + fileSize) - at
    const buffer = Buffer.alloc(length)
    fs.readSync(fd, buffer, 0, length, at - start)
    fs.closeSync(fd)
    parts.push(buffer)
    at += length
  }
  return Buffer.concat(parts)
}

export function messages(count: number, prefix = 'm'): { topic: string; queueId: number; body: Buffer; keys: string; tags: string }[] {
  return Array.from({ length: count }, (_, i) => ({
    topic: ['orders', 'payments', 'audit'][i % 3],
    queueId: i % 4,
    body: Buffer.from(`${prefix}-${i}-${'x'.repeat(i % 200)}`),
    keys: `${prefix}-key-${i}`,
    tags: i % 2 === 0 ? 'even' : 'odd',
  }))
}

/** True once the slave holds the master's whole log and has dispatched it (new queues' files are made off the thread). */
export function caughtUp(slave: MessageStore, master: MessageStore | number): boolean {
  const end = typeof master === 'number' ? master : master.getMaxPhyOffset()
  return slave.getMaxPhyOffset() === end && slave.stats().dispatchBehindBytes === 0
}

/** Every message of a queue from its minimum on. */
export function readQueue(store: MessageStore, topic: string, queueId: number): MessageExt[] {
  const out: MessageExt[] = []
  let offset = store.getMinOffsetInQueue(topic, queueId)
  for (;;) {
    const r = store.getMessage('g', topic, queueId, offset, 32)
    if (r.status !== 'FOUND') break
    out.push(...r.messages)
    offset = r.nextBeginOffset
  }
  return out
}

export type Line = Record<string, any>

/** A child process that reports one JSON object per line on stdout (its stderr goes to ours). */
export class JsonLinesChild {
  readonly lines: Line[] = []
  exited = false

  constructor(readonly process: ChildProcess) {
    let pending = ''
    process.stdout?.on('data', (chunk: Buffer) => {
      pending += chunk.toString()
      const parts = pending.split('\n')
      pending = parts.pop() as string
      for (const part of parts) if (part !== '') this.lines.push(JSON.parse(part))
    })
    process.stderr?.on('data', (chunk: Buffer) => globalThis.process.stderr.write(chunk))
    process.once('exit', () => {
      this.exited = true
    })
  }

  last(): Line {
    return this.lines.at(-1) ?? {}
  }

  find(test: (line: Line) => boolean): Line | undefined {
    return this.lines.find(test)
  }

  async stop(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.exited) return
    const exit = new Promise((resolve) => this.process.once('exit', resolve))
    this.process.kill(signal)
    await exit
  }
}
