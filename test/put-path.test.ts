// The put path's batch work: body CRCs computed on the written bytes (one native call per file a
// batch writes into), tags and keys written as bytes, one dispatch request reused per record.
import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { createRequire, syncBuiltinESMExports } from 'node:module'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { crc32 } from 'node:zlib'
import { describe, expect, it } from 'vitest'

import { MessageStore } from '../lib/index.js'
import { native } from '../lib/native.js'
import { COMMIT_LOG_WRITE_BACK_STEP } from '../lib/store/commitlog/commit-log.js'
import { SLOT_PAGES_BEFORE_WHOLE_TABLE } from '../lib/store/index/index-reservation.js'
import {
  MESSAGE_MAGIC_CODE,
  OFFSET_BODYCRC,
  OFFSET_MAGIC,
  OFFSET_TOTALSIZE,
  BLANK_MAGIC_CODE,
  decodeMessage,
} from '../lib/store/commitlog/record.js'
import { recordWriteBacks } from './helpers/map-handle.js'
import { countParsedRecords } from './helpers/parsed-records.js'
import { tempDir } from './helpers/tmp.js'

/** Every record of every commit-log file, in order, with its bytes. */
function records(dir: string): Buffer[] {
  const logDir = join(dir, 'commitlog')
  const out: Buffer[] = []
  for (const name of fs.readdirSync(logDir).sort()) {
    const data = fs.readFileSync(join(logDir, name))
    for (let pos = 0; pos + 8 <= data.length; ) {
      const size = data.readInt32BE(pos + OFFSET_TOTALSIZE)
      const magic = data.readInt32BE(pos + OFFSET_MAGIC)
      if (size <= 0 || magic === BLANK_MAGIC_CODE) break
      expect(magic).toBe(MESSAGE_MAGIC_CODE)
      out.push(data.subarray(pos, pos + size))
      pos += size
    }
  }
  return out
}

