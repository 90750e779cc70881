// The writer's wake-up for readers in other processes: the `arrivals` file it touches after
// dispatch passes that wrote units (lib/store/sharing/arrivals-file.ts), the reader's watch on it,
// and the reader's slow fallback look when the file is missing or cannot be watched. The child runs
// the compiled package (`npm run build:ts`).
import { fork, type ChildProcess } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'

import { verifyStore } from '../../lib/cli/verify/index.js'
import { MessageStore, type MessageStoreReader, type OpenOptions } from '../../lib/store/message-store.js'
import { ArrivalsFile } from '../../lib/store/sharing/arrivals-file.js'
import { distEntry, tempDir } from '../helpers/tmp.js'
import { waitFor } from '../helpers/wait.js'

const CHILD = fileURLToPath(new URL('../fixtures/arrivals-reader.mjs', import.meta.url))
/** A fallback look this slow never comes within a test: whatever the reader sees, a wake-up told it. */
const NEVER_MS = 600_000

const opened: { close(): Promise<void>; isClosed: boolean }[] = []
const children: ChildProcess[] = []
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  for (const store of opened.splice(0).reverse()) if (!store.isClosed) await store.close()
})

beforeAll(() => {
  if (!fs.existsSync(fileURLToPath(distEntry))) throw new Error('the child runs the compiled package: run `npm run build:ts` first')
})

const small: OpenOptions = { mappedFileSizeCommitLog: 64 * 1024, mappedFileSizeConsumeQueue: 20 * 64, maxHashSlotNum: 16, maxIndexNum: 64 }

async function writer(dir: string, over: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, { ...small, ...over })
  opened.push(store)
  return store
}

async function reader(dir: string, followIntervalMs: number): Promise<MessageStoreReader> {
  const store = await MessageStore.open(dir, { readOnly: true, followIntervalMs })
  opened.push(store)
  return store
}

/** The bodies a consumer of `topic` queue 0 receives, from the queue's end at the call. */
function follow(store: MessageStoreReader, topic: string, signal: AbortSignal): string[] {
  const got: string[] = []
  void (async () => {
    for await (const m of store.consume({ group: 'g', topic, queueId: 0, from: 'latest', signal })) got.push(m.body.toString())
  })()
  return got
}

/** Waits until the reader's consumer waits and the look that follows a new wait has been taken. */
async function waiting(store: MessageStoreReader): Promise<void> {
  await waitFor(() => store.stats().waitingQueues > 0, 'the consumer to wait')
  const ticks = store.stats().followTicks
  await waitFor(() => store.stats().followTicks > ticks, 'the look after the wait')
}

describe('the writer touches the arrivals file', () => {
  it('once per dispatch pass that wrote units, not per message; the file stays one byte, in place, with its inode across reopens', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    const path = join(dir, 'arrivals')
    const inode = fs.statSync(path).ino
    // The queues exist first: a new queue's first file makes dispatch wait (a pass of its own).
    for (let q = 0; q < 4; q++) expect((await w.putMessage({ topic: 't', queueId: q, body: Buffer.from('first') })).status).toBe('PUT_OK')
    await waitFor(() => w.stats().arrivalSignals >= 1, 'a touch')
    await new Promise((resolve) => setTimeout(resolve, 20))
    const before = w.stats().arrivalSignals
    const batch = Array.from({ length: 200 }, (_, n) => ({ topic: 't', queueId: n % 4, body: Buffer.from(`m${n}`) }))
    for (const r of await w.putMessages(batch)) expect(r.status).toBe('PUT_OK')
    await waitFor(() => w.stats().arrivalSignals > before, 'the batch touch')
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(w.stats().arrivalSignals).toBe(before + 1)

    // Puts one after the other: at most one touch each (fewer when they come within a millisecond).
    const start = w.stats().arrivalSignals
    for (let n = 0; n < 50; n++) expect((await w.putMessage({ topic: 't', queueId: 0, body: Buffer.from(`s${n}`) })).status).toBe('PUT_OK')
    await waitFor(() => w.stats().arrivalSignals > start, 'a touch after the puts')
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(w.stats().arrivalSignals - start).toBeLessThanOrEqual(50)
    expect(fs.statSync(path).size).toBe(1)

    await w.close()
    expect(fs.statSync(path).ino).toBe(inode)
    const again = await writer(dir)
    expect((await again.putMessage({ topic: 't', queueId: 0, body: Buffer.from('again') })).status).toBe('PUT_OK')
    await waitFor(() => again.stats().arrivalSignals > 0, 'a touch after the reopen')
    expect(fs.statSync(path).ino).toBe(inode)
    expect(fs.statSync(path).size).toBe(1)
  })

  it('coalesces touches within the gap into one trailing touch, which close still makes', async () => {
    const path = join(tempDir(), 'arrivals')
    const logs: string[] = []
    const file = new ArrivalsFile(path, (message) => logs.push(message))
    file.arrived()
    file.arrived()
    await waitFor(() => file.touches === 1, 'the first touch')
    // Within the gap of the first touch (or just after it): one more touch either way, never two.
    file.arrived()
    file.arrived()
    await Promise.resolve()
    file.close()
    expect(file.touches).toBe(2)
    file.arrived()
    await Promise.resolve()
    expect(file.touches).toBe(2)
    expect(fs.readFileSync(path).length).toBe(1)
    expect(logs).toEqual([])
  })

  it('a file that cannot be written (a folder in its place) is logged; puts go on and readers follow by their slow look', async () => {
    const dir = tempDir()
    fs.mkdirSync(join(dir, 'arrivals'), { recursive: true })
    const logs: string[] = []
    const w = await writer(dir, { logger: (level, message) => logs.push(`${level} ${message}`) })
    expect(logs.some((line) => line.startsWith('warn') && line.includes('arrivals'))).toBe(true)
    const r = await reader(dir, 20)
    const stop = new AbortController()
    const got = follow(r, 'f', stop.signal)
    await waiting(r)
    for (let n = 0; n < 3; n++) expect((await w.putMessage({ topic: 'f', queueId: 0, body: Buffer.from(`f${n}`) })).status).toBe('PUT_OK')
    await waitFor(() => got.length === 3, 'the messages')
    expect(got).toEqual(['f0', 'f1', 'f2'])
    expect(w.stats().arrivalSignals).toBe(0)
    stop.abort()
  })
})

