// Recovery after a process crash of this boot (docs/recovery.md C3b and I1b: the abort file names
// the boot): the scan resumes where dispatch had got to and the index file being written is kept,
// with a put the crash cut short undone. Without the boot's name (a power cut, a reboot, another
// system) the scan starts where the checkpoint says and the index is rebuilt. Both find every
// message.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { abortFileContent, crashedInThisBoot, currentBootId } from '../../lib/store/recovery/boot-identity.js'
import { INDEX_COUNT_OFFSET } from '../../lib/store/index/index-layout.js'
import { distEntry, tempDir } from '../helpers/tmp.js'

const OPTIONS: OpenOptions = {
  mappedFileSizeCommitLog: 256 * 1024,
  mappedFileSizeConsumeQueue: 20 * 1024,
  // Few slots: every chain holds many keys, so a slot left pointing at a half-made entry would
  // hide older keys from lookups.
  maxHashSlotNum: 8,
  maxIndexNum: 50_000,
  messageIndexEnable: true,
  flushDiskType: 'ASYNC_FLUSH',
}
const COUNT = 6000
const TOPICS = ['pc-a', 'pc-b', 'pc-c']

const stores: MessageStore[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
})

beforeAll(() => {
  if (!fs.existsSync(fileURLToPath(distEntry))) throw new Error('the child runs the compiled package: run `npm run build:ts` first')
})

async function open(dir: string): Promise<MessageStore> {
  const store = await MessageStore.open(dir, OPTIONS)
  stores.push(store)
  return store
}

/** Puts COUNT messages with two keys each from a child process that then SIGKILLs itself. */
function writeAndKill(dir: string): void {
  const script = `
    const { MessageStore } = await import(process.argv[1])
    const store = await MessageStore.open(process.argv[2], JSON.parse(process.argv[3]))
    const topics = ${JSON.stringify(TOPICS)}
    for (let i = 0; i < ${COUNT}; i += 100) {
      const batch = []
      for (let j = i; j < i + 100; j++) batch.push({ topic: topics[j % 3], queueId: j % 4, keys: ['k' + j, 'g' + (j % 50)], body: Buffer.from('m' + j) })
      for (const r of await store.putMessages(batch)) if (r.status !== 'PUT_OK') throw new Error(r.status)
    }
    store.getMaxOffsetInQueue(topics[0], 0)
    process.kill(process.pid, 'SIGKILL')
  `
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script, distEntry, dir, JSON.stringify(OPTIONS)], {
    encoding: 'utf8',
  })
  expect(child.signal, child.stderr).toBe('SIGKILL')
}

/** Every message is found by its own key and in its queue, in order. */
function expectEveryMessage(store: MessageStore): void {
  for (let i = 0; i < COUNT; i += 7) {
    const found = store.queryMessage(TOPICS[i % 3], `k${i}`, 4, 0, Number.MAX_SAFE_INTEGER).messages
    expect(
      found.map((m) => m.body.toString()),
      `key k${i}`,
    ).toEqual([`m${i}`])
  }
  const last = COUNT - 1
  expect(store.queryMessage(TOPICS[last % 3], `k${last}`, 4, 0, Number.MAX_SAFE_INTEGER).messages).toHaveLength(1)
  let total = 0
  for (const topic of TOPICS) for (let q = 0; q < 4; q++) total += store.getMaxOffsetInQueue(topic, q)
  expect(total).toBe(COUNT)
}