describe('batch put', () => {
  it('keeps nothing of a batch reachable once its put resolved, though it refills its records slice after slice', async () => {
    // The records of a put are reused by the next one: they must let go of the messages' bodies.
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const dir = tempDir()
    const store = await MessageStore.open(dir)
    try {
      const refs: WeakRef<Buffer>[] = []
      const putBatch = async (first: number) => {
        const batch = Array.from({ length: 100 }, (_, k) => {
          const body = Buffer.alloc(64 * 1024, first + k)
          refs.push(new WeakRef(body))
          return { topic: 'HeldTopic', body, keys: `k${first + k}` }
        })
        for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
      }
      await putBatch(0)
      await putBatch(100)
      for (let round = 0; round < 5 && refs.some((ref) => ref.deref() !== undefined); round++) {
        await new Promise((resolve) => setImmediate(resolve))
        gc()
      }
      expect(refs.filter((ref) => ref.deref() !== undefined).length).toBe(0)
      // And every message of both batches reads back as it was put (a read serves a few 64 KiB bodies).
      let offset = 0
      while (offset < 200) {
        const read = store.getMessage('g', 'HeldTopic', 0, offset, 32)
        expect(read.messages.length).toBeGreaterThan(0)
        for (const m of read.messages) {
          expect(m.body.length).toBe(64 * 1024)
          expect(m.body[0]).toBe(offset & 0xff)
          offset++
        }
      }
    } finally {
      await store.close()
    }
  })

  it('a batch whose late message is malformed stores none of it (records are built a slice at a time)', async () => {
    const dir = tempDir()
    const store = await MessageStore.open(dir)
    try {
      const good = (i: number) => ({ topic: 'ShapeTopic', body: `m${i}`, keys: `k${i}` })
      for (const bad of [
        { topic: 'ShapeTopic', body: 7 as unknown as string },
        { topic: 'ShapeTopic', body: 'x', keys: [1] as unknown as string[] },
        { topic: 'ShapeTopic', body: 'x', tags: 5 as unknown as string },
        { topic: 'ShapeTopic', body: 'x', queueId: -1 },
        null as unknown as { topic: string; body: string },
      ]) {
        const batch = [...Array.from({ length: 150 }, (_, i) => good(i)), bad, good(151)]
        await expect(store.putMessages(batch)).rejects.toThrow(bad === null || bad.queueId === -1 ? Error : TypeError)
        expect(store.getMaxPhyOffset()).toBe(0)
      }
      expect((await store.putMessages(Array.from({ length: 150 }, (_, i) => good(i)))).every((r) => r.status === 'PUT_OK')).toBe(true)
      expect(store.getMaxOffsetInQueue('ShapeTopic', 0)).toBe(150)
    } finally {
      await store.close()
    }
  })

  it('writes every body CRC of a batch that crosses into new files, and reads check them', async () => {
    const dir = tempDir()
    const store = await MessageStore.open(dir, { mappedFileSizeCommitLog: 8 * 1024, messageIndexEnable: true })
    const bodies = Array.from({ length: 300 }, (_, i) => Buffer.from(`body ${i} `.repeat((i % 13) + 1)))
    const results = await store.putMessages(
      bodies.map((body, i) => ({ topic: 'CrcTopic', queueId: i % 3, body, keys: `k${i}`, tags: i % 2 ? 'odd' : undefined })),
    )
    expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
    await store.close()
    const written = records(dir)
    expect(written.length).toBe(300)
    expect(fs.readdirSync(join(dir, 'commitlog')).length).toBeGreaterThan(5)
    for (let i = 0; i < written.length; i++) {
      const message = decodeMessage(written[i], 0, true)
      expect(message).not.toBeNull()
      expect(Buffer.from(message!.body).equals(bodies[i])).toBe(true)
      expect(written[i].readInt32BE(OFFSET_BODYCRC)).toBe((crc32(bodies[i]) & 0x7fffffff) | 0)
      expect(message!.bodyCRC).toBe((crc32(bodies[i]) & 0x7fffffff) | 0)
    }
    const reopened = await MessageStore.open(dir, { mappedFileSizeCommitLog: 8 * 1024, messageIndexEnable: true })
    try {
      let seen = 0
      for (let q = 0; q < 3; q++) {
        for (let offset = 0; ; ) {
          const got = reopened.getMessage('g', 'CrcTopic', q, offset, 200)
          if (got.status !== 'FOUND') break
          expect(got.bodyCrcFailures).toBe(0)
          seen += got.messages.length
          offset = got.nextBeginOffset
        }
      }
      expect(seen).toBe(300)
      expect(reopened.queryMessage('CrcTopic', 'k299', 4).messages.map((m) => m.body.toString())).toEqual([bodies[299].toString()])
    } finally {
      await reopened.close()
    }
  })

  it('writes tags and keys as RocketMQ properties bytes, and other text through the string path', async () => {
    const dir = tempDir()
    const store = await MessageStore.open(dir)
    const results = await store.putMessages([
      { topic: 'PropTopic', body: Buffer.from('a'), tags: 'TagA', keys: ['k1', 'k2'] },
      { topic: 'PropTopic', body: Buffer.from('b'), keys: 'only-keys' },
      { topic: 'PropTopic', body: Buffer.from('c'), tags: 'only-tags' },
      { topic: 'PropTopic', body: Buffer.from('d') },
      { topic: 'PropTopic', body: Buffer.from('e'), tags: 'ünïcode', keys: 'κλειδί' },
      { topic: 'PropTopic', body: Buffer.from('f'), tags: '', keys: '' },
      { topic: 'PropTopic', body: Buffer.from('g'), tags: 'bad\u0001tag' },
      // Longer than a JS loop is used for: Buffer's own writer.
      { topic: 'PropTopic', body: Buffer.from('h'), tags: 'T'.repeat(200), keys: 'K'.repeat(150) },
    ])
    expect(results.map((r) => r.status)).toEqual(['PUT_OK', 'PUT_OK', 'PUT_OK', 'PUT_OK', 'PUT_OK', 'PUT_OK', 'MESSAGE_ILLEGAL', 'PUT_OK'])
    await store.close()
    const props = records(dir).map((record) => decodeMessage(record, 0, true)!.properties)
    expect(props).toEqual([
      { TAGS: 'TagA', KEYS: 'k1 k2' },
      { KEYS: 'only-keys' },
      { TAGS: 'only-tags' },
      {},
      { TAGS: 'ünïcode', KEYS: 'κλειδί' },
      {},
      { TAGS: 'T'.repeat(200), KEYS: 'K'.repeat(150) },
    ])
    const raw = records(dir)[0]
    expect(raw.includes(Buffer.from('TAGS\u0001TagA\u0002KEYS\u0001k1 k2'))).toBe(true)
    const reopened = await MessageStore.open(dir)
    try {
      expect(reopened.queryMessage('PropTopic', 'κλειδί', 4).messages.map((m) => m.tags)).toEqual(['ünïcode'])
      expect(reopened.queryMessage('PropTopic', 'k2', 4).messages.map((m) => m.tags)).toEqual(['TagA'])
      const tagged = reopened.getMessage('g', 'PropTopic', 0, 0, 10, 'TagA')
      expect(tagged.messages.map((m) => m.body.toString())).toEqual(['a'])
    } finally {
      await reopened.close()
    }
  })
})

