// The index's bulk path (IndexFile.putKeyHashes, IndexService.beginBulk/endBulk): open's recovery
// puts keys a batch at a time, and the files it writes must be the ones key-by-key puts write,
// byte for byte, whatever the keys (collisions, keyless records, records that make the file roll).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/index.js'
import { IndexFile, indexKeyHash } from '../../lib/store/index/index-file.js'
import { IndexService, type IndexDispatch } from '../../lib/store/index/index-service.js'
import { tempDir } from '../helpers/tmp.js'

const T0 = new Date(2024, 0, 15, 10, 0, 0, 0).getTime()

let root: string
const services: IndexService[] = []
const files: IndexFile[] = []

beforeEach(() => {
  root = tempDir()
})
afterEach(() => {
  for (const service of services.splice(0)) service.shutdown()
  for (const file of files.splice(0)) file.shutdown()
  fs.rmSync(root, { recursive: true, force: true })
})

function bytesOf(path: string): Buffer {
  return fs.readFileSync(path)
}

describe('IndexFile.putKeyHashes', () => {
  function create(name: string, slots: number, entries: number): IndexFile {
    const file = IndexFile.create(join(root, name), slots, entries)
    files.push(file)
    return file
  }

  it('writes the same bytes as putKeyHash, key by key, and stops where the file is full', () => {
    const slots = 64
    const entries = 1000
    const count = 1200
    const hashes = new Int32Array(count)
    const phyOffsets = new Float64Array(count)
    const timestamps = new Float64Array(count)
    for (let k = 0; k < count; k++) {
      // Few distinct hashes, so that chains grow long.
      hashes[k] = indexKeyHash(`key-${k % 150}`)
      // Several keys per record, as a record with KEYS and UNIQ_KEY has.
      phyOffsets[k] = Math.floor(k / 3) * 311 + 2 ** 33
      timestamps[k] = T0 + k * 1500
    }
    const single = create('20240115100000000', slots, entries)
    let put = 0
    while (put < count && single.putKeyHash(hashes[put], { commitLogOffset: phyOffsets[put], storeTimestamp: timestamps[put] })) put++
    expect(put).toBe(entries - 1)

    const bulk = create('20240115100000001', slots, entries)
    let at = 0
    // Runs of uneven lengths, the last one past what the file holds.
    for (const length of [1, 31, 32, 33, 200, 900]) {
      at = bulk.putKeyHashes(hashes, phyOffsets, timestamps, at, Math.min(count, at + length))
    }
    expect(at).toBe(entries - 1)
    expect(bulk.putKeyHashes(hashes, phyOffsets, timestamps, at, count)).toBe(at)

    single.flush()
    bulk.flush()
    expect(bulk.getIndexCount()).toBe(single.getIndexCount())
    expect(bulk.getHashSlotCount()).toBe(single.getHashSlotCount())
    expect(bulk.getEndPhyOffset()).toBe(single.getEndPhyOffset())
    expect(bulk.getEndTimestamp()).toBe(single.getEndTimestamp())
    expect(bytesOf(bulk.fileName).equals(bytesOf(single.fileName))).toBe(true)
  })

  it('puts nothing for an empty run', () => {
    const file = create('20240115100000000', 8, 16)
    expect(file.putKeyHashes(new Int32Array(4), new Float64Array(4), new Float64Array(4), 2, 2)).toBe(2)
    expect(file.getIndexCount()).toBe(1)
  })
})

