// Shared writes in one process: a writer opened with { shareWrites: true } and producers made by
// MessageStore.connect() talk over the real socket. Puts resolve with the writer's own results,
// bad frames close their connection and change nothing, the socket is the owner's alone, and a
// producer outlives its writer's restart.
import * as fs from 'node:fs'
import * as net from 'node:net'
import { join } from 'node:path'
import { Registry } from 'prom-client'
import { afterEach, describe, expect, it } from 'vitest'

import { collectStoreMetrics } from '../../lib/metrics.js'

import { MQStoreError } from '../../lib/errors.js'
import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import {
  FrameReader,
  FrameType,
  HEADER_BYTES,
  LENGTH_BYTES,
  PROTOCOL_VERSION,
  encodeHello,
  encodePut,
  encodedMessageBytes,
} from '../../lib/store/sharing/frame.js'
import { ForwardingServer } from '../../lib/store/sharing/forwarding-server.js'
import type { Producer } from '../../lib/store/sharing/producer-client.js'
import { SUN_PATH_MAX_BYTES } from '../../lib/store/sharing/socket-path.js'
import type { Message } from '../../lib/store/types.js'
import { distEntry, tempDir } from '../helpers/tmp.js'
import { waitFor } from '../helpers/wait.js'

const open: (MessageStore | Producer)[] = []
afterEach(async () => {
  for (const thing of open.splice(0).reverse()) await thing.close()
})

async function writer(dir: string, options: OpenOptions = {}): Promise<{ store: MessageStore; logs: string[] }> {
  const logs: string[] = []
  const store = await MessageStore.open(dir, {
    shareWrites: true,
    logger: (level, message) => logs.push(`${level} ${message}`),
    ...options,
  })
  open.push(store)
  return { store, logs }
}

async function producer(dir: string): Promise<Producer> {
  const made = await MessageStore.connect(dir, { timeoutMs: 30_000 })
  open.push(made)
  return made
}

/** A raw connection to the writer's socket, resolving once its HELLO arrived. */
async function rawConnection(socketPath: string): Promise<{ socket: net.Socket; closed: Promise<void>; received: Buffer[] }> {
  const socket = net.createConnection({ path: socketPath })
  const received: Buffer[] = []
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  socket.on('error', () => {})
  await new Promise<void>((resolve) => socket.once('data', (chunk: Buffer) => resolve(void received.push(chunk))))
  socket.on('data', (chunk: Buffer) => received.push(chunk))
  return { socket, closed, received }
}

function putFrame(messages: Message[], requestId = 1): Buffer {
  const bytes = messages.reduce((sum, m) => sum + encodedMessageBytes(m), 0)
  return encodePut(requestId, messages, 0, messages.length, bytes)
}