describe('index reservation on the put path', () => {
  function indexBlocks(dir: string): number {
    const [name] = fs.readdirSync(join(dir, 'index'))
    return fs.statSync(join(dir, 'index', name)).blocks * 512
  }

  it('a few keys reserve their slot pages one by one; past the limit the slot table is reserved whole', async () => {
    const dir = tempDir()
    const store = await MessageStore.open(dir)
    // Keys that differ in their first characters: sequential names hash to neighbouring slots.
    const key = (i: number) => `${createHash('sha1').update(String(i)).digest('hex').slice(0, 12)}-${i}`
    const put = (from: number, n: number) =>
      store.putMessages(Array.from({ length: n }, (_, i) => ({ topic: 'IdxTopic', body: 'x', keys: key(from + i) })))
    // Fewer keys than the limit: at most that many slot pages, the header page and the first entry chunks.
    const few = SLOT_PAGES_BEFORE_WHOLE_TABLE - 4
    expect((await put(0, few)).every((r) => r.status === 'PUT_OK')).toBe(true)
    const small = indexBlocks(dir)
    expect(small).toBeLessThan(1_000_000 * 4)
    expect((await put(few, 300 - few)).every((r) => r.status === 'PUT_OK')).toBe(true)
    const slotTable = 40 + 1_000_000 * 4
    expect(indexBlocks(dir)).toBeGreaterThanOrEqual(Math.floor(slotTable / 4096) * 4096)
    for (const i of [0, few - 1, few, 150, 299]) {
      expect(store.queryMessage('IdxTopic', key(i), 4).messages.length).toBe(1)
    }
    await store.close()
  })
})

/** writeBack and writeBackNow refuse a bad offset or length (RangeError) and a bad descriptor (TypeError). */
function expectRangeChecks(call: (fd: number, offset: number, length: number) => boolean, fd: number): void {
  expect(() => call(fd, -1, 10)).toThrow(RangeError)
  expect(() => call(fd, 0.5, 10)).toThrow(RangeError)
  expect(() => call(fd, 0, 0.5)).toThrow(RangeError)
  expect(() => call('x' as unknown as number, 0, 10)).toThrow(TypeError)
}