describe('a reader waits on the arrivals file', () => {
  it('in another process, with its slow look ten minutes apart, sees each put: the touch woke it', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    const child = fork(CHILD, [distEntry, dir, String(NEVER_MS)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    children.push(child)
    const messages: Record<string, any>[] = []
    child.on('message', (m: Record<string, any>) => messages.push(m))
    await waitFor(() => messages.some((m) => m.ready === true), 'the child reader to wait')
    expect(messages[0].stats.arrivalsWatched).toBe(true)
    for (let n = 0; n < 5; n++) {
      expect((await w.putMessage({ topic: 'wake', queueId: 0, body: Buffer.from(`w${n}`) })).status).toBe('PUT_OK')
      await waitFor(() => messages.some((m) => m.got === `w${n}`), `message w${n} in the child`)
    }
    const last = messages[messages.length - 1]
    expect(last.stats.followSignals).toBeGreaterThan(0)
    child.send('stop')
    await new Promise((resolve) => child.once('exit', resolve))
  })

  it('in this process too, and again after the writer restarts (the same file, the same watch)', async () => {
    const dir = tempDir()
    let w = await writer(dir)
    const r = await reader(dir, NEVER_MS)
    const stop = new AbortController()
    const got = follow(r, 'wake', stop.signal)
    await waiting(r)
    expect((await w.putMessage({ topic: 'wake', queueId: 0, body: Buffer.from('a') })).status).toBe('PUT_OK')
    await waitFor(() => got.length === 1, 'the first message')
    await w.close()
    w = await writer(dir)
    // The consumer waits since the first message: nothing but the touch of this put can wake it.
    expect(r.stats().waitingQueues).toBe(1)
    expect((await w.putMessage({ topic: 'wake', queueId: 0, body: Buffer.from('b') })).status).toBe('PUT_OK')
    await waitFor(() => got.length === 2, 'the message after the restart')
    expect(got).toEqual(['a', 'b'])
    expect(r.stats().arrivalsWatched).toBe(true)
    expect(r.stats().followSignals).toBeGreaterThan(0)
    stop.abort()
  })

  it('started before the writer ever ran: follows by its slow look, and watches the file once the writer made it', async () => {
    const dir = join(tempDir(), 'later')
    const r = await reader(dir, 20)
    const stop = new AbortController()
    const got = follow(r, 'wake', stop.signal)
    await waiting(r)
    expect(r.stats().arrivalsWatched).toBe(false)
    const w = await writer(dir)
    expect((await w.putMessage({ topic: 'wake', queueId: 0, body: Buffer.from('x') })).status).toBe('PUT_OK')
    await waitFor(() => got.length === 1, 'the message')
    await waitFor(() => r.stats().arrivalsWatched, 'the watch on the new file')
    expect(got).toEqual(['x'])
    stop.abort()
  })

  it('the file removed under the writer (as with a writer that does not touch it): the slow look still follows', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    fs.rmSync(join(dir, 'arrivals'))
    const r = await reader(dir, 20)
    const stop = new AbortController()
    const got = follow(r, 'wake', stop.signal)
    await waiting(r)
    for (let n = 0; n < 3; n++)
      expect((await w.putMessage({ topic: 'wake', queueId: 0, body: Buffer.from(`r${n}`) })).status).toBe('PUT_OK')
    await waitFor(() => got.length === 3, 'the messages')
    expect(got).toEqual(['r0', 'r1', 'r2'])
    expect(r.stats().arrivalsWatched).toBe(false)
    expect(r.stats().followSignals).toBe(0)
    stop.abort()
  })

  it('a watched file removed and made again: the reader drops its watch, follows, and watches the new file', async () => {
    const dir = tempDir()
    let w = await writer(dir)
    const r = await reader(dir, 20)
    const stop = new AbortController()
    const got = follow(r, 'wake', stop.signal)
    await waiting(r)
    expect(r.stats().arrivalsWatched).toBe(true)
    await w.close()
    fs.rmSync(join(dir, 'arrivals'))
    await waitFor(() => !r.stats().arrivalsWatched, 'the watch dropped')
    w = await writer(dir)
    expect((await w.putMessage({ topic: 'wake', queueId: 0, body: Buffer.from('n') })).status).toBe('PUT_OK')
    await waitFor(() => got.length === 1, 'the message')
    await waitFor(() => r.stats().arrivalsWatched, 'the watch on the new file')
    stop.abort()
  })
})

describe('verify', () => {
  it('accepts the arrivals file, whatever byte it holds', async () => {
    const dir = tempDir()
    const w = await writer(dir)
    expect((await w.putMessage({ topic: 'v', queueId: 0, body: Buffer.from('v') })).status).toBe('PUT_OK')
    await w.close()
    expect(fs.existsSync(join(dir, 'arrivals'))).toBe(true)
    fs.writeFileSync(join(dir, 'arrivals'), Buffer.from([0xff]))
    const report = await verifyStore(dir)
    expect(report.problemCount).toBe(0)
    expect(report.ok).toBe(true)
  })
})
