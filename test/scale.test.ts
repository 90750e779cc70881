// Scale: descriptors are not per file, consume-queue files are mapped on first use and unmapped
// when idle within a budget, new queues are cheap, and close releases everything even when a step
// fails. The big cases run in child processes under a lowered descriptor limit (Linux).
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it, vi } from 'vitest'

import { MQStoreError } from '../lib/errors.js'
import { DescriptorCache, openDescriptor } from '../lib/store/mapped/descriptors.js'
import { MappingBudget } from '../lib/store/mapped/mapping-budget.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { CQ_STORE_UNIT_SIZE, ConsumeQueue, type CommitLogView } from '../lib/store/queue/consume-queue.js'
import { tempDir } from './helpers/tmp.js'

const child = fileURLToPath(new URL('./fixtures/scale-child.mjs', import.meta.url))
const onLinux = process.platform === 'linux'
const canMountTmpfs = onLinux && process.getuid?.() === 0

/** Small files: the child tests are about descriptors and mappings, not disk. */
const SMALL: OpenOptions = {
  mappedFileSizeCommitLog: 64 * 1024,
  mappedFileSizeConsumeQueue: 100 * CQ_STORE_UNIT_SIZE,
  maxHashSlotNum: 20_000,
  maxIndexNum: 40_000,
}

/** Runs the fixture under `ulimit -n limit` and parses its report. */
function runChild(limit: number, args: string[]): Record<string, unknown> {
  const quoted = args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ')
  const result = spawnSync('sh', ['-c', `ulimit -n ${limit} && exec '${process.execPath}' '${child}' ${quoted}`], {
    encoding: 'utf8',
    timeout: 170_000,
    maxBuffer: 16 * 1024 * 1024,
  })
  expect(result.stderr).toBe('')
  expect(result.status).toBe(0)
  return JSON.parse(result.stdout) as Record<string, unknown>
}

/** A store folder on a fresh tmpfs when we may mount one (metadata syscalls cost µs there), else on disk. */
function storeRoot(): { dir: string; done: () => void } {
  const root = tempDir('mqstore-scale-')
  if (!canMountTmpfs) return { dir: join(root, 'store'), done: () => {} }
  expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1g', 'tmpfs', root]).status).toBe(0)
  return { dir: join(root, 'store'), done: () => void spawnSync('umount', [root]) }
}

describe.runIf(onLinux)('descriptor limits (child processes; Linux, for /proc and ulimit)', () => {
  it('10,000 queues are written, reopened and read back under ulimit -n 1024, every put acknowledged', () => {
    const { dir, done } = storeRoot()
    try {
      const report = runChild(1024, ['queues', dir, '10000', JSON.stringify(SMALL)])
      expect(report.error).toBeUndefined()
      expect(report.ok).toBe(true)
      expect(report.limit).toBe(1024)
      expect(report.statuses).toEqual({ PUT_OK: 10_000 })
      expect(report.acked).toBe(10_000)
      expect(report.mismatches).toEqual([])
      // A bounded number of descriptors, whatever the number of files.
      expect(report.maxOpenFiles).toBeLessThan(200)
      const reopened = report.afterReopen as {
        consumeQueueCount: number
        lastExitOK: boolean
        descriptors: { cached: number }
        mapping: { maps: number }
      }
      expect(reopened.consumeQueueCount).toBe(10_000)
      // The clean reopen mapped no consume-queue, index or old commit-log file: queues open on
      // first use, and only the file being written (outside the budget) is read.
      expect(reopened.mapping.maps).toBe(0)
      expect(reopened.lastExitOK).toBe(true)
      expect(reopened.descriptors.cached).toBeLessThanOrEqual(32)
      // close gave every descriptor of the store back: what is left is Node's own.
      expect(report.openFilesAfterClose).toBeLessThan(40)
    } finally {
      done()
    }
    // Seconds on a tmpfs; without one (not root) 10,000 file creations on a slow disk take longer.
  }, 180_000)

  it('a descriptor table kept full by the rest of the process yields statuses, then writes resume by themselves with nothing acknowledged lost', () => {
    const { dir, done } = storeRoot()
    try {
      const report = runChild(256, ['exhaust', dir, JSON.stringify(SMALL)])
      expect(report.error).toBeUndefined()
      expect(report.ok).toBe(true)
      expect(report.hogged).toBeGreaterThan(100)
      // Refused with statuses while no descriptor was free (no throw, no crash)...
      expect(report.refusedWhileFull).toBeGreaterThan(0)
      const whileFull = report.statusesWhileFull as Record<string, number>
      expect(Object.keys(whileFull).every((s) => ['PUT_OK', 'SERVICE_NOT_AVAILABLE', 'CREATE_MAPEDFILE_FAILED'].includes(s))).toBe(true)
      // ...and back as soon as descriptors were free, without a reopen.
      expect(report.putsUntilBack).toBeLessThanOrEqual(1)
      const statuses = report.statuses as Record<string, number>
      expect(report.acked).toBe(statuses.PUT_OK)
      expect(report.mismatchesBeforeReopen).toEqual([])
      expect(report.mismatches).toEqual([])
      expect((report.afterReopen as { lastExitOK: boolean }).lastExitOK).toBe(true)
    } finally {
      done()
    }
  })
})