describe('write-back behind the writer', () => {
  it('writeBack starts write-back of a range, checks its arguments, and is a no-op elsewhere than Linux', () => {
    const dir = tempDir()
    const name = join(dir, 'file')
    fs.writeFileSync(name, Buffer.alloc(1 << 20, 7))
    const fd = fs.openSync(name, 'r+')
    try {
      expect(native.writeBack(fd, 0, 1 << 20)).toBe(process.platform === 'linux')
      expect(native.writeBack(fd, 4096, 0)).toBe(process.platform === 'linux')
      expectRangeChecks(native.writeBack, fd)
    } finally {
      fs.closeSync(fd)
    }
    if (process.platform === 'linux') expect(() => native.writeBack(fd, 0, 4096)).toThrow(/EBADF/)
  })

  it('writeBackNow starts write-back on the calling thread, checks its arguments, and is a no-op elsewhere than Linux', () => {
    const dir = tempDir()
    const name = join(dir, 'file')
    fs.writeFileSync(name, Buffer.alloc(64 * 1024, 7))
    const fd = fs.openSync(name, 'r+')
    try {
      fs.writeSync(fd, Buffer.alloc(8192, 9), 0, 8192, 4096)
      expect(native.writeBackNow(fd, 4096, 8192)).toBe(process.platform === 'linux')
      expect(native.writeBackNow(fd, 0, 0)).toBe(process.platform === 'linux')
      expectRangeChecks(native.writeBackNow, fd)
    } finally {
      fs.closeSync(fd)
    }
    // A closed descriptor: the hint says it did nothing, and nothing throws.
    expect(native.writeBackNow(fd, 0, 4096)).toBe(false)
  })

  it('a burst of ASYNC_FLUSH puts that never yields asks for write-back of what it left behind, and loses nothing', async () => {
    const calls: [number, number][] = []
    const dir = tempDir()
    // The commit log's first file (the queue's write-backs are recorded too).
    const logFile = join(dir, 'commitlog', '00000000000000000000')
    const restore = recordWriteBacks((fd, offset, length) => {
      if (fs.fstatSync(fd).ino === fs.statSync(logFile).ino) calls.push([offset, length])
    })
    try {
      const store = await MessageStore.open(dir, { flushDiskType: 'ASYNC_FLUSH' })
      const body = Buffer.alloc(1000, 3)
      for (let batch = 0; batch < 32; batch++) {
        const results = await store.putMessages(Array.from({ length: 1000 }, () => ({ topic: 'WbTopic', body })))
        expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
      }
      // About 35 MB written: a write-back request per step behind the writer, in order, aligned to
      // the step (a multiple of 2 MiB: whole 2 MiB mappings of large page-cache folios).
      const step = COMMIT_LOG_WRITE_BACK_STEP
      expect(step % (2 << 20)).toBe(0)
      expect(calls.length).toBeGreaterThanOrEqual(3)
      for (let k = 0; k < calls.length; k++) {
        expect(calls[k][0] % step).toBe(0)
        expect(calls[k][1] % step).toBe(0)
        expect(calls[k][1]).toBeGreaterThanOrEqual(step)
        if (k > 0) expect(calls[k][0]).toBe(calls[k - 1][0] + calls[k - 1][1])
      }
      await store.close()
      const reopened = await MessageStore.open(dir)
      expect(reopened.getMaxOffsetInQueue('WbTopic', 0)).toBe(32000)
      await reopened.close()
    } finally {
      restore()
    }
  })

  it('SYNC_FLUSH puts leave write-back to their own syncs', async () => {
    let calls = 0
    const restore = recordWriteBacks(() => calls++)
    try {
      const store = await MessageStore.open(tempDir(), { flushDiskType: 'SYNC_FLUSH' })
      const body = Buffer.alloc(1000, 3)
      for (let batch = 0; batch < 4; batch++) await store.putMessages(Array.from({ length: 1000 }, () => ({ topic: 'WbTopic', body })))
      await store.close()
      expect(calls).toBe(0)
    } finally {
      restore()
    }
  })

  it('a batch that crosses file ends dispatches every record itself, the one after each end-of-file blank too', async () => {
    const dir = tempDir()
    // Records of about 200 bytes in files of 16 KiB: a slice of 64 records meets at most one file end.
    const store = await MessageStore.open(dir, { mappedFileSizeCommitLog: 16 * 1024, messageIndexEnable: true })
    try {
      // The queue's first file is made on its first put (dispatch waits for it, then a pass reads the log).
      expect((await store.putMessage({ topic: 'RollTopic', queueId: 0, body: 'first' })).status).toBe('PUT_OK')
      const parsed = countParsedRecords(store)
      const body = (i: number) => Buffer.from(`roll body ${i} `.padEnd(150, '.'))
      const results = await store.putMessages(
        Array.from({ length: 400 }, (_, i) => ({ topic: 'RollTopic', queueId: 0, body: body(i), keys: `r${i}` })),
      )
      expect(results.map((r) => r.status)).toEqual(results.map(() => 'PUT_OK'))
      expect(fs.readdirSync(join(dir, 'commitlog')).length).toBeGreaterThan(4)
      expect(parsed()).toBe(0)
      // Units and index entries as the records say.
      const got: Buffer[] = []
      for (let offset = 1; offset < 401; ) {
        const read = store.getMessage('g', 'RollTopic', 0, offset, 32)
        expect(read.status).toBe('FOUND')
        for (const m of read.messages) got.push(m.body)
        offset = read.nextBeginOffset
      }
      expect(got.map((b) => b.toString())).toEqual(Array.from({ length: 400 }, (_, i) => body(i).toString()))
      for (const i of [0, 63, 64, 199, 399]) {
        expect(store.queryMessage('RollTopic', `r${i}`, 4).messages.map((m) => m.body.toString())).toEqual([body(i).toString()])
      }
    } finally {
      await store.close()
    }
  })

  it.skipIf(process.platform !== 'linux')(
    "a new store's first put syncs no folder of the store's root: open made them (skipped elsewhere than Linux: it reads /proc/self/fd)",
    async () => {
      const dir = tempDir()
      const store = await MessageStore.open(dir, { messageIndexEnable: true })
      try {
        for (const name of ['commitlog', 'consumequeue', 'index']) expect(fs.statSync(join(dir, name)).isDirectory()).toBe(true)
        const fsCjs = createRequire(import.meta.url)('node:fs') as typeof fs
        const fsync = fsCjs.fsyncSync
        const synced: string[] = []
        fsCjs.fsyncSync = (fd: number) => {
          synced.push(fs.readlinkSync(`/proc/self/fd/${fd}`))
          fsync(fd)
        }
        syncBuiltinESMExports()
        try {
          expect((await store.putMessage({ topic: 'FirstTopic', queueId: 0, body: 'first', keys: 'k1' })).status).toBe('PUT_OK')
        } finally {
          fsCjs.fsyncSync = fsync
          syncBuiltinESMExports()
        }
        expect(synced.length).toBeGreaterThan(0)
        expect(synced.filter((path) => path === fs.realpathSync(dir))).toEqual([])
        expect(store.queryMessage('FirstTopic', 'k1', 1).messages).toHaveLength(1)
      } finally {
        await store.close()
      }
    },
  )

  it("a file where the commit log's or the consume queues' folder belongs: open refuses with IO_ERROR naming it", async () => {
    for (const name of ['commitlog', 'consumequeue']) {
      const dir = tempDir()
      fs.writeFileSync(join(dir, name), 'not a folder')
      await expect(MessageStore.open(dir)).rejects.toMatchObject({ code: 'IO_ERROR', message: expect.stringContaining(join(dir, name)) })
      // The lock is let go: the folder put right, the store opens.
      fs.rmSync(join(dir, name))
      const store = await MessageStore.open(dir)
      expect((await store.putMessage({ topic: 'LayoutTopic', body: 'b' })).status).toBe('PUT_OK')
      await store.close()
    }
  })
})