describe('IndexService bulk pass', () => {
  function open(dir: string): IndexService {
    const service = new IndexService(dir, { maxHashSlotNum: 16, maxIndexNum: 40, messageIndexEnable: true })
    services.push(service)
    service.load(true, 0)
    return service
  }

  function records(): IndexDispatch[] {
    const out: IndexDispatch[] = []
    let offset = 0
    for (let i = 0; i < 400; i++) {
      // Keyless records, one key, several keys (a roll comes in the middle of a record's keys).
      const keys = i % 7 === 0 ? undefined : i % 5 === 0 ? `a${i} b${i % 13} c${i}` : `k${i % 90}`
      const uniqKey = i % 4 === 0 ? `U${i}` : undefined
      out.push({
        topic: i % 2 === 0 ? 'TopicA' : 'TopicB',
        commitLogOffset: offset,
        storeTimestamp: T0 + i * 700,
        keys,
        uniqKey,
        sysFlag: 0,
      })
      offset += 200 + (i % 9)
    }
    return out
  }

  it('leaves files equal to key-by-key dispatch, and queries see the held keys', () => {
    const plain = open(join(root, 'plain'))
    for (const request of records()) plain.buildIndex(request)
    plain.flush()

    const bulk = open(join(root, 'bulk'))
    bulk.beginBulk()
    const all = records()
    for (const request of all.slice(0, 250)) bulk.buildIndex(request)
    // A query in the middle of the pass puts the held keys first.
    expect(bulk.queryOffset('TopicB', 'k89', 64, 0, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual(
      plain.queryOffset('TopicB', 'k89', 64, 0, all[249].storeTimestamp).phyOffsets.filter((offset) => offset <= all[249].commitLogOffset),
    )
    for (const request of all.slice(250)) bulk.buildIndex(request)
    bulk.endBulk()
    bulk.flush()

    const plainFiles = plain.getFiles()
    const bulkFiles = bulk.getFiles()
    expect(plainFiles.length).toBeGreaterThan(3)
    expect(bulkFiles.length).toBe(plainFiles.length)
    for (let f = 0; f < plainFiles.length; f++) {
      expect(bytesOf(bulkFiles[f].fileName).equals(bytesOf(plainFiles[f].fileName))).toBe(true)
    }
    for (const key of ['k3', 'a5', 'b2', 'U8', 'k0']) {
      for (const topic of ['TopicA', 'TopicB']) {
        expect(bulk.queryOffset(topic, key, 64, 0, Number.MAX_SAFE_INTEGER)).toEqual(
          plain.queryOffset(topic, key, 64, 0, Number.MAX_SAFE_INTEGER),
        )
      }
    }
  })

  it('drops what it holds when the pass is abandoned', () => {
    const service = open(join(root, 'dropped'))
    const request = (i: number): IndexDispatch => ({
      topic: 'TopicA',
      commitLogOffset: i * 100,
      storeTimestamp: T0 + i,
      keys: `d${i}`,
      uniqKey: undefined,
      sysFlag: 0,
    })
    service.beginBulk()
    // The first key creates the file (put at once); the next ones are held.
    for (let i = 0; i < 10; i++) service.buildIndex(request(i))
    service.dropBulk()
    service.endBulk()
    expect(service.getFiles().map((file) => file.getIndexCount())).toEqual([2])
    expect(service.queryOffset('TopicA', 'd0', 64, 0, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual([0])
    expect(service.queryOffset('TopicA', 'd5', 64, 0, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual([])
  })
})

describe('recovery after a power cut', () => {
  it('finds every key again when open rebuilds the index from the commit log, the dropped files deleted', async () => {
    const dir = join(root, 'store')
    const options = { flushDiskType: 'ASYNC_FLUSH' as const, messageIndexEnable: true }
    const store = await MessageStore.open(dir, options)
    const count = 20_000
    for (let first = 0; first < count; first += 1000) {
      const batch = []
      for (let i = first; i < first + 1000; i++) {
        batch.push({
          topic: `T${i % 3}`,
          queueId: i % 4,
          body: Buffer.from(`body ${i}`),
          keys: i % 10 === 0 ? undefined : `key${i} shared${i % 50}`,
        })
      }
      for (const result of await store.putMessages(batch)) expect(result.status).toBe('PUT_OK')
    }
    await store.close()
    // As a power cut leaves it: the abort file names no boot, and the index files are newer than
    // the checkpoint's index time (deleted and rebuilt by the scan).
    fs.writeFileSync(join(dir, 'abort'), '')
    const checkpoint = fs.readFileSync(join(dir, 'checkpoint'))
    checkpoint.fill(0, 0, 24)
    fs.writeFileSync(join(dir, 'checkpoint'), checkpoint)
    // And no index mark, as when the cut came before any sync of the index's entries: the puts'
    // first one (after FIRST_KICK_ENTRIES keys) wrote one, which would keep the file's synced part.
    fs.rmSync(join(dir, 'indexmark'))

    const dropped = fs.readdirSync(join(dir, 'index'))
    expect(dropped.length).toBeGreaterThan(0)

    const reopened = await MessageStore.open(dir, options)
    try {
      expect(reopened.stats().recovery?.scannedBytes).toBeGreaterThan(0)
      // The files the open dropped are gone once it returns (deleted in the background, awaited).
      const now = fs.readdirSync(join(dir, 'index'))
      expect(now.filter((name) => dropped.includes(name) || name.endsWith('.tmp'))).toEqual([])
      for (const i of [1, 2, 999, 1001, 12_345, 19_999]) {
        const found = reopened.queryMessage(`T${i % 3}`, `key${i}`, 32, 0, Number.MAX_SAFE_INTEGER)
        expect(found.messages.map((m) => m.body.toString())).toEqual([`body ${i}`])
      }
      const shared = reopened.queryMessage('T1', 'shared7', 64, 0, Number.MAX_SAFE_INTEGER)
      const expected = []
      for (let i = count - 1; i >= 0 && expected.length < 64; i--)
        if (i % 3 === 1 && i % 50 === 7 && i % 10 !== 0) expected.push(`body ${i}`)
      expect(shared.messages.map((m) => m.body.toString()).sort()).toEqual(expected.sort())
      expect(reopened.queryMessage('T0', 'key10', 32, 0, Number.MAX_SAFE_INTEGER).messages).toEqual([])
    } finally {
      await reopened.close()
    }
  })
})
