// Durability under I/O errors: a failed sync stops the store instead of being retried into a false
// "durable"; directory syncs find the right directory and report errors; segments opened for
// writing have their blocks reserved, so a sparse file cannot SIGBUS on a full disk.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MQStoreError } from '../lib/errors.js'
import type { MapHandle } from '../lib/native.js'
import { syncDirectory } from '../lib/store/mapped/directory.js'
import { MappedFile } from '../lib/store/mapped/mapped-file.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { repoRoot, tempDir } from './helpers/tmp.js'
import { interposeMappings, wrapMapHandle } from './helpers/map-handle.js'
import { interposeFdatasync } from './helpers/fdatasync.js'
import { mountTmpfs, tmpfs, unmountTmpfs } from './helpers/tmpfs.js'

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-durability-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

/** An EIO shaped like the addon's system errors. */
function eio(syscall: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`EIO: input/output error, ${syscall}`), { code: 'EIO', errno: -5, syscall })
}

/**
 * Interposes on map() at the binding boundary and on fdatasync (SYNC_FLUSH's staged commit log
 * syncs with it): every handle's sync and syncAsync, and every fdatasync, fail with EIO while
 * `failures` > 0 (one failure per call), as a writeback error is reported once by the kernel.
 */
function injectSyncErrors(): { fail(count: number): void; restore(): void } {
  let failures = 0
  const failing = (): boolean => {
    if (failures === 0) return false
    failures--
    return true
  }
  const wrap = (handle: MapHandle): MapHandle =>
    wrapMapHandle(handle, {
      sync(offset, length) {
        if (failing()) throw eio('msync')
        handle.sync(offset, length)
      },
      syncAsync: (offset, length) => (failing() ? Promise.reject(eio('msync')) : handle.syncAsync(offset, length)),
    })
  const restoreNative = interposeMappings((handle) => wrap(handle))
  const restoreFs = interposeFdatasync({
    async: (fd, callback, original) => (failing() ? queueMicrotask(() => callback(eio('fdatasync'))) : original(fd, callback)),
    sync: (fd, original) => {
      if (failing()) throw eio('fdatasync')
      original(fd)
    },
  })
  return {
    fail(count) {
      failures = count
    },
    restore() {
      restoreFs()
      restoreNative()
    },
  }
}

const SMALL: OpenOptions = { mappedFileSizeCommitLog: 1 << 20, mappedFileSizeConsumeQueue: 20 * 1024, messageIndexEnable: false }

describe('a failed sync stops the store (fail-stop)', () => {
  let injection: ReturnType<typeof injectSyncErrors>
  beforeEach(() => {
    injection = injectSyncErrors()
  })
  afterEach(() => {
    injection.restore()
  })

  it('SYNC_FLUSH: the waiting put gets FLUSH_DISK_TIMEOUT, later puts SERVICE_NOT_AVAILABLE although a retried sync would succeed; reopening recovers', async () => {
    const logs: string[] = []
    const options: OpenOptions = { ...SMALL, flushDiskType: 'SYNC_FLUSH', logger: (level, message) => logs.push(`${level} ${message}`) }
    let store = await MessageStore.open(dir, options)
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'a' })).status).toBe('PUT_OK')
    const flushedBefore = store.stats().commitLogFlushedOffset
    expect(flushedBefore).toBeGreaterThan(0)

    // One error, as the kernel reports one writeback error: the next sync would succeed.
    injection.fail(1)
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'b' })).status).toBe('FLUSH_DISK_TIMEOUT')
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'c' })).status).toBe('SERVICE_NOT_AVAILABLE')
    expect((await store.putMessages([{ topic: 't', queueId: 0, body: 'd' }]))[0]?.status).toBe('SERVICE_NOT_AVAILABLE')

    const stats = store.stats()
    expect(stats.commitLogFlushedOffset).toBe(flushedBefore)
    // Only the group commit that synced counts; the failed one answered its put all the same.
    expect([stats.groupCommitTimesTotal, stats.groupCommitRequestsTotal]).toEqual([1, 1])
    expect(stats.runningFlags.flags.map((f) => f.name)).toEqual(['NOT_WRITEABLE'])
    expect(stats.runningFlags.flags[0]?.reason).toMatch(/sync failed.*EIO.*reopen/)
    expect(logs.some((l) => l.includes('NOT_WRITEABLE set') && l.includes('EIO'))).toBe(true)

    await store.close()
    // The close vouches for nothing: the next open recovers from the files.
    expect(fs.existsSync(join(dir, 'abort'))).toBe(true)

    store = await MessageStore.open(dir, options)
    expect(store.stats().lastExitOK).toBe(false)
    expect(store.stats().runningFlags.value).toBe(0)
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'e' })).status).toBe('PUT_OK')
    const bodies = store.getMessage('g', 't', 0, 0, 16).messages.map((m) => m.body.toString())
    // 'b' reached the page cache and, with the machine still up, the file: recovery keeps it.
    expect(bodies).toEqual(['a', 'b', 'e'])
    await store.close()
  })

  it('ASYNC_FLUSH: the flush loop stops at the first sync error and puts are refused from then on', async () => {
    let failed: () => void = () => {}
    const failedOnce = new Promise<void>((resolve) => {
      failed = resolve
    })
    const logs: string[] = []
    const store = await MessageStore.open(dir, {
      ...SMALL,
      flushDiskType: 'ASYNC_FLUSH',
      flushCommitLogLeastPages: 0,
      logger: (level, message) => {
        logs.push(`${level} ${message}`)
        if (level === 'error' && message.includes('EIO')) failed()
      },
    })
    injection.fail(1)
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'x' })).status).toBe('PUT_OK')
    await failedOnce
    expect((await store.putMessage({ topic: 't', queueId: 0, body: 'y' })).status).toBe('SERVICE_NOT_AVAILABLE')
    expect(store.stats().commitLogFlushedOffset).toBe(0)
    expect(store.stats().runningFlags.flags[0]?.name).toBe('NOT_WRITEABLE')
    await store.close()
    expect(fs.existsSync(join(dir, 'abort'))).toBe(true)
  })
})

