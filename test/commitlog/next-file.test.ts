// The commit log makes its next file ahead of need (empty, its first chunk reserved), on the libuv
// pool, once the writer is past the middle of the last file. A clean close deletes it while the
// syncs run, so that the next open has nothing past the end to delete; a store that was not closed
// leaves it, and the next open deletes it.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { formatOffsetName } from '../../lib/store/mapped/segment-name.js'
import { settleLogFiles } from '../helpers/log-files.js'
import { PowerLossDisk } from '../helpers/power-loss.js'
import { distEntry, runNodeScript, tempDir } from '../helpers/tmp.js'

const LOG_FILE = 1 << 20
const OPTIONS: OpenOptions = { flushDiskType: 'ASYNC_FLUSH', mappedFileSizeCommitLog: LOG_FILE, messageIndexEnable: false }
const BODY = 1000
/** Records (of 1,094 bytes) past the middle of the first 1 MiB file, and short of its end. */
const PAST_MIDDLE = 600

function body(n: number): Buffer {
  const b = Buffer.alloc(BODY, n & 0xff)
  b.writeUInt32BE(n, 0)
  return b
}

async function putRange(store: MessageStore, from: number, to: number): Promise<void> {
  for (let n = from; n < to; n++) expect((await store.putMessage({ topic: 'log', queueId: 0, body: body(n) })).status).toBe('PUT_OK')
}

function logFiles(dir: string): string[] {
  return fs.readdirSync(join(dir, 'commitlog')).sort()
}

function expectAllBack(store: MessageStore, count: number): void {
  let seen = 0
  for (let offset = 0; offset < count; ) {
    const got = store.getMessage('g', 'log', 0, offset, 32)
    expect(got.status).toBe('FOUND')
    for (const m of got.messages) expect(Buffer.from(m.body).equals(body(seen++))).toBe(true)
    offset = got.nextBeginOffset
  }
  expect(seen).toBe(count)
}

const stores: MessageStore[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
})

describe("the commit log's next file, made ahead of need", () => {
  it('is made once the writer is past the middle of the last file; a clean close deletes it; a burst that outruns it makes its own files', async () => {
    const dir = tempDir('next-file')
    let store = await MessageStore.open(dir, OPTIONS)
    await putRange(store, 0, 100)
    await settleLogFiles(store)
    expect(logFiles(dir)).toEqual([formatOffsetName(0)])
    await putRange(store, 100, PAST_MIDDLE)
    await settleLogFiles(store)
    expect(logFiles(dir)).toEqual([formatOffsetName(0), formatOffsetName(LOG_FILE)])
    await store.close()
    expect(logFiles(dir)).toEqual([formatOffsetName(0)])

    store = await MessageStore.open(dir, OPTIONS)
    stores.push(store)
    expect(store.stats().lastExitOK).toBe(true)
    // 2,000 records of 1,094 bytes reach a little into the third file. Nothing between these puts
    // turns the event loop, so each roll makes its file itself (the pool's files, asked for past
    // the middles of the first and the second, go), and the third is not past its middle yet.
    await putRange(store, PAST_MIDDLE, 2000)
    await settleLogFiles(store)
    expect(logFiles(dir)).toEqual([0, 1, 2].map((k) => formatOffsetName(k * LOG_FILE)))
    expectAllBack(store, 2000)
  })

  it('stays when the writer is killed, and the next open deletes it (it lies past the end)', async () => {
    const dir = tempDir('next-file-kill')
    const script = `
      const { MessageStore } = await import(${JSON.stringify(distEntry)})
      const store = await MessageStore.open(${JSON.stringify(dir)}, ${JSON.stringify(OPTIONS)})
      for (let n = 0; n < ${PAST_MIDDLE}; n++) {
        const b = Buffer.alloc(${BODY}, n & 0xff); b.writeUInt32BE(n, 0)
        const r = await store.putMessage({ topic: 'log', queueId: 0, body: b })
        if (r.status !== 'PUT_OK') throw new Error(r.status)
      }
      const { existsSync } = await import('node:fs')
      const next = ${JSON.stringify(join(dir, 'commitlog', formatOffsetName(LOG_FILE)))}
      while (!existsSync(next)) await new Promise((resolve) => setTimeout(resolve, 5))
      process.kill(process.pid, 'SIGKILL')
    `
    const run = runNodeScript(script)
    expect(run.signal).toBe('SIGKILL')
    expect(logFiles(dir)).toEqual([formatOffsetName(0), formatOffsetName(LOG_FILE)])
    const store = await MessageStore.open(dir, OPTIONS)
    stores.push(store)
    expect(store.stats().lastExitOK).toBe(false)
    expect(logFiles(dir)).toEqual([formatOffsetName(0)])
    expectAllBack(store, PAST_MIDDLE)
  })

  // Its folder entry is made durable by its first flush (it was linked under its name without a
  // folder sync): a put acknowledged with SYNC_FLUSH in the made file survives a power cut.
  it.runIf(process.platform === 'linux')(
    'a SYNC_FLUSH put acknowledged in the file made ahead survives a power cut that loses every unsynced name (Linux: the power-loss model reads /proc)',
    async () => {
      const root = tempDir('next-file-cut')
      const dir = join(root, 'store')
      fs.mkdirSync(dir)
      const small: OpenOptions = { flushDiskType: 'SYNC_FLUSH', mappedFileSizeCommitLog: 64 * 1024, messageIndexEnable: false }
      const disk = new PowerLossDisk({ root: dir, seed: 3, imageRoot: join(root, 'images'), mode: 'lose-unsynced' }).arm()
      let cutDir: string
      const store = await MessageStore.open(dir, small)
      try {
        // 40 records of 1,094 bytes: past the middle of the first file, which asks for the next.
        await putRange(store, 0, 40)
        await settleLogFiles(store)
        expect(logFiles(dir)).toEqual([formatOffsetName(0), formatOffsetName(64 * 1024)])
        // The next 40 go into the file made ahead, each acknowledged after its group commit.
        await putRange(store, 40, 80)
        cutDir = disk.cutNow('after puts into the file made ahead').dir
      } finally {
        await store.close()
        disk.disarm()
      }
      const reopened = await MessageStore.open(cutDir, small)
      try {
        expectAllBack(reopened, 80)
      } finally {
        await reopened.close()
      }
    },
  )
})