describe('descriptor cache', () => {
  const caches: DescriptorCache[] = []
  afterEach(() => {
    for (const cache of caches.splice(0)) cache.trim(0)
  })

  it('keeps at most its capacity open, least recently used closed first, and reuses a cached descriptor', () => {
    const dir = tempDir('mqstore-fd-')
    const cache = new DescriptorCache(3)
    caches.push(cache)
    const files = Array.from({ length: 5 }, (_, i) => join(dir, `f${i}`))
    for (const file of files) fs.writeFileSync(file, 'x')
    const fds = files.map((file) => cache.use(file, false, (fd) => fd))
    expect(cache.size).toBe(3)
    expect(cache.opened).toBe(5)
    // f4 is cached: same descriptor, nothing opened. f0 was closed: opened again.
    expect(cache.use(files[4], false, (fd) => fd)).toBe(fds[4])
    expect(cache.opened).toBe(5)
    cache.use(files[0], false, (fd) => fd)
    expect(cache.opened).toBe(6)
    expect(cache.size).toBe(3)
    // A read-only descriptor is replaced by a writable one when a writer asks.
    cache.use(files[0], true, (fd) => fs.writeSync(fd, 'y', 0))
    expect(fs.readFileSync(files[0], 'utf8')).toBe('y')
  })

  it('a descriptor in use by async work is not closed under it', async () => {
    const dir = tempDir('mqstore-fd-')
    const cache = new DescriptorCache(1)
    caches.push(cache)
    fs.writeFileSync(join(dir, 'a'), 'a')
    fs.writeFileSync(join(dir, 'b'), 'b')
    let release: () => void = () => {}
    const gate = new Promise<void>((resolve) => (release = resolve))
    const pending = cache.useAsync(join(dir, 'a'), false, async (fd) => {
      await gate
      return fs.readFileSync(fd, 'utf8')
    })
    // Over capacity while 'a' is pinned: 'b' is opened, 'a' stays open.
    expect(cache.use(join(dir, 'b'), false, (fd) => fs.readFileSync(fd, 'utf8'))).toBe('b')
    cache.forget(join(dir, 'a'))
    release()
    expect(await pending).toBe('a')
  })

  it.runIf(onLinux)(
    'a full descriptor table is TOO_MANY_OPEN_FILES after the cache gave back its idle descriptors (Linux, child process)',
    () => {
      const dir = tempDir('mqstore-fd-')
      const script = `
      import * as fs from 'node:fs'
      import { DescriptorCache, openDescriptor } from ${JSON.stringify(new URL('../dist/lib/internals.js', import.meta.url).href)}
      const dir = ${JSON.stringify(dir)}
      for (let i = 0; i < 4; i++) fs.writeFileSync(dir + '/f' + i, 'x')
      const cache = new DescriptorCache(4)
      for (let i = 0; i < 3; i++) cache.use(dir + '/f' + i, false, () => {})
      const hog = []
      for (;;) { try { hog.push(fs.openSync('/dev/null', 'r')) } catch { break } }
      // The cache gives its three back and the open succeeds.
      const fd = openDescriptor(dir + '/f3', 'r', cache)
      const afterTrim = cache.size
      for (;;) { try { hog.push(fs.openSync('/dev/null', 'r')) } catch { break } }
      let code = null
      try { openDescriptor(dir + '/f0', 'r', cache) } catch (e) { code = e.code }
      fs.closeSync(fd)
      for (const h of hog) fs.closeSync(h)
      console.log(JSON.stringify({ afterTrim, code }))
    `
      const file = join(dir, 'script.mjs')
      fs.writeFileSync(file, script)
      const result = spawnSync('sh', ['-c', `ulimit -n 64 && exec '${process.execPath}' '${file}'`], { encoding: 'utf8', timeout: 30_000 })
      expect(result.stderr).toBe('')
      expect(JSON.parse(result.stdout)).toEqual({ afterTrim: 0, code: 'TOO_MANY_OPEN_FILES' })
    },
  )

  it('openDescriptor names the file in a typed error for other failures', () => {
    const error = (() => {
      try {
        openDescriptor(join(tempDir('mqstore-fd-'), 'missing'), 'r')
      } catch (e) {
        return e
      }
      return null
    })()
    expect(error).toBeInstanceOf(MQStoreError)
    expect((error as MQStoreError).code).toBe('IO_ERROR')
    expect((error as MQStoreError).message).toContain('missing')
  })
})