// strace shows which directory each fsync reaches; without it (or without ptrace) the test says so.
const strace = spawnSync('strace', ['-o', '/dev/null', 'true']).status === 0
describe('directory sync', () => {
  it('reports a failure instead of swallowing it', () => {
    let error: unknown
    try {
      syncDirectory(join(dir, 'missing', 'file'))
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(MQStoreError)
    expect((error as MQStoreError).code).toBe('IO_ERROR')
    expect((error as Error).message).toContain('ENOENT')
  })

  it.runIf(strace)('a relative name syncs the working directory, and destroy syncs the directory after the unlink (strace)', () => {
    const script = `
        import { syncDirectory } from ${JSON.stringify(new URL('dist/lib/store/mapped/directory.js', `file://${repoRoot}`).href)}
        import { MappedFile } from ${JSON.stringify(new URL('dist/lib/store/mapped/mapped-file.js', `file://${repoRoot}`).href)}
        import * as fs from 'node:fs'
        process.chdir(process.argv[2])
        fs.mkdirSync('segments')
        syncDirectory('abort')
        const file = MappedFile.create(process.argv[2] + '/segments/00000000000000000000', 4096)
        process.stdout.write('destroy\\n')
        file.destroy(0)
      `
    fs.writeFileSync(join(dir, 'script.mjs'), script)
    const work = join(dir, 'work')
    fs.mkdirSync(work)
    const trace = join(dir, 'trace')
    const result = spawnSync(
      'strace',
      ['-f', '-y', '-e', 'trace=fsync,unlink,unlinkat', '-o', trace, process.execPath, join(dir, 'script.mjs'), work],
      {
        encoding: 'utf8',
      },
    )
    expect(result.status, result.stderr).toBe(0)
    const lines = fs.readFileSync(trace, 'utf8').split('\n')
    const dirSyncs = (path: string) => lines.flatMap((l, i) => (new RegExp(`fsync\\(\\d+<${path}>\\) = 0`).test(l) ? [i] : []))
    // syncDirectory('abort'): the directory of a bare name is the working directory.
    expect(dirSyncs(work).length).toBeGreaterThan(0)
    const unlink = lines.findIndex((l) => /unlink(at)?\(.*00000000000000000000"/.test(l))
    expect(unlink).toBeGreaterThan(-1)
    expect(dirSyncs(join(work, 'segments')).some((i) => i > unlink)).toBe(true)
  })
  it.runIf(!strace)('the directory-sync trace needs strace (with ptrace allowed), which this machine lacks', () => {
    expect(strace).toBe(false)
  })
})

describe('blocks are reserved when a segment is opened for writing', () => {
  it('a sparse segment has all its blocks once opened for writing; a read-only open leaves it alone', () => {
    const name = join(dir, '00000000000000000000')
    fs.writeFileSync(name, '')
    fs.truncateSync(name, 1 << 20)
    expect(fs.statSync(name).blocks).toBe(0)
    MappedFile.open(name, 1 << 20, { readOnly: true }).shutdown(0)
    expect(fs.statSync(name).blocks).toBe(0)
    const file = MappedFile.open(name, 1 << 20)
    expect(fs.statSync(name).blocks * 512).toBeGreaterThanOrEqual(1 << 20)
    file.shutdown(0)
  })

  it('opening for writing keeps the modification time retention reads the file age from, sparse or not', () => {
    const old = new Date(Date.now() - 100 * 3600_000)
    for (const sparse of [false, true]) {
      const name = join(dir, `0000000000000000000${sparse ? 1 : 0}`)
      fs.writeFileSync(name, sparse ? '' : Buffer.alloc(1 << 20, 1))
      if (sparse) fs.truncateSync(name, 1 << 20)
      fs.utimesSync(name, old, old)
      MappedFile.open(name, 1 << 20, { fileFromOffset: 0 }).shutdown(0)
      expect(Math.round(fs.statSync(name).mtimeMs / 1000)).toBe(Math.round(old.getTime() / 1000))
    }
  })

  it('reserving keeps the data already in the file', () => {
    const name = join(dir, '00000000000000000000')
    fs.writeFileSync(name, '')
    fs.truncateSync(name, 1 << 20)
    const fd = fs.openSync(name, 'r+')
    fs.writeSync(fd, 'kept', 300_000)
    fs.closeSync(fd)
    const file = MappedFile.open(name, 1 << 20)
    file.shutdown(0)
    expect(fs.readFileSync(name).subarray(300_000, 300_004).toString()).toBe('kept')
  })
})

describe.runIf(tmpfs.ok)('a sparse segment on a full disk (tmpfs)', () => {
  it('puts into it are refused with CREATE_MAPEDFILE_FAILED and the reason, never a SIGBUS (child process)', () => {
    const mount = join(dir, 'mnt')
    fs.mkdirSync(mount)
    mountTmpfs(mount, '1m')
    try {
      // A restored store whose active commit-log file is sparse and bigger than the free space.
      // Blocks are reserved in chunks from the file start before the writer reaches them (holes
      // included), so the put that would need blocks the disk does not have is refused.
      fs.mkdirSync(join(mount, 'commitlog'))
      const segment = join(mount, 'commitlog', '00000000000000000000')
      fs.writeFileSync(segment, '')
      fs.truncateSync(segment, 4 << 20)
      const script = `
        import { MessageStore } from ${JSON.stringify(new URL('dist/lib/index.js', `file://${repoRoot}`).href)}
        const store = await MessageStore.open(process.argv[2], { mappedFileSizeCommitLog: 4 << 20, mappedFileSizeConsumeQueue: 20 * 1024, messageIndexEnable: false })
        const results = []
        for (let i = 0; i < 64; i++) results.push(await store.putMessage({ topic: 't', queueId: 0, body: Buffer.alloc(60_000, i) }))
        await store.close()
        console.log(JSON.stringify({ statuses: [...new Set(results.map((r) => r.status))], reason: results.at(-1).reason }))
      `
      fs.writeFileSync(join(dir, 'open.mjs'), script)
      const result = spawnSync(process.execPath, [join(dir, 'open.mjs'), mount], { encoding: 'utf8', timeout: 60_000 })
      expect(result.signal).toBeNull()
      const outcome = JSON.parse(result.stdout.trim())
      expect(outcome.statuses).toContain('CREATE_MAPEDFILE_FAILED')
      expect(outcome.reason).toMatch(/cannot reserve .*ENOSPC/)
    } finally {
      unmountTmpfs(mount)
    }
  })
})
describe.runIf(!tmpfs.ok)(`a sparse segment on a full disk (skipped: ${tmpfs.reason})`, () => {
  it(`is skipped because ${tmpfs.reason}`, () => {
    expect(tmpfs.ok).toBe(false)
  })
})
