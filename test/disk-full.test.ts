// A full disk, on a real tiny tmpfs: every failure is a status or a logged error, never a signal,
// and nothing that was acknowledged is lost once space comes back.
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'
import { mountTmpfs, tmpfs, unmountTmpfs } from './helpers/tmpfs.js'

describe.runIf(tmpfs.ok)('disk full (tmpfs)', () => {
  let dir: string
  beforeEach(() => {
    dir = tempDir('mqstore-full-')
  })
  afterEach(() => {
    unmountTmpfs(dir)
    fs.rmSync(dir, { recursive: true, force: true })
  })

  function mount(size: string, remount = false): void {
    mountTmpfs(dir, size, remount)
  }

  const tick = () => new Promise((resolve) => setImmediate(resolve))

  it('a commit-log file that cannot be created answers CREATE_MAPEDFILE_FAILED; earlier messages stay readable', async () => {
    mount('256k')
    const store = await MessageStore.open(dir, {
      mappedFileSizeCommitLog: 64 * 1024,
      mappedFileSizeConsumeQueue: 20 * 100,
      messageIndexEnable: false,
    })
    const statuses: string[] = []
    for (let i = 0; i < 40 && !statuses.includes('CREATE_MAPEDFILE_FAILED'); i++) {
      statuses.push((await store.putMessage({ topic: 't', body: Buffer.alloc(10_000, i) })).status)
      await tick()
    }
    const ok = statuses.filter((s) => s === 'PUT_OK').length
    expect(ok).toBeGreaterThan(5)
    expect(statuses.slice(ok)).toEqual(['CREATE_MAPEDFILE_FAILED'])
    const got = store.getMessage('g', 't', 0, 0, 64)
    expect(got.messages.map((m) => m.body[0])).toEqual(Array.from({ length: ok }, (_, i) => i))
    await store.close()
  })

  it('a consume queue that finds no blocks stops puts with SERVICE_NOT_AVAILABLE and the reason; reopening with space re-dispatches', async () => {
    mount('1m')
    const errors: string[] = []
    const options: OpenOptions = {
      mappedFileSizeCommitLog: 64 * 1024,
      mappedFileSizeConsumeQueue: 20 * 20_000,
      messageIndexEnable: false,
      logger: (level, message) => {
        if (level === 'error') errors.push(message)
      },
    }
    let store = await MessageStore.open(dir, options)
    // Each new queue reserves its first page; one put per queue until a queue finds no room.
    const statuses: string[] = []
    let reason = ''
    for (let queueId = 0; queueId < 1024; queueId++) {
      const result = await store.putMessage({ topic: 't', queueId, body: `m${queueId}` })
      statuses.push(result.status)
      if (result.status !== 'PUT_OK') {
        reason = result.reason ?? ''
        break
      }
      await tick()
    }
    // The record is appended (and acknowledged) before dispatch finds no room for its queue's
    // file; the put after it is refused, saying why.
    const ok = statuses.filter((s) => s === 'PUT_OK').length
    expect(ok).toBeGreaterThan(2)
    expect(statuses.slice(ok)).toEqual(['SERVICE_NOT_AVAILABLE'])
    const stuck = ok - 1
    expect(reason).toContain('dispatch is stuck')
    expect(reason).toMatch(/ENOSPC|no space/i)
    expect(errors.some((e) => e.includes('dispatch stopped'))).toBe(true)
    expect(store.getMessage('g', 't', 0, 0, 8).messages.map((m) => m.body.toString())).toEqual(['m0'])
    expect(store.getMaxOffsetInQueue('t', stuck)).toBe(0)
    await store.close()
    // Close deletes the commit log's spare file (made ahead, empty) while it syncs; when dispatch
    // retries after that, the stuck queue's file fits in the space freed and dispatch catches up:
    // a clean close. Otherwise dispatch never caught up, and the next open must recover abnormally.
    const caughtUpAtClose = fs.existsSync(`${dir}/consumequeue/t/${stuck}/${'0'.repeat(20)}`)
    expect(fs.existsSync(`${dir}/abort`)).toBe(!caughtUpAtClose)

    mount('8m', true)
    store = await MessageStore.open(dir, options)
    expect(store.stats().lastExitOK).toBe(caughtUpAtClose)
    expect(store.getMessage('g', 't', stuck, 0, 8).messages.map((m) => m.body.toString())).toEqual([`m${stuck}`])
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'd' })).status).toBe('PUT_OK')
    expect(store.getMessage('g', 't', 0, 0, 8).messages.map((m) => m.body.toString())).toEqual(['m0', 'd'])
    await store.close()
  })

  it('a commit-log file larger than the disk fills chunk by chunk: CREATE_MAPEDFILE_FAILED with the reason, never a SIGBUS', async () => {
    mount('8m')
    // 64 MiB segments on an 8 MiB file system: only chunked reservation lets the store open at all
    // (the first file and the next one, made ahead once the event loop turns, take a chunk each).
    const store = await MessageStore.open(dir, { mappedFileSizeCommitLog: 64 * 1024 * 1024, messageIndexEnable: false })
    const body = Buffer.alloc(64 * 1024, 7)
    let last = await store.putMessage({ topic: 't', body })
    let ok = 0
    while (last.status === 'PUT_OK' && ok < 1000) {
      ok++
      last = await store.putMessage({ topic: 't', body })
    }
    expect(ok).toBeGreaterThan(16)
    expect(last.status).toBe('CREATE_MAPEDFILE_FAILED')
    expect(last.reason).toMatch(/cannot reserve .*ENOSPC/)
    const got = store.getMessage('g', 't', 0, ok - 1, 1)
    expect(got.status).toBe('FOUND')
    expect(got.messages[0].body.equals(body)).toBe(true)
    await store.close()
  })

  it('an index file whose slot pages find no blocks stops puts with the reason; after space comes back every acknowledged key is found', async () => {
    mount('3m')
    // A 4 MB slot table on a 3 MiB file system: slot pages are reserved as keys hit them.
    const options: OpenOptions = {
      mappedFileSizeCommitLog: 256 * 1024,
      mappedFileSizeConsumeQueue: 20 * 1000,
      maxHashSlotNum: 1_000_000,
      maxIndexNum: 10_000,
      diskMaxUsedSpaceRatio: 95,
    }
    let store = await MessageStore.open(dir, options)
    // Keys that differ in their first characters spread over the slot table (Java's string hash).
    const keyOf = (i: number) => `${((i * 2654435761) >>> 0).toString(36)}-${i}`
    let acked = 0
    let refused: { status: string; reason?: string } | null = null
    for (let i = 0; i < 5_000 && refused === null; i++) {
      const result = await store.putMessage({ topic: 't', body: `m${i}`, keys: [keyOf(i)] })
      if (result.status === 'PUT_OK') acked++
      else refused = result
      await tick()
    }
    expect(acked).toBeGreaterThan(100)
    expect(refused?.status).toBe('SERVICE_NOT_AVAILABLE')
    expect(refused?.reason).toMatch(/dispatch is stuck .*ENOSPC/)
    expect(refused?.reason).toContain('/index/')
    await store.close()

    mount('16m', true)
    store = await MessageStore.open(dir, options)
    for (let i = 0; i < acked; i++) {
      expect(store.getLatestByKey('t', keyOf(i))?.body.toString()).toBe(`m${i}`)
    }
    expect((await store.putMessage({ topic: 't', body: 'again', keys: ['key-again'] })).status).toBe('PUT_OK')
    await store.close()
  })

  it('a durable offset commit on a full disk rejects with NO_SPACE; one nobody awaits is logged, never an unhandled rejection', async () => {
    mount('1m')
    const failures: string[] = []
    let secondFailure = () => {}
    const twoFailuresLogged = new Promise<void>((resolve) => (secondFailure = resolve))
    const store = await MessageStore.open(dir, {
      mappedFileSizeCommitLog: 64 * 1024,
      mappedFileSizeConsumeQueue: 20 * 100,
      messageIndexEnable: false,
      logger: (level, message) => {
        if (level !== 'error' || !message.startsWith('durable offset commit failed')) return
        failures.push(message)
        if (failures.length === 2) secondFailure()
      },
    })
    expect((await store.putMessage({ topic: 't', body: 'x' })).status).toBe('PUT_OK')
    await store.commitOffset('g', 't', 0, 1, { durable: true })
    // Fill what is left of the file system.
    const filler = fs.openSync(`${dir}/filler`, 'w')
    try {
      for (;;) fs.writeSync(filler, Buffer.alloc(4096))
    } catch (error) {
      expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC')
    } finally {
      fs.closeSync(filler)
    }
    await expect(store.commitOffset('g', 't', 0, 2, { durable: true })).rejects.toMatchObject({ code: 'NO_SPACE' })
    // Nobody awaits or catches this one: the logger hears of it, and vitest would fail the run on
    // an unhandled rejection.
    void store.consume({ group: 'h', topic: 't', queueId: 0 }).commit(1)
    await twoFailuresLogged
    expect(failures[1]).toMatch(/ENOSPC/)
    // The commit stays in memory; with space back, the next save writes it.
    expect(store.queryOffset('g', 't', 0)).toBe(2)
    fs.rmSync(`${dir}/filler`)
    await store.commitOffset('g', 't', 0, 3, { durable: true })
    const saved = JSON.parse(fs.readFileSync(`${dir}/config/consumerOffset.json`, 'utf8'))
    expect(saved.offsetTable).toEqual({ 't@g': { 0: 3 }, 't@h': { 0: 1 } })
    await store.close()
  })
})