describe('recovery after a process crash of this boot', () => {
  it('the abort file names the boot it was written in, and only that boot', () => {
    const dir = tempDir()
    const abort = join(dir, 'abort')
    fs.writeFileSync(abort, abortFileContent('0a1b2c3d-0000-4000-8000-000000000000'))
    expect(crashedInThisBoot(abort, '0a1b2c3d-0000-4000-8000-000000000000')).toBe(true)
    expect(crashedInThisBoot(abort, '0a1b2c3d-0000-4000-8000-000000000001')).toBe(false)
    fs.writeFileSync(abort, '')
    expect(crashedInThisBoot(abort, '0a1b2c3d-0000-4000-8000-000000000000')).toBe(false)
    expect(crashedInThisBoot(join(dir, 'missing'))).toBe(false)
    expect(abortFileContent(null)).toBe('')
  })

  it.skipIf(currentBootId() === null)(
    'resumes at the dispatched end and keeps the index; a store whose abort file names no boot scans and rebuilds (needs a boot id: Linux)',
    async () => {
      const dir = join(tempDir(), 'store')
      writeAndKill(dir)
      expect(crashedInThisBoot(join(dir, 'abort'))).toBe(true)
      const rebooted = join(tempDir(), 'store')
      fs.cpSync(dir, rebooted, { recursive: true })
      fs.writeFileSync(join(rebooted, 'abort'), '')

      const store = await open(dir)
      const stats = store.stats()
      expect(stats.lastExitOK).toBe(false)
      // Only what follows the last dispatched record is read (nothing, or a torn tail).
      expect(stats.recovery?.scannedBytes).toBeLessThan(stats.commitLogMaxOffset / 10)
      expectEveryMessage(store)

      const other = await open(rebooted)
      const otherStats = other.stats()
      expect(otherStats.recovery?.scannedBytes).toBeGreaterThanOrEqual(otherStats.commitLogMaxOffset / 2)
      expectEveryMessage(other)
      expect(otherStats.commitLogMaxOffset).toBe(stats.commitLogMaxOffset)

      // The fast path left a store that takes puts and closes and opens cleanly.
      const put = await store.putMessage({ topic: TOPICS[0], queueId: 0, keys: ['after'], body: Buffer.from('after') })
      expect(put.status).toBe('PUT_OK')
      await store.close()
      stores.splice(stores.indexOf(store), 1)
      const again = await open(dir)
      expect(again.stats().lastExitOK).toBe(true)
      expect(again.queryMessage(TOPICS[0], 'after', 4, 0, Number.MAX_SAFE_INTEGER).messages).toHaveLength(1)
      expect(again.queryMessage(TOPICS[1], 'k1', 4, 0, Number.MAX_SAFE_INTEGER).messages).toHaveLength(1)
    },
  )

  it.skipIf(currentBootId() === null)(
    'a put the crash cut between linking an entry and counting it is undone, and the last record is indexed again whole (needs a boot id: Linux)',
    async () => {
      const dir = join(tempDir(), 'store')
      let store = await open(dir)
      for (let i = 0; i < COUNT; i += 100) {
        const batch = []
        for (let j = i; j < i + 100; j++)
          batch.push({ topic: TOPICS[j % 3], queueId: j % 4, keys: [`k${j}`, `g${j % 50}`], body: Buffer.from(`m${j}`) })
        await store.putMessages(batch)
      }
      await store.close()
      stores.splice(stores.indexOf(store), 1)
      // As a SIGKILL inside the last put leaves it: the entry of the last key written and linked
      // from its slot, the header's count not yet raised (and the process's abort file behind).
      const indexDir = join(dir, 'index')
      const [name] = fs.readdirSync(indexDir)
      const fd = fs.openSync(join(indexDir, name), 'r+')
      const header = Buffer.alloc(4)
      fs.readSync(fd, header, 0, 4, INDEX_COUNT_OFFSET)
      header.writeInt32BE(header.readInt32BE(0) - 1)
      fs.writeSync(fd, header, 0, 4, INDEX_COUNT_OFFSET)
      fs.closeSync(fd)
      fs.writeFileSync(join(dir, 'abort'), abortFileContent())

      store = await open(dir)
      expect(store.stats().lastExitOK).toBe(false)
      expectEveryMessage(store)
      // The last record's second key (the one whose count the crash lost) and its first key.
      const last = COUNT - 1
      expect(
        store.queryMessage(TOPICS[last % 3], `g${last % 50}`, 200, 0, Number.MAX_SAFE_INTEGER).messages.map((m) => m.body.toString()),
      ).toContain(`m${last}`)
      // Keys older in the same chains are still reached.
      const g0 = store.queryMessage(TOPICS[0], 'g0', 200, 0, Number.MAX_SAFE_INTEGER).messages
      expect(g0.length).toBe(COUNT / 150)
    },
  )

  it.skipIf(currentBootId() === null)(
    'a record whose keys opened a new index file just before the crash is indexed again (needs a boot id: Linux)',
    async () => {
      const dir = join(tempDir(), 'store')
      const options: OpenOptions = { ...OPTIONS, maxIndexNum: 21 }
      // One put at a time until a put's keys roll the index to a new file; then SIGKILL. The
      // cut of the crash's last record empties that file, whose header must not then claim the
      // record as seen (the replay would skip it, and its key would be lost).
      const script = `
        const fs = await import('node:fs')
        const { MessageStore } = await import(process.argv[1])
        const dir = process.argv[2]
        const store = await MessageStore.open(dir, JSON.parse(process.argv[3]))
        const files = () => (fs.existsSync(dir + '/index') ? fs.readdirSync(dir + '/index').length : 0)
        let i = 0
        for (; i < 1000; i++) {
          const before = files()
          const [r] = await store.putMessages([{ topic: 'roll', queueId: 0, keys: ['k' + i], body: Buffer.from('m' + i) }])
          if (r.status !== 'PUT_OK') throw new Error(r.status)
          if (before > 0 && files() > before) break
        }
        fs.writeFileSync(dir + '/../last', String(i))
        process.kill(process.pid, 'SIGKILL')
      `
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script, distEntry, dir, JSON.stringify(options)], {
        encoding: 'utf8',
      })
      expect(child.signal, child.stderr).toBe('SIGKILL')
      const last = Number(fs.readFileSync(join(dir, '..', 'last'), 'utf8'))
      expect(last).toBeGreaterThan(10)
      const store = await MessageStore.open(dir, options)
      stores.push(store)
      expect(store.stats().lastExitOK).toBe(false)
      for (const i of [0, last - 1, last]) {
        expect(
          store.queryMessage('roll', `k${i}`, 4, 0, Number.MAX_SAFE_INTEGER).messages.map((m) => m.body.toString()),
          `key k${i}`,
        ).toEqual([`m${i}`])
      }
    },
  )
})