/** Units point at fake 100-byte records; the queue never asks the log for more than its minimum. */
const fakeLog: CommitLogView = { getMinOffset: () => 0, pickupStoreTimestamp: () => -1 }

describe('lazy mapping of consume-queue files', () => {
  const queues: ConsumeQueue[] = []
  afterEach(() => {
    for (const queue of queues.splice(0)) queue.shutdown(0)
  })

  function budgetAt(maxBytes: number, idleMs = 60_000): { budget: MappingBudget; clock: { now: number } } {
    const clock = { now: 1_000_000 }
    return { budget: new MappingBudget({ maxBytes, idleMs, clock: () => clock.now }), clock }
  }

  function queue(root: string, queueId: number, budget: MappingBudget): ConsumeQueue {
    const cq = new ConsumeQueue('t', queueId, root, 10 * CQ_STORE_UNIT_SIZE, fakeLog, { budget })
    queues.push(cq)
    cq.load()
    cq.recover()
    return cq
  }

  it('a held file stays mapped; once released it is unmapped, and the next read and write map it again transparently', () => {
    const root = tempDir('mqstore-lazy-')
    const { budget } = budgetAt(0)
    const cq = queue(root, 0, budget)
    for (let i = 0; i < 3; i++) expect(cq.putMessagePositionInfo(i * 100, 100, i, i)).toBe(true)
    const held = cq.getIndexBuffer(0)!
    expect(held).not.toBeNull()
    // Over budget, but a reader holds the file: nothing is unmapped under it.
    expect(budget.shrink(0)).toBe(0)
    expect(ConsumeQueue.readOffset(held.buffer, 2 * CQ_STORE_UNIT_SIZE)).toBe(200)
    held.release()
    expect(budget.shrink(0)).toBe(1)
    expect(budget.mappedFiles).toBe(0)
    // The writer's cached view is stale now: the next unit maps the file again and lands in it.
    expect(cq.putMessagePositionInfo(300, 100, 3, 3)).toBe(true)
    expect(budget.maps).toBe(2)
    const again = cq.getIndexBuffer(0)!
    expect([0, 1, 2, 3].map((i) => ConsumeQueue.readOffset(again.buffer, i * CQ_STORE_UNIT_SIZE))).toEqual([0, 100, 200, 300])
    again.release()
    // Flushing an unmapped file with unflushed units forces them without mapping it.
    expect(budget.shrink(0)).toBe(1)
    cq.flush(0)
    expect(budget.mappedFiles).toBe(0)
    cq.shutdown(0)
    const reopened = queue(root, 0, budget)
    expect(reopened.getMaxOffsetInQueue()).toBe(4)
  })

  it('mapping past the budget unmaps the least recently used idle files; a sweep unmaps files idle for the idle time', () => {
    const root = tempDir('mqstore-lazy-')
    const fileSize = 10 * CQ_STORE_UNIT_SIZE
    const { budget, clock } = budgetAt(3 * fileSize, 5_000)
    const cqs = Array.from({ length: 6 }, (_, i) => queue(root, i, budget))
    for (const [i, cq] of cqs.entries()) {
      clock.now += 10
      expect(cq.putMessagePositionInfo(i * 100, 100, 0, 0)).toBe(true)
    }
    expect(budget.mappedFiles).toBe(3)
    expect(budget.mappedBytes).toBe(3 * fileSize)
    expect(budget.unmaps).toBe(3)
    // Queue 3 was used before 4 and 5; reading queue 0 again (a second later) unmaps it.
    clock.now += 1_000
    const view = cqs[0].getIndexBuffer(0)!
    expect(ConsumeQueue.readOffset(view.buffer, 0)).toBe(0)
    view.release()
    expect(budget.unmaps).toBe(4)
    clock.now += 3_900
    expect(budget.sweep()).toBe(0)
    clock.now += 100
    expect(budget.sweep()).toBe(2) // queues 4 and 5, unused for 5 s; queue 0 was read since
    clock.now += 1_000
    expect(budget.sweep()).toBe(1)
    expect(budget.mappedBytes).toBe(0)
    for (const [i, cq] of cqs.entries()) expect(cq.getLastOffset()).toBe(i * 100 + 100)
  })

  it('a store under a small budget serves a cold queue with one map while a reader keeps the messages it took from unmapped files', async () => {
    const dir = tempDir('mqstore-lazy-')
    const clock = { now: () => now }
    let now = 1_000_000
    const fileSize = 100 * CQ_STORE_UNIT_SIZE
    const store = await MessageStore.open(dir, {
      ...SMALL,
      mappingBudgetBytes: 2 * fileSize,
      mappingIdleMs: 1_000,
      flushIntervalConsumeQueue: 10,
      clock,
    })
    try {
      for (let q = 0; q < 8; q++) {
        const results = await store.putMessages([0, 1].map((n) => ({ topic: 'lazy', queueId: q, body: Buffer.from(`q${q}-m${n}`) })))
        expect(results.map((r) => r.status)).toEqual(['PUT_OK', 'PUT_OK'])
      }
      expect(store.stats().mapping.mappedFiles).toBeLessThanOrEqual(2)
      const held = store.getMessage('g', 'lazy', 0, 0, 2)
      expect(held.status).toBe('FOUND')
      // Every other queue is read: queue 0's file goes out of the budget.
      for (let q = 1; q < 8; q++) expect(store.getMessage('g', 'lazy', q, 0, 2).messages).toHaveLength(2)
      const before = store.stats().mapping
      expect(before.unmaps).toBeGreaterThan(0)
      expect(held.messages.map((m) => Buffer.from(m.body).toString())).toEqual(['q0-m0', 'q0-m1'])
      // A cold queue: one map, the same messages.
      const cold = store.getMessage('g', 'lazy', 0, 0, 2)
      expect(cold.messages.map((m) => Buffer.from(m.body).toString())).toEqual(['q0-m0', 'q0-m1'])
      expect(store.stats().mapping.maps).toBe(before.maps + 1)
      // Idle files are unmapped by the consume-queue flush pass once the clock passes the idle time.
      now += 2_000
      await vi.waitFor(() => expect(store.stats().mapping.mappedFiles).toBe(0), { timeout: 10_000, interval: 10 })
      expect(held.messages.map((m) => Buffer.from(m.body).toString())).toEqual(['q0-m0', 'q0-m1'])
      // Writes to unmapped queues go on, and survive a reopen.
      expect((await store.putMessage({ topic: 'lazy', queueId: 3, body: Buffer.from('q3-m2') })).queueOffset).toBe(2)
    } finally {
      await store.close()
    }
    const reopened = await MessageStore.open(dir, SMALL)
    try {
      expect(reopened.getMessage('g', 'lazy', 3, 0, 8).messages.map((m) => Buffer.from(m.body).toString())).toEqual([
        'q3-m0',
        'q3-m1',
        'q3-m2',
      ])
    } finally {
      await reopened.close()
    }
  })
})