/** What test/fixtures/disk-full-producer.mjs prints. */
interface ProducerReport {
  acked: { n: number; queueId: number; wroteOffset: number; queueOffset: number }[]
  statuses: Record<string, number>
  refusals: { status: string; afterAcked: number; flags: string[] }[]
  thrown: unknown[]
  peakUsedRatio: number
  resumedAfterMs: number
  cleanup: {
    filesDeleted: { commitLog: number; consumeQueue: number; index: number }
    bytesDeleted: number
    lastPass: { reason: string } | null
  }
  commitLogMinOffset: number
  logs: string[]
}

const producer = fileURLToPath(new URL('./fixtures/disk-full-producer.mjs', import.meta.url))

describe.runIf(tmpfs.ok)('disk full and pressure cleanup (tmpfs)', () => {
  let dir: string
  beforeEach(() => {
    dir = tempDir('mqstore-pressure-')
    mountTmpfs(dir, '1m')
  })
  afterEach(() => {
    unmountTmpfs(dir)
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it('a producer fills the disk with young files; pressure cleanup deletes the oldest, writes resume by themselves, every kept message reads back after reopen', async () => {
    const options: OpenOptions = {
      mappedFileSizeCommitLog: 64 * 1024,
      // One consume-queue file per queue for the whole run: a queue file that cannot be created
      // stops dispatch, which is a different test (above).
      mappedFileSizeConsumeQueue: 20 * 4000,
      messageIndexEnable: false,
      cleanResourceInterval: 200,
    }
    const run = spawnSync(process.execPath, [producer, dir, JSON.stringify(options)], { encoding: 'utf8', timeout: 120_000 })
    expect(run.signal, run.stderr).toBeNull()
    expect(run.status, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout) as ProducerReport
    // The run as observed, printed when MQSTORE_REPORT is set (for the project's notes).
    if (process.env.MQSTORE_REPORT !== undefined)
      console.log(
        JSON.stringify({
          statuses: report.statuses,
          refusals: report.refusals,
          peakUsedRatio: report.peakUsedRatio,
          resumedAfterMs: report.resumedAfterMs,
          filesDeleted: report.cleanup.filesDeleted,
          bytesDeleted: report.cleanup.bytesDeleted,
          lastPass: report.cleanup.lastPass,
          acked: report.acked.length,
          commitLogMinOffset: report.commitLogMinOffset,
          logs: report.logs.filter((l) => !l.startsWith('info cleanup (forced): deleted')).slice(0, 12),
        }),
      )
    expect(report.thrown).toEqual([])
    // The store refused with a status, never an exception, and then took writes again by itself.
    expect(report.refusals.length).toBeGreaterThan(0)
    for (const refusal of report.refusals) expect(['SERVICE_NOT_AVAILABLE', 'CREATE_MAPEDFILE_FAILED']).toContain(refusal.status)
    expect(report.resumedAfterMs).toBeGreaterThanOrEqual(0)
    expect(report.statuses.PUT_OK).toBe(report.acked.length)
    // Files were young (fileReservedTime 72 h): only pressure could delete them, in forced passes.
    // The last pass may have come while the disk was filling again (75-85 %: pressure, nothing
    // young deleted) rather than above 85 %, as the writer's files happened to lie then.
    expect(report.cleanup.filesDeleted.commitLog).toBeGreaterThan(0)
    expect(report.logs.some((line) => line.startsWith('info cleanup (forced): deleted commit-log file'))).toBe(true)
    expect(report.logs.some((line) => /^info cleanup \((?!forced)/.test(line))).toBe(false)
    expect(['forced', 'disk']).toContain(report.cleanup.lastPass?.reason)
    expect(report.peakUsedRatio).toBeGreaterThan(0.9)

    const store = await MessageStore.open(dir, options)
    try {
      const minPhy = store.getMinPhyOffset()
      expect(minPhy).toBeGreaterThan(0)
      const kept = report.acked.filter((a) => a.wroteOffset >= minPhy)
      expect(kept.length).toBeGreaterThan(0)
      for (const a of kept) {
        const m = store.lookMessageByOffset(a.wroteOffset)
        expect(m?.body.readUInt32BE(0)).toBe(a.n)
        expect(m?.queueOffset).toBe(a.queueOffset)
      }
      for (const a of report.acked.filter((x) => x.wroteOffset < minPhy)) expect(store.lookMessageByOffset(a.wroteOffset)).toBeNull()
      for (const queueId of [0, 1]) {
        const first = kept.find((a) => a.queueId === queueId)!
        expect(store.getMinOffsetInQueue('full', queueId)).toBeLessThanOrEqual(first.queueOffset)
        const below = store.getMessage('g', 'full', queueId, 0, 8)
        expect(below.status).toBe('OFFSET_TOO_SMALL')
        const got = store.getMessage('g', 'full', queueId, first.queueOffset, 8)
        expect(got.messages[0]?.body.readUInt32BE(0)).toBe(first.n)
      }
      // The producer stopped with its last files filling the disk again: the reopened store
      // refuses puts until a pass makes room, then takes them.
      if (store.stats().runningFlags.value !== 0) {
        expect((await store.putMessage({ topic: 'full', body: 'after reopen' })).status).toBe('SERVICE_NOT_AVAILABLE')
        await store.runCleanupPass()
      }
      expect(store.stats().runningFlags.value).toBe(0)
      expect((await store.putMessage({ topic: 'full', body: 'after reopen' })).status).toBe('PUT_OK')
    } finally {
      await store.close()
    }
  })
})

describe.runIf(!tmpfs.ok)(`disk full (skipped: ${tmpfs.reason})`, () => {
  it(`is skipped because ${tmpfs.reason}`, () => {
    expect(tmpfs.ok).toBe(false)
  })
})