describe('a producer in another process puts through the writer', () => {
  it('gets the writer results: offsets, msgIds, statuses of refused messages, the stored message itself', async () => {
    const dir = tempDir('mqstore-fwd-')
    const { store, logs } = await writer(dir)
    const p = await producer(dir)
    expect(p.connected).toBe(true)
    const one = await p.putMessage({
      topic: 'orders',
      queueId: 1,
      body: 'first',
      tags: 'created',
      keys: ['k1', 'k2'],
      properties: { region: 'eu' },
    })
    expect(one.status).toBe('PUT_OK')
    expect(one.msgId).toMatch(/^[0-9A-F]{32}$/)
    const batch = await p.putMessages([
      { topic: 'orders', queueId: 1, body: Buffer.from([1, 2, 3]) },
      { topic: 'bad topic', body: 'x' },
      { topic: 'orders', queueId: 1, body: 'y', bornHost: 'not a host' },
      { topic: 'orders', queueId: 1, body: 'z', keys: ['bad key'] },
      { topic: 'orders', body: 'routed' },
    ])
    expect(batch.map((r) => r.status)).toEqual(['PUT_OK', 'MESSAGE_ILLEGAL', 'MESSAGE_ILLEGAL', 'MESSAGE_ILLEGAL', 'PUT_OK'])
    expect(batch[1].reason).toMatch(/topic/)
    expect(batch[1].msgId).toBe('')
    expect(batch[1].wroteOffset).toBe(-1)
    expect(batch[0].queueOffset).toBe(1)
    const stored = store.lookMessageByOffset(one.wroteOffset)
    expect(stored?.msgId).toBe(one.msgId)
    expect(Buffer.from(stored?.body ?? []).toString()).toBe('first')
    expect(stored?.tags).toBe('created')
    expect(stored?.keys).toEqual(['k1', 'k2'])
    expect(stored?.properties.region).toBe('eu')
    expect(store.queryMessage('orders', 'k2', 10).messages).toHaveLength(1)
    expect(store.getMessage('g', 'orders', 1, 0, 10).messages.map((m) => Buffer.from(m.body).toString('hex'))).toEqual([
      Buffer.from('first').toString('hex'),
      '010203',
    ])
    const stats = store.stats().sharing
    expect(stats).toMatchObject({
      socketPath: join(dir, 'writer.sock'),
      connectedProducers: 1,
      forwardedPuts: 6,
      forwardedBatches: 2,
      badFrames: 0,
    })
    expect(logs.some((line) => line.startsWith('debug') && line.includes('bad topic'))).toBe(true)
    const registry = new Registry()
    const metrics = collectStoreMetrics(store, { register: registry })
    const text = await registry.metrics()
    metrics.remove()
    expect(text).toMatch(/^mqstore_connected_producers 1$/m)
    expect(text).toMatch(/^mqstore_forwarded_puts_total 6$/m)
  })

  it('waits for the flush under SYNC_FLUSH, as an in-process put does', async () => {
    const dir = tempDir('mqstore-fwd-')
    const { store } = await writer(dir, { flushDiskType: 'SYNC_FLUSH' })
    const p = await producer(dir)
    // More puts in flight than the writer reads from one connection at once (it pauses, then resumes).
    const results = await Promise.all(Array.from({ length: 300 }, (_, i) => p.putMessage({ topic: 't', body: `m${i}` })))
    expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
    const end = Math.max(...results.map((r) => r.wroteOffset + r.wroteBytes))
    expect(store.stats().commitLogFlushedOffset).toBeGreaterThanOrEqual(end)
  })

  it('sends a batch larger than a frame in several frames, and answers a message no frame can hold itself', async () => {
    const dir = tempDir('mqstore-fwd-')
    const { store } = await writer(dir, { maxMessageSize: 1024 })
    const p = await producer(dir)
    const messages = Array.from({ length: 100 }, (_, i) => ({ topic: 't', body: Buffer.alloc(900, i) }))
    const results = await p.putMessages([
      ...messages,
      { topic: 't', body: Buffer.alloc(64 * 1024) },
      { topic: 't', body: Buffer.alloc(2000) },
    ])
    expect(results.slice(0, 100).every((r) => r.status === 'PUT_OK')).toBe(true)
    expect(results.slice(0, 100).map((r) => r.queueOffset)).toEqual(Array.from({ length: 100 }, (_, i) => i))
    expect(results[100].status).toBe('MESSAGE_ILLEGAL')
    expect(results[100].reason).toMatch(/more than the writer takes in a frame/)
    // Small enough for a frame, too large for the store: the writer's own check.
    expect(results[101].status).toBe('MESSAGE_ILLEGAL')
    expect(store.stats().sharing?.forwardedBatches).toBeGreaterThan(1)
  })

  it('throws for misuse before sending anything', async () => {
    const dir = tempDir('mqstore-fwd-')
    const { store } = await writer(dir)
    const p = await producer(dir)
    await expect(p.putMessage({ topic: 't', body: 5 as unknown as string })).rejects.toThrow(TypeError)
    await expect(
      p.putMessages([
        { topic: 't', body: 'ok' },
        { topic: 't', body: 'b', flag: 'x' as unknown as number },
      ]),
    ).rejects.toThrow(TypeError)
    await expect(p.putMessages('x' as unknown as Message[])).rejects.toThrow(TypeError)
    expect(store.getMaxPhyOffset()).toBe(0)
    await p.close()
    await p.close()
    expect(p.isClosed).toBe(true)
    await expect(p.putMessage({ topic: 't', body: 'b' })).rejects.toMatchObject({ code: 'STORE_CLOSED' })
    await expect(MessageStore.connect('')).rejects.toThrow(TypeError)
    await expect(MessageStore.connect(dir, { timeoutMs: -1 })).rejects.toThrow(RangeError)
    await expect(MessageStore.connect(dir, null as unknown as object)).rejects.toThrow(TypeError)
    await expect(MessageStore.open(tempDir('mqstore-fwd-'), { shareWrites: 'yes' as unknown as boolean })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    })
  })

  it('close() waits for the answers to puts in flight; ready() tells whether a writer is there', async () => {
    const dir = tempDir('mqstore-fwd-')
    const { store } = await writer(dir, { flushDiskType: 'SYNC_FLUSH' })
    const p = await producer(dir)
    expect(await p.ready()).toBe(true)
    expect(() => p.ready(Number.NaN)).toThrow(RangeError)
    const inFlight = Array.from({ length: 10 }, (_, i) => p.putMessage({ topic: 't', body: `late ${i}` }))
    await p.close()
    expect((await Promise.all(inFlight)).map((r) => r.status)).toEqual(Array(10).fill('PUT_OK'))
    expect(await p.ready(10)).toBe(false)
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(10)
    await waitFor(() => store.stats().sharing?.connectedProducers === 0, 'the writer to see the producer leave')
    const other = await producer(dir)
    await store.close()
    await waitFor(() => !other.connected, 'the producer to notice')
    expect(await other.ready(50)).toBe(false)
  })

  it('works from a worker thread', async () => {
    const dir = tempDir('mqstore-fwd-')
    const { store } = await writer(dir)
    const { Worker } = await import('node:worker_threads')
    const source = `
      const { workerData, parentPort } = require('node:worker_threads')
      import(workerData.entry).then(async ({ MessageStore }) => {
        const producer = await MessageStore.connect(workerData.dir)
        const results = await producer.putMessages([{ topic: 'w', body: 'from a thread' }, { topic: 'w', body: 'and another' }])
        await producer.close()
        parentPort.postMessage(results.map((r) => r.status))
      })`
    const worker = new Worker(source, { eval: true, workerData: { dir, entry: distEntry } })
    const statuses = await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
    await worker.terminate()
    expect(statuses).toEqual(['PUT_OK', 'PUT_OK'])
    expect(store.getMessage('g', 'w', 0, 0, 10).messages).toHaveLength(2)
  })

  it('connect() rejects with IO_ERROR when no writer listens', async () => {
    const dir = tempDir('mqstore-fwd-')
    const error = await MessageStore.connect(dir, { timeoutMs: 300 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(MQStoreError)
    expect((error as MQStoreError).code).toBe('IO_ERROR')
    expect((error as Error).message).toMatch(/shareWrites/)
  })
})

describe('the socket', () => {
  it('is the owner alone (mode 0600), named writer.sock, and removed at close', async () => {
    const dir = tempDir('mqstore-fwd-')
    const { store } = await writer(dir)
    const stat = fs.statSync(join(dir, 'writer.sock'))
    expect(stat.isSocket()).toBe(true)
    expect(stat.mode & 0o777).toBe(0o600)
    // Nothing else was left from binding under a temporary name.
    expect(fs.readdirSync(dir).filter((name) => name.includes('sock'))).toEqual(['writer.sock'])
    await store.close()
    expect(fs.existsSync(join(dir, 'writer.sock'))).toBe(false)
    expect(store.stats().sharing?.connectedProducers).toBe(0)
  })

  it('left by a writer that died is replaced; a file of another kind there is an error', async () => {
    const dir = tempDir('mqstore-fwd-')
    const socketPath = join(dir, 'writer.sock')
    // A socket file nothing listens on, as SIGKILL leaves one: bound elsewhere, moved in place.
    const elsewhere = join(tempDir('mqstore-fwd-'), 's')
    const stray = net.createServer()
    await new Promise<void>((resolve) => stray.listen(elsewhere, resolve))
    fs.renameSync(elsewhere, socketPath)
    await new Promise<void>((resolve) => stray.close(() => resolve()))
    expect(fs.statSync(socketPath).isSocket()).toBe(true)
    const { store, logs } = await writer(dir)
    expect(logs.some((line) => line.startsWith('warn') && line.includes('removed the socket'))).toBe(true)
    const p = await producer(dir)
    expect((await p.putMessage({ topic: 't', body: 'after' })).status).toBe('PUT_OK')
    await p.close()
    await store.close()

    fs.writeFileSync(socketPath, 'not a socket')
    await expect(MessageStore.open(dir, { shareWrites: true })).rejects.toMatchObject({ code: 'IO_ERROR' })
    // The failed open released the store: it opens again.
    fs.rmSync(socketPath)
    await writer(dir)
  })

  it('too long for sun_path is a clear INVALID_OPTION error', async () => {
    const deep = join(tempDir('mqstore-fwd-'), 'd'.repeat(SUN_PATH_MAX_BYTES))
    await expect(MessageStore.open(deep, { shareWrites: true })).rejects.toThrow(/holds at most/)
    await expect(MessageStore.connect(deep)).rejects.toMatchObject({ code: 'INVALID_OPTION' })
    // Without shareWrites the same store opens.
    const store = await MessageStore.open(deep)
    await store.close()
  })
})

describe('bad frames close their connection and change nothing', () => {
  const frames: [string, (ok: Buffer) => Buffer][] = [
    ['garbage', () => Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')],
    [
      'an oversized length',
      () => {
        const b = Buffer.alloc(LENGTH_BYTES + HEADER_BYTES)
        b.writeUInt32BE(0x7fffffff)
        return b
      },
    ],
    [
      'a length shorter than the header',
      () => {
        const b = Buffer.alloc(LENGTH_BYTES)
        b.writeUInt32BE(3)
        return b
      },
    ],
    ['a truncated PUT, then end', (ok) => ok.subarray(0, ok.length - 3)],
    ['a PUT with bytes after its messages', (ok) => withLength(Buffer.concat([ok, Buffer.from([1, 2])]))],
    ['a foreign protocol version', (ok) => patched(ok, 4, PROTOCOL_VERSION + 1)],
    ['a HELLO from a producer', (ok) => patched(ok, 5, FrameType.HELLO)],
    ['a message count the frame cannot hold', (ok) => patchedU32(ok, LENGTH_BYTES + HEADER_BYTES, 1000)],
  ]

  for (const [name, make] of frames) {
    it(name, async () => {
      const dir = tempDir('mqstore-fwd-')
      const { store, logs } = await writer(dir, { maxMessageSize: 4096 })
      const before = store.getMaxPhyOffset()
      const { socket, closed } = await rawConnection(join(dir, 'writer.sock'))
      socket.end(make(putFrame([{ topic: 't', body: 'never stored' }])))
      await closed
      await waitFor(() => store.stats().sharing?.badFrames === 1, 'the writer to count the bad frame')
      expect(store.getMaxPhyOffset()).toBe(before)
      expect(store.stats().putMessageTimesTotal).toBe(0)
      expect(logs.filter((line) => line.startsWith('warn') && line.includes('closed a producer connection'))).toHaveLength(1)
      // The writer still serves well-behaved producers.
      const p = await producer(dir)
      expect((await p.putMessage({ topic: 't', body: 'fine' })).status).toBe('PUT_OK')
    })
  }

  it('a good frame before the bad one on the same connection is answered; the bad one is not put', async () => {
    const dir = tempDir('mqstore-fwd-')
    const { store } = await writer(dir)
    const { socket, closed, received } = await rawConnection(join(dir, 'writer.sock'))
    const reader = new FrameReader(1 << 20)
    const frames = reader.push(Buffer.concat(received.splice(0)))
    socket.write(putFrame([{ topic: 't', body: 'good' }], 5))
    await waitFor(
      () => received.length > 0 && frames.push(...reader.push(Buffer.concat(received.splice(0)))) > 1,
      'the answer to the good frame',
    )
    const [hello, answer] = frames
    expect(hello.type).toBe(FrameType.HELLO)
    expect(answer).toMatchObject({ type: FrameType.RESULTS, requestId: 5 })
    socket.write(Buffer.from([0, 0, 0, 9, 1, 2, 0, 0, 0, 6, 0, 0, 0]))
    await closed
    expect(store.getMessage('g', 't', 0, 0, 10).messages).toHaveLength(1)
  })
})

describe('the forwarding server alone', () => {
  it('closes a connection whose PUT the put path refuses by throwing, and answers nothing for it', async () => {
    const dir = tempDir('mqstore-fwd-')
    const logs: string[] = []
    let calls = 0
    const server = await ForwardingServer.listen({
      socketPath: join(dir, 'writer.sock'),
      maxFrameBytes: 1 << 20,
      storeHost: { address: '127.0.0.1', port: 10911 },
      put: (messages) => {
        calls++
        if (calls === 1) throw new TypeError(`refused ${messages.length}`)
        return Promise.reject(new RangeError('refused later'))
      },
      log: Object.assign((level: string, message: string) => void logs.push(`${level} ${message}`), { child: () => undefined as never }),
    })
    try {
      for (const reason of ['refused 1', 'refused later']) {
        const { socket, closed } = await rawConnection(join(dir, 'writer.sock'))
        socket.write(putFrame([{ topic: 't', body: 'b' }]))
        await closed
        expect(logs.some((line) => line.includes(reason))).toBe(true)
      }
      expect(server.stats()).toMatchObject({ forwardedBatches: 2, badFrames: 2, connectionsTotal: 2 })
    } finally {
      await server.close()
      await server.close()
    }
    expect(fs.existsSync(join(dir, 'writer.sock'))).toBe(false)
  })
})

describe('when the writer goes away', () => {
  it('puts resolve SERVICE_NOT_AVAILABLE at once, and the producer reconnects when a writer returns', async () => {
    const dir = tempDir('mqstore-fwd-')
    const first = await writer(dir)
    const p = await producer(dir)
    expect((await p.putMessage({ topic: 't', body: 'a' })).status).toBe('PUT_OK')
    await first.store.close()
    await waitFor(() => !p.connected, 'the producer to notice')
    const refused = await p.putMessages([
      { topic: 't', body: 'b' },
      { topic: 't', body: 'c' },
    ])
    expect(refused.map((r) => r.status)).toEqual(['SERVICE_NOT_AVAILABLE', 'SERVICE_NOT_AVAILABLE'])
    expect(refused[0].reason).toMatch(/not connected/)
    const second = await writer(dir)
    expect(await p.ready(30_000)).toBe(true)
    const after = await p.putMessage({ topic: 't', body: 'd' })
    expect(after).toMatchObject({ status: 'PUT_OK', queueOffset: 1 })
    expect(second.store.getMessage('g', 't', 0, 0, 10).messages.map((m) => Buffer.from(m.body).toString())).toEqual(['a', 'd'])
  })

  it('puts in flight when the connection drops resolve SERVICE_NOT_AVAILABLE, never PUT_OK', async () => {
    // A stand-in writer that says hello, takes a PUT and drops the connection without answering.
    const dir = tempDir('mqstore-fwd-')
    const socketPath = join(dir, 'writer.sock')
    const server = net.createServer((socket) => {
      socket.write(encodeHello({ maxFrameBytes: 1 << 20, storeHost: { address: '127.0.0.1', port: 10911 } }))
      socket.once('data', () => socket.destroy())
    })
    await new Promise<void>((resolve) => server.listen(socketPath, resolve))
    try {
      const p = await producer(dir)
      const results = await p.putMessages([{ topic: 't', body: 'lost?' }])
      expect(results[0].status).toBe('SERVICE_NOT_AVAILABLE')
      expect(results[0].reason).toMatch(/may or may not/)
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })

  it('a writer that answers nonsense loses the connection, and the producer reconnects', async () => {
    const dir = tempDir('mqstore-fwd-')
    const socketPath = join(dir, 'writer.sock')
    let connections = 0
    const server = net.createServer((socket) => {
      connections++
      socket.write(encodeHello({ maxFrameBytes: 1 << 20, storeHost: { address: '127.0.0.1', port: 10911 } }))
      // An answer to a request nobody made.
      socket.once('data', () => socket.write(Buffer.from([0, 0, 0, 10, PROTOCOL_VERSION, FrameType.RESULTS, 0, 0, 0, 99, 0, 0, 0, 0])))
      socket.on('error', () => {})
    })
    await new Promise<void>((resolve) => server.listen(socketPath, resolve))
    try {
      const p = await producer(dir)
      expect((await p.putMessage({ topic: 't', body: 'x' })).status).toBe('SERVICE_NOT_AVAILABLE')
      await waitFor(() => connections >= 2, 'a reconnection')
      expect(await p.ready(30_000)).toBe(true)
    } finally {
      await new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const thing of open.splice(0)) void thing.close()
      })
    }
  })
})

/** `frame` with its length field set to what follows it. */
function withLength(frame: Buffer): Buffer {
  const copy = Buffer.from(frame)
  copy.writeUInt32BE(copy.length - LENGTH_BYTES, 0)
  return copy
}

function patched(frame: Buffer, at: number, value: number): Buffer {
  const copy = Buffer.from(frame)
  copy[at] = value
  return copy
}

function patchedU32(frame: Buffer, at: number, value: number): Buffer {
  const copy = Buffer.from(frame)
  copy.writeUInt32BE(value, at)
  return copy
}