describe('deferred queues after a clean close', () => {
  it('a clean reopen opens no queue; the first put, read or time lookup of a queue opens it with its right offsets', async () => {
    const dir = tempDir('mqstore-deferred-')
    let store = await MessageStore.open(dir, SMALL)
    for (let q = 0; q < 6; q++) {
      await store.putMessages([0, 1, 2].map((n) => ({ topic: 'd', queueId: q, body: Buffer.from(`q${q}-m${n}`) })))
    }
    await store.close()
    store = await MessageStore.open(dir, SMALL)
    try {
      expect(store.stats().consumeQueueCount).toBe(6)
      expect(store.stats().mapping.maps).toBe(0)
      // A put to a deferred queue continues its queue offsets (the commit log asks the queue).
      const put = await store.putMessage({ topic: 'd', queueId: 4, body: Buffer.from('q4-m3') })
      expect(put.status).toBe('PUT_OK')
      expect(put.queueOffset).toBe(3)
      expect(store.getMaxOffsetInQueue('d', 2)).toBe(3)
      expect(store.getMessage('g', 'd', 4, 0, 8).messages.map((m) => Buffer.from(m.body).toString())).toEqual([
        'q4-m0',
        'q4-m1',
        'q4-m2',
        'q4-m3',
      ])
      expect(store.getOffsetInQueueByTime('d', 5, Date.now() + 60_000)).toBeGreaterThanOrEqual(2)
      // A topic's queues are known without opening them.
      expect(store.listTopics().find((t) => t.topic === 'd')?.readQueueNums).toBe(6)
      expect(store.stats().repairs).toEqual([])
    } finally {
      await store.close()
    }
    // Queues never opened keep their units through the next clean close and reopen.
    store = await MessageStore.open(dir, SMALL)
    try {
      for (let q = 0; q < 6; q++) expect(store.getMessage('g', 'd', q, 0, 8).messages).toHaveLength(q === 4 ? 4 : 3)
      expect(store.stats().repairs).toEqual([])
    } finally {
      await store.close()
    }
  })
})

