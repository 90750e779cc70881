// The next index file is made ahead, off the put path (lib/store/index/index-file-ahead.ts): a new
// store's first put and a roll find it made (or wait for it), a close deletes one that no key
// took, and a writer killed while one waits leaves nothing the reopen trips over. (A creation cut short, as `.tmp` or
// as a short file of zeros, is in test/index-service.test.ts.)
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { basename, join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

import { interposeNativeForTesting } from '../../lib/native.js'
import { indexFileSize } from '../../lib/store/index/index-file.js'
import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { distEntry, tempDir } from '../helpers/tmp.js'

// The first write-back kick (4,096 keys) starts the next file of a file this small.
const SLOTS = 1000
const ENTRIES = 6000
const OPTIONS: OpenOptions = { flushDiskType: 'ASYNC_FLUSH', maxHashSlotNum: SLOTS, maxIndexNum: ENTRIES }

/** The index files, oldest first (a `.tmp` is one being made). */
function indexFiles(dir: string): string[] {
  return fs.readdirSync(join(dir, 'index')).sort()
}

/** Waits until `count` index files are whole (no `.tmp` left) and returns the folder's names. */
async function wholeFiles(dir: string, count: number): Promise<string[]> {
  await vi.waitFor(() => expect(indexFiles(dir).filter((name) => !name.endsWith('.tmp'))).toHaveLength(count), {
    timeout: 10_000,
    interval: 5,
  })
  return indexFiles(dir)
}

function keyed(from: number, count: number): { topic: string; queueId: number; body: Buffer; keys: string[] }[] {
  return Array.from({ length: count }, (_, k) => ({ topic: 't', queueId: 0, body: Buffer.from(`m${from + k}`), keys: [`k${from + k}`] }))
}

async function putKeyed(store: MessageStore, from: number, count: number): Promise<void> {
  for (const r of await store.putMessages(keyed(from, count))) expect(r.status).toBe('PUT_OK')
}

function expectKeys(store: MessageStore, count: number): void {
  for (let n = 0; n < count; n++) expect(store.queryMessage('t', `k${n}`, 4).messages.map((m) => m.body.toString())).toEqual([`m${n}`])
}

/** Opens the store in `dir`, runs `body` with it, and closes it whatever happens. */
async function withStore(dir: string, body: (store: MessageStore) => Promise<void> | void): Promise<void> {
  const store = await MessageStore.open(dir, OPTIONS)
  try {
    await body(store)
  } finally {
    await store.close()
  }
}

const restores: (() => void)[] = []
afterEach(() => {
  for (const restore of restores.splice(0)) restore()
})

describe('index files made ahead', () => {
  it("a new store's first put writes into the file made at open", async () => {
    const dir = tempDir('mqstore-ahead-')
    await withStore(dir, async (store) => {
      const made = await wholeFiles(dir, 1)
      await putKeyed(store, 0, 10)
      expect(indexFiles(dir)).toEqual(made)
      expectKeys(store, 10)
    })
    await withStore(dir, async (store) => {
      expectKeys(store, 10)
    })
  })

  it("a new store's first put waits for the file still being made rather than make one", async () => {
    const dir = tempDir('mqstore-ahead-')
    // The index file's creation held back until the put has begun.
    let release = (): void => undefined
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    const made: string[] = []
    restores.push(
      interposeNativeForTesting((original) => ({
        createMapped: async (path, size, ...rest) => {
          if (size === indexFileSize(SLOTS, ENTRIES)) {
            made.push(basename(path, '.tmp'))
            await held
          }
          return original.createMapped(path, size, ...rest)
        },
      })),
    )
    await withStore(dir, async (store) => {
      const put = putKeyed(store, 0, 10)
      await new Promise((resolve) => setTimeout(resolve, 20))
      release()
      await put
      expect(made).toHaveLength(1)
      expect(indexFiles(dir)).toEqual(made)
      expectKeys(store, 10)
    })
  })

  it('a file that cannot be made ahead is made by the put that needs it, and nothing is left of the attempt', async () => {
    const dir = tempDir('mqstore-ahead-')
    let refused = 0
    restores.push(
      interposeNativeForTesting((original) => ({
        createMapped: async (path, size, ...rest) => {
          if (size !== indexFileSize(SLOTS, ENTRIES)) return original.createMapped(path, size, ...rest)
          refused++
          throw Object.assign(new Error('no space left on device'), { code: 'ENOSPC' })
        },
      })),
    )
    await withStore(dir, async (store) => {
      await putKeyed(store, 0, 10)
      expect(refused).toBe(1)
      expect(indexFiles(dir).filter((name) => name.endsWith('.tmp'))).toEqual([])
      expect(indexFiles(dir)).toHaveLength(1)
      expectKeys(store, 10)
    })
  })

  it('a roll takes the file made while the keys before it went into the last one', async () => {
    const dir = tempDir('mqstore-ahead-')
    await withStore(dir, async (store) => {
      await putKeyed(store, 0, 4200)
      const made = await wholeFiles(dir, 2)
      await putKeyed(store, 4200, 2000)
      // The first file holds 5,999 keys; the rest went into the one made ahead.
      expect(indexFiles(dir)).toEqual(made)
      expectKeys(store, 6200)
    })
  })

  it('close deletes a file that no key took', async () => {
    const dir = tempDir('mqstore-ahead-')
    const store = await MessageStore.open(dir, OPTIONS)
    await wholeFiles(dir, 1)
    await store.close()
    expect(indexFiles(dir)).toEqual([])
    await withStore(dir, async (store) => {
      await putKeyed(store, 0, 10)
      expectKeys(store, 10)
    })
  })

  it('a writer killed while the next file waits loses no key, and the reopen drops the empty file (child process)', async () => {
    const dir = tempDir('mqstore-ahead-')
    const script = `
      import * as fs from 'node:fs'
      const { MessageStore } = await import(${JSON.stringify(distEntry)})
      const dir = process.argv[1]
      const store = await MessageStore.open(dir, ${JSON.stringify(OPTIONS)})
      for (let n = 0; n < 4200; n += 600) {
        const batch = Array.from({ length: 600 }, (_, k) => ({ topic: 't', queueId: 0, body: Buffer.from('m' + (n + k)), keys: ['k' + (n + k)] }))
        for (const r of await store.putMessages(batch)) if (r.status !== 'PUT_OK') throw new Error(r.status)
      }
      const ready = () => fs.readdirSync(dir + '/index').filter((name) => !name.endsWith('.tmp')).length === 2
      while (!ready()) await new Promise((resolve) => setTimeout(resolve, 5))
      process.kill(process.pid, 'SIGKILL')
    `
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script, dir], { encoding: 'utf8', timeout: 60_000 })
    expect(child.stderr).toBe('')
    expect(child.signal).toBe('SIGKILL')
    const [first, next] = indexFiles(dir)
    expect(next).toBeDefined()
    await withStore(dir, async (store) => {
      expectKeys(store, 4200)
      expect(indexFiles(dir)).toEqual([first])
    })
  })
})
