// The API as a Node developer meets it: durable offsets, errors that explain, keys and lookups.
import * as fs from 'node:fs'
import { hostname } from 'node:os'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { distEntry, runNodeScript, tempDir } from './helpers/tmp.js'

const SMALL: OpenOptions = {
  mappedFileSizeCommitLog: 256 * 1024,
  mappedFileSizeConsumeQueue: 20 * 1000,
  maxHashSlotNum: 64,
  maxIndexNum: 256,
}

let dir: string
const open: MessageStore[] = []
beforeEach(() => {
  dir = tempDir('mqstore-api-')
})
afterEach(async () => {
  for (const store of open.splice(0)) await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function openStore(options: OpenOptions = SMALL): Promise<MessageStore> {
  const store = await MessageStore.open(dir, options)
  open.push(store)
  return store
}

describe('durable offset commits', () => {
  it('after a SIGKILL, durable commits are there and in-memory ones are not (child process)', () => {
    const result = runNodeScript(
      `
      import { MessageStore } from ${JSON.stringify(distEntry)}
      const store = await MessageStore.open(process.argv[2], { flushConsumerOffsetInterval: 3600000 })
      await store.putMessages(Array.from({ length: 500 }, (_, i) => ({ topic: 'orders', body: 'm' + i })))
      await store.commitOffset('sure', 'orders', 0, 500, { durable: true })
      const sub = store.consume({ group: 'reader', topic: 'orders', queueId: 0, from: 'earliest' })
      let seen = 0
      for await (const m of sub) if (++seen === 120) break
      await sub.commit()
      // Made after the last durable save: only the periodic save (never, here) would keep it.
      store.commitOffset('lazy', 'orders', 0, 500)
      process.kill(process.pid, 'SIGKILL')
      `,
      [dir],
    )
    expect(result.signal).toBe('SIGKILL')
    return (async () => {
      const store = await openStore({})
      expect(store.queryOffset('lazy', 'orders', 0)).toBe(-1)
      expect(store.queryOffset('sure', 'orders', 0)).toBe(500)
      expect(store.queryOffset('reader', 'orders', 0)).toBe(120)
    })()
  })

  it('durable commits made together share one write and each resolves once it is saved', async () => {
    const store = await openStore()
    await store.putMessage({ topic: 't', body: 'x' })
    const commits = Array.from({ length: 8 }, (_, q) => store.commitOffset('g', 't', q, q + 1, { durable: true }))
    await Promise.all(commits)
    const saved = JSON.parse(fs.readFileSync(`${dir}/config/consumerOffset.json`, 'utf8'))
    expect(saved.offsetTable['t@g']).toEqual({ 0: 1, 1: 2, 2: 3, 3: 4, 4: 5, 5: 6, 6: 7, 7: 8 })
    // Without options a commit is synchronous and returns nothing; durable: false resolves at once.
    expect(store.commitOffset('g', 't', 0, 9)).toBeUndefined()
    await expect(store.commitOffset('g', 't', 0, 10, { durable: false })).resolves.toBeUndefined()
    expect(() => store.commitOffset('g', 't', 0, 1, { durable: 'yes' as unknown as boolean })).toThrow(TypeError)
  })
})

describe('errors that explain', () => {
  it('a refused put says why in its reason, and the logger hears it at debug level', async () => {
    const debug: string[] = []
    const store = await openStore({ ...SMALL, maxMessageSize: 1024, logger: (level, message) => level === 'debug' && debug.push(message) })
    const tooBig = await store.putMessage({ topic: 't', body: Buffer.alloc(2000) })
    expect(tooBig.status).toBe('MESSAGE_ILLEGAL')
    expect(tooBig.reason).toContain('2000')
    expect(tooBig.reason).toContain('1024')
    const badTopic = await store.putMessage({ topic: 'a/b', body: 'x' })
    expect(badTopic.status).toBe('MESSAGE_ILLEGAL')
    expect(badTopic.reason).toMatch(/topic/)
    const badProperty = await store.putMessage({ topic: 't', body: 'x', properties: { region: 'eu\u0001west' } })
    expect(badProperty.status).toBe('MESSAGE_ILLEGAL')
    expect(badProperty.reason).toMatch(/region/)
    expect(JSON.parse(JSON.stringify(tooBig)).reason).toBe(tooBig.reason)
    const ok = await store.putMessage({ topic: 't', body: 'x' })
    expect(ok.status).toBe('PUT_OK')
    expect(ok.reason).toBeUndefined()
    expect(debug).toHaveLength(3)
    expect(debug[0]).toContain(tooBig.reason)
    expect(debug[1]).toContain(badTopic.reason)
  })

  it('a put to a closed store is SERVICE_NOT_AVAILABLE and says the store is closed', async () => {
    const store = await MessageStore.open(dir, SMALL)
    await store.close()
    const result = await store.putMessage({ topic: 't', body: 'x' })
    expect(result.status).toBe('SERVICE_NOT_AVAILABLE')
    expect(result.reason).toBe('the store is closed')
  })

  it('opening a store twice in one process says it is already open here, not locked by another process', async () => {
    const store = await openStore()
    const error = await MessageStore.open(dir, SMALL).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'LOCKED' })
    expect((error as Error).message).toContain('already open in this process')
    await store.close()
    open.length = 0
    const again = await openStore()
    expect((await again.putMessage({ topic: 't', body: 'x' })).status).toBe('PUT_OK')
  })

  it('the lock file names its holder, and another process is told which pid on which host holds the store', async () => {
    await openStore()
    const holder = JSON.parse(fs.readFileSync(`${dir}/lock`, 'utf8'))
    expect(holder).toEqual({ pid: process.pid, host: hostname() })
    const result = runNodeScript(
      `
      import { MessageStore } from ${JSON.stringify(distEntry)}
      try { await MessageStore.open(process.argv[2]); console.log('opened') }
      catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }
      `,
      [dir],
    )
    const outcome = JSON.parse(result.stdout)
    expect(outcome.code).toBe('LOCKED')
    expect(outcome.message).toContain(`pid ${process.pid} on host ${hostname()}`)
  })

  it('the lock file is rewritten when it names someone else, and left as it is when it already names this process', async () => {
    fs.writeFileSync(`${dir}/lock`, 'lock')
    const first = await openStore()
    expect(JSON.parse(fs.readFileSync(`${dir}/lock`, 'utf8'))).toEqual({ pid: process.pid, host: hostname() })
    await first.close()
    open.length = 0
    // An old time stamp: any write would replace it.
    fs.utimesSync(`${dir}/lock`, new Date(2000, 0, 1), new Date(2000, 0, 1))
    const marked = fs.statSync(`${dir}/lock`, { bigint: true }).mtimeNs
    await openStore()
    // Unchanged: the file was not written again.
    expect(fs.statSync(`${dir}/lock`, { bigint: true }).mtimeNs).toBe(marked)
    expect(JSON.parse(fs.readFileSync(`${dir}/lock`, 'utf8'))).toEqual({ pid: process.pid, host: hostname() })
  })

  it('an unknown option suggests the nearest known name', async () => {
    const typo = await MessageStore.open(dir, { flushDiskTyp: 'SYNC_FLUSH' } as OpenOptions).catch((e: unknown) => e)
    expect(typo).toMatchObject({ code: 'INVALID_OPTION' })
    expect((typo as Error).message).toContain(`did you mean 'flushDiskType'?`)
    const suffix = await MessageStore.open(dir, { maxMessageSizeBytes: 10 } as OpenOptions).catch((e: unknown) => e)
    expect((suffix as Error).message).toContain(`did you mean 'maxMessageSize'?`)
    const nothingNear = await MessageStore.open(dir, { colour: 'blue' } as OpenOptions).catch((e: unknown) => e)
    expect((nothingNear as Error).message).toBe(`unknown option 'colour'`)
  })

  it('refuses commit-log files of 2 GiB or more, whose positions would not fit a 32-bit int', async () => {
    const tooBig = await MessageStore.open(dir, { mappedFileSizeCommitLog: 2 ** 31 }).catch((e: unknown) => e)
    expect(tooBig).toMatchObject({ code: 'INVALID_OPTION' })
    expect((tooBig as Error).message).toContain('mappedFileSizeCommitLog must be at most 2147483647 bytes')
    expect(fs.existsSync(`${dir}/commitlog`)).toBe(false)
  })

  it('misuse is checked the same way everywhere: a negative offset or a bad queue is a RangeError or TypeError', async () => {
    const store = await openStore()
    await store.putMessage({ topic: 't', body: 'x' })
    expect(() => store.lookMessageByOffset(-5)).toThrow(RangeError)
    expect(() => store.lookMessageByOffset(1.5)).toThrow(RangeError)
    expect(() => store.getMessage('g', 't', 0, -1, 1)).toThrow(RangeError)
    expect(() => store.getMaxOffsetInQueue('t', -1)).toThrow(RangeError)
    expect(() => store.getMinOffsetInQueue('a/b', 0)).toThrow(TypeError)
    expect(() => store.getOffsetInQueueByTime('t', 0, -1)).toThrow(RangeError)
    expect(() => store.getCommitLogOffsetInQueue('t', 0, -1)).toThrow(RangeError)
    expect(() => store.queryMessage('t', 'k', 0)).toThrow(RangeError)
    expect(() => store.queryMessage('t', 'k', 1, 10, 5)).toThrow(RangeError)
    expect(() => store.queryMessage('t', '', 1)).toThrow(TypeError)
    expect(store.lookMessageByOffset(0)?.body.toString()).toBe('x')
    expect(store.lookMessageByOffset(1)).toBeNull()
  })
})