describe('cheap queue creation', () => {
  it('a new consume-queue file takes no fsync chain: no temp file, and its first flush makes it durable', async () => {
    const dir = tempDir('mqstore-cheap-')
    const store = await MessageStore.open(dir, SMALL)
    try {
      await store.putMessage({ topic: 'cheap', queueId: 0, body: Buffer.from('x') })
      const queueDir = join(dir, 'consumequeue', 'cheap', '0')
      expect(fs.readdirSync(queueDir)).toEqual(['00000000000000000000'])
      expect(fs.statSync(join(queueDir, '00000000000000000000')).size).toBe(SMALL.mappedFileSizeConsumeQueue)
    } finally {
      await store.close()
    }
  })

  it('a last consume-queue file cut short by a crash before its first flush is dropped at open and its units dispatched again', async () => {
    const dir = tempDir('mqstore-cheap-')
    const store = await MessageStore.open(dir, SMALL)
    for (let q = 0; q < 3; q++) await store.putMessage({ topic: 'cheap', queueId: q, body: Buffer.from(`m${q}`) })
    await store.close()
    // What a power cut leaves of a file whose size never reached the disk, and an unclean exit.
    fs.truncateSync(join(dir, 'consumequeue', 'cheap', '1', '00000000000000000000'), 0)
    fs.writeFileSync(join(dir, 'abort'), '')
    const reopened = await MessageStore.open(dir, SMALL)
    try {
      for (let q = 0; q < 3; q++) {
        expect(reopened.getMessage('g', 'cheap', q, 0, 4).messages.map((m) => Buffer.from(m.body).toString())).toEqual([`m${q}`])
      }
    } finally {
      await reopened.close()
    }
  })
})

describe('close', () => {
  it.runIf(onLinux)(
    'releases every mapping, descriptor and the lock when a step fails, and throws a typed error (Linux, for /proc)',
    async () => {
      const dir = tempDir('mqstore-close-')
      const store = await MessageStore.open(dir, SMALL)
      for (let q = 0; q < 20; q++) await store.putMessage({ topic: 'c', queueId: q, body: Buffer.from('x') })
      // A consume queue deleted under the running store: its first flush at close cannot open it.
      fs.rmSync(join(dir, 'consumequeue', 'c', '5'), { recursive: true, force: true })
      const error = await store.close().then(
        () => null,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(MQStoreError)
      expect((error as MQStoreError).code).toBe('IO_ERROR')
      expect((error as MQStoreError).message).toContain('flush')
      const maps = fs
        .readFileSync('/proc/self/maps', 'utf8')
        .split('\n')
        .filter((line) => line.includes(dir))
      expect(maps).toEqual([])
      const fds = fs.readdirSync('/proc/self/fd').flatMap((fd) => {
        try {
          return [fs.readlinkSync(`/proc/self/fd/${fd}`)]
        } catch {
          return []
        }
      })
      expect(fds.filter((target) => target.startsWith(dir))).toEqual([])
      // The lock is free: the store opens again and recovers, as the close did not vouch for it.
      const reopened = await MessageStore.open(dir, SMALL)
      try {
        expect(reopened.stats().lastExitOK).toBe(false)
        for (const q of [5, 19]) expect(reopened.getMessage('g', 'c', q, 0, 1).messages).toHaveLength(1)
      } finally {
        await reopened.close()
      }
    },
  )
})
