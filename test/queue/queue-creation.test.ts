// Cheap queue creation (lib/store/queue/queue-directories.ts): a new queue's folders are made
// with plain mkdirs on the put path, and the directory syncs they owe are paid by the queue's first
// flush. A power cut after that flush must find the folders and the units under their names.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { QueueDirectories } from '../../lib/store/queue/queue-directories.js'
import { PowerLossDisk } from '../helpers/power-loss.js'
import { tempDir } from '../helpers/tmp.js'

let root: string
let store: string
let disk: PowerLossDisk | null = null
beforeEach(() => {
  root = tempDir('mqstore-qcreate-')
  store = join(root, 'store')
  fs.mkdirSync(store)
})
afterEach(() => {
  disk?.disarm()
  disk = null
})

describe('queue folders', () => {
  it('a new topic owes a sync of the root and of its folder, and so does each of its new queues until the root is synced; then a new queue owes only the topic folder; an existing queue nothing', () => {
    const dirs = new QueueDirectories()
    const cq = join(store, 'consumequeue')
    const first = dirs.create(join(cq, 'a', '0'))
    expect(first.map((o) => o.dir)).toEqual([cq, join(cq, 'a')])
    expect(fs.statSync(join(cq, 'a', '0')).isDirectory()).toBe(true)
    // Either queue may be flushed first: each owes the topic's entry in the root, the same change.
    const second = dirs.create(join(cq, 'a', '1'))
    expect(second.map((o) => o.dir)).toEqual([cq, join(cq, 'a')])
    expect(second[0]).toEqual(first[0])
    dirs.sync(first)
    expect(dirs.create(join(cq, 'a', '2')).map((o) => o.dir)).toEqual([join(cq, 'a')])
    expect(dirs.create(join(cq, 'a', '1'))).toEqual([])
  })

  it('off the JS thread the same: the new queues of a new topic owe the root until it is synced, the topic folder made once', async () => {
    const dirs = new QueueDirectories()
    const cq = join(store, 'consumequeue')
    fs.mkdirSync(cq)
    const [a, b] = await Promise.all([dirs.createAsync(join(cq, 'n', '0')), dirs.createAsync(join(cq, 'n', '1'))])
    for (const owed of [a, b]) expect(owed.map((o) => o.dir)).toEqual([cq, join(cq, 'n')])
    expect(b[0]).toEqual(a[0])
    await dirs.syncAsync(a)
    expect((await dirs.createAsync(join(cq, 'n', '2'))).map((o) => o.dir)).toEqual([join(cq, 'n')])
    // A topic folder removed behind its back (the topic deleted) is made again, its entry owed anew.
    fs.rmSync(join(cq, 'n'), { recursive: true })
    expect((await dirs.createAsync(join(cq, 'n', '3'))).map((o) => o.dir)).toEqual([cq, join(cq, 'n')])
    expect(fs.statSync(join(cq, 'n', '3')).isDirectory()).toBe(true)
  })

  it('the queues of a new topic made side by side off the JS thread all get their folders, though each finds folders the others made', async () => {
    const dirs = new QueueDirectories()
    const cq = join(store, 'consumequeue')
    // Neither the root nor the topic folder exists: every queue starts by finding them missing.
    const queues = Array.from({ length: 16 }, (_, q) => join(cq, 'fresh', String(q)))
    const owed = await Promise.all(queues.map((q) => dirs.createAsync(q)))
    for (const q of queues) expect(fs.statSync(q).isDirectory()).toBe(true)
    // Every queue owes the sync of the topic folder that holds its entry, and of the root above it.
    for (const o of owed) expect(o.map((x) => x.dir)).toContain(join(cq, 'fresh'))
    await dirs.syncAsync(owed.flat())
    expect(await dirs.createAsync(queues[0])).toEqual([])
  })

  it('syncs of a folder are counted: each owed change is newer than the last, and paying them leaves nothing owed twice', async () => {
    const dirs = new QueueDirectories()
    const cq = join(store, 'consumequeue')
    const a = dirs.create(join(cq, 't', '0'))
    const b = dirs.create(join(cq, 't', '1'))
    expect(b[b.length - 1].change).toBeGreaterThan(a[a.length - 1].change)
    await Promise.all([dirs.syncAsync(a), dirs.syncAsync(b)])
    dirs.sync([...a, ...b])
    expect(fs.readdirSync(join(cq, 't')).sort()).toEqual(['0', '1'])
  })
})

describe.skipIf(process.platform !== 'linux')(
  'power cuts after cheap queue creation (Linux only: the power-loss model resolves descriptors through /proc/self/fd)',
  () => {
    it('the flush at close makes new topics, their queue folders and units durable: a cut right after close keeps them all', async () => {
      disk = new PowerLossDisk({ root: store, seed: 13, imageRoot: join(root, 'images'), mode: 'lose-unsynced' }).arm()
      const options = {
        flushDiskType: 'ASYNC_FLUSH' as const,
        flushIntervalConsumeQueue: 3_600_000,
        flushConsumeQueueThoroughInterval: 3_600_000,
      }
      const s = await MessageStore.open(store, options)
      const targets = [
        ['fresh-a', 0],
        ['fresh-a', 1],
        ['fresh-b', 5],
      ] as const
      for (const [topic, queueId] of targets) {
        for (let i = 0; i < 3; i++) expect((await s.putMessage({ topic, queueId, body: `${topic}-${queueId}-${i}` })).status).toBe('PUT_OK')
      }
      await s.close()
      const cut = disk.cutNow()
      disk.disarm()
      for (const [topic, queueId] of targets) {
        const units = fs.readFileSync(join(cut.dir, 'consumequeue', topic, String(queueId), '00000000000000000000'))
        // The third unit's size field: the units reached the disk under the queue's own name.
        expect(units.readInt32BE(2 * 20 + 8)).toBeGreaterThan(0)
      }
    })
  },
)