describe('keys and lookups', () => {
  it('a key holding a space (the KEYS separator) is refused with the reason; a keys string stays RocketMQ-raw', async () => {
    const store = await openStore()
    const refused = await store.putMessage({ topic: 't', body: 'x', keys: ['order 42'] })
    expect(refused.status).toBe('MESSAGE_ILLEGAL')
    expect(refused.reason).toContain(`"order 42"`)
    expect(refused.reason).toContain('separator')
    expect(store.queryMessage('t', 'order', 32).messages).toEqual([])
    expect((await store.putMessage({ topic: 't', body: 'y', keys: 'a b' })).status).toBe('PUT_OK')
    expect(store.queryMessage('t', 'b', 32).messages.map((m) => m.body.toString())).toEqual(['y'])
  })

  it('queryMessage without begin and end finds what was stored until now, oldest first; getLatestByKey gives the newest', async () => {
    const store = await openStore()
    for (let version = 1; version <= 5; version++) {
      await store.putMessage({ topic: 'orders', body: `v${version}`, keys: ['order-42'] })
      await store.putMessage({ topic: 'orders', body: `other${version}`, keys: ['order-7'] })
    }
    await store.putMessage({ topic: 'returns', body: 'elsewhere', keys: ['order-42'] })
    const found = store.queryMessage('orders', 'order-42', 32)
    expect(found.messages.map((m) => m.body.toString())).toEqual(['v1', 'v2', 'v3', 'v4', 'v5'])
    expect(store.getLatestByKey('orders', 'order-42')?.body.toString()).toBe('v5')
    expect(store.getLatestByKey('returns', 'order-42')?.body.toString()).toBe('elsewhere')
    expect(store.getLatestByKey('orders', 'order-1')).toBeNull()
    // A range that ends before the messages finds none of them.
    expect(store.queryMessage('orders', 'order-42', 32, 0, found.messages[0].storeTimestamp - 5000).messages).toEqual([])
  })

  it('getLatestByKey skips newer messages whose key only shares the hash ("Aa" and "BB" hash alike)', async () => {
    const store = await openStore()
    await store.putMessage({ topic: 't', body: 'aa-old', keys: ['Aa'] })
    await store.putMessage({ topic: 't', body: 'aa-new', keys: ['Aa'] })
    for (let i = 0; i < 70; i++) await store.putMessage({ topic: 't', body: `bb${i}`, keys: ['BB'] })
    expect(store.getLatestByKey('t', 'Aa')?.body.toString()).toBe('aa-new')
    expect(store.getLatestByKey('t', 'BB')?.body.toString()).toBe('bb69')
  })
})
