import * as fs from 'node:fs'
import * as os from 'node:os'
import * as util from 'node:util'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { native } from '../lib/native.js'
import { distInternals, runNodeScript, tempDir } from './helpers/tmp.js'
import { mountTmpfs, tmpfs, unmountTmpfs } from './helpers/tmpfs.js'

let dir: string
beforeEach(() => {
  dir = tempDir()
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

function preallocated(name: string, size: number): number {
  const fd = fs.openSync(join(dir, name), 'w+')
  native.allocate(fd, 0, size)
  return fd
}

describe('native addon', () => {
  it('reports the page size read at run time', () => {
    expect(native.pageSize).toBeGreaterThanOrEqual(4096)
    expect(native.pageSize & (native.pageSize - 1)).toBe(0)
  })

  it('allocate makes the file whole: its blocks are reserved, not sparse', () => {
    const fd = preallocated('whole', 1 << 20)
    const st = fs.fstatSync(fd)
    expect(st.size).toBe(1 << 20)
    expect(st.blocks * 512).toBeGreaterThanOrEqual(1 << 20)
    fs.closeSync(fd)
  })

  it('writes through a shared mapping reach the file and read back after reopen', () => {
    const fd = preallocated('shared', 65536)
    const handle = native.map(fd, 65536, true)
    const view = Buffer.from(handle.buffer, 100, 11)
    view.write('hello world')
    handle.sync(0, 65536)
    handle.close()
    fs.closeSync(fd)
    expect(fs.readFileSync(join(dir, 'shared')).subarray(100, 111).toString()).toBe('hello world')
  })

  it('a read-only map never writes to the file, even when JavaScript writes to its view', () => {
    fs.writeFileSync(join(dir, 'ro'), Buffer.alloc(8192, 1))
    const fd = fs.openSync(join(dir, 'ro'), 'r')
    const handle = native.map(fd, 8192, false)
    expect(handle.writable).toBe(false)
    const view = Buffer.from(handle.buffer)
    expect(view[0]).toBe(1)
    view[0] = 9
    handle.close()
    fs.closeSync(fd)
    expect(fs.readFileSync(join(dir, 'ro'))[0]).toBe(1)
  })

  it('close is idempotent and empties every view instead of leaving it dangling', () => {
    const fd = preallocated('close', 8192)
    const handle = native.map(fd, 8192, true)
    const view = Buffer.from(handle.buffer, 0, 4096)
    view[0] = 7
    handle.close()
    handle.close()
    expect(handle.closed).toBe(true)
    expect(view.length).toBe(0)
    expect(view[0]).toBeUndefined()
    expect(handle.buffer.byteLength).toBe(0)
    expect(() => view.readInt32BE(0)).toThrow(RangeError)
    expect(() => handle.sync(0, 1)).toThrow(expect.objectContaining({ code: 'ERR_MAPPING_CLOSED' }))
    expect(() => handle.syncAsync(0, 1)).toThrow(expect.objectContaining({ code: 'ERR_MAPPING_CLOSED' }))
    fs.closeSync(fd)
  })

  it('system call failures carry the errno code and the syscall name', () => {
    const fd = preallocated('short', 4096)
    let error: NodeJS.ErrnoException | undefined
    try {
      native.map(fd, 8192, true)
    } catch (e) {
      error = e as NodeJS.ErrnoException
    }
    expect(error?.code).toBe('EINVAL')
    expect(error?.syscall).toBe('mmap')
    expect(error?.errno).toBeLessThan(0)
    expect(() => native.allocate(-1 as number, 0, 1)).toThrow(RangeError)
    expect(() => native.allocate(999_999, 0, 4096)).toThrow(expect.objectContaining({ code: 'EBADF' }))
    fs.closeSync(fd)
  })

  it('rejects ranges outside the mapping and bad argument types', () => {
    const fd = preallocated('ranges', 8192)
    const handle = native.map(fd, 8192, true)
    expect(() => handle.sync(8000, 500)).toThrow(RangeError)
    expect(() => handle.advise(0, 8192, 'bogus' as never)).toThrow(RangeError)
    expect(() => handle.sync('0' as unknown as number, 1)).toThrow(TypeError)
    expect(() => native.map(fd, 0, true)).toThrow(RangeError)
    handle.advise(0, 8192, 'willneed')
    handle.close()
    fs.closeSync(fd)
  })

  it('an async msync does not block the event loop, and close waits for it before unmapping', async () => {
    const size = 64 << 20
    const fd = preallocated('async', size)
    const handle = native.map(fd, size, true)
    const view = Buffer.from(handle.buffer)
    for (let at = 0; at < size; at += 4096) view[at] = 1
    const pending = handle.syncAsync(0, size)
    // Closing while the msync runs must neither crash nor fail the msync.
    handle.close()
    expect(view.length).toBe(0)
    await expect(pending).resolves.toBeUndefined()
    fs.closeSync(fd)
    expect(fs.readFileSync(join(dir, 'async'))[4096]).toBe(1)
  })

  it('syncAsync writes the bytes after a successful msync, copied at the call, into its own descriptor', async () => {
    const size = 1 << 20
    const fd = preallocated('synced', size)
    const handle = native.map(fd, size, true)
    Buffer.from(handle.buffer).fill(7, 0, 8192)
    const markFd = fs.openSync(join(dir, 'mark'), 'w+')
    const bytes = Buffer.from('after the sync')
    const pending = handle.syncAsync(0, 8192, markFd, bytes, 3)
    // The caller may reuse its array and close its descriptor at once.
    bytes.fill(0)
    fs.closeSync(markFd)
    await expect(pending).resolves.toBeUndefined()
    expect(fs.readFileSync(join(dir, 'mark')).toString('latin1')).toBe('\0\0\0after the sync')
    expect(fs.readFileSync(join(dir, 'synced'))[8191]).toBe(7)
    // A write that fails (a descriptor opened read-only) rejects naming pwrite; the msync still ran.
    const readOnly = fs.openSync(join(dir, 'mark'), 'r')
    await expect(handle.syncAsync(0, 4096, readOnly, Buffer.from('x'), 0)).rejects.toMatchObject({ code: 'EBADF', syscall: 'pwrite' })
    fs.closeSync(readOnly)
    expect(() => handle.syncAsync(0, 4096, 1, 'x' as never, 0)).toThrow(TypeError)
    expect(() => handle.syncAsync(0, 4096, 1, Buffer.from('x'), -1)).toThrow(RangeError)
    handle.close()
    fs.closeSync(fd)
  })

  it('a timer keeps firing while a large msync runs on the pool', async () => {
    const size = 128 << 20
    const fd = preallocated('timer', size)
    const handle = native.map(fd, size, true)
    const view = Buffer.from(handle.buffer)
    let ticks = 0
    let ticksDuringSync = 0
    const timer = setInterval(() => ticks++, 0)
    for (let round = 0; round < 3; round++) {
      for (let at = round; at < size; at += 4096) view[at] = round + 1
      const before = ticks
      // Were the msync on the main thread, no timer could fire between the call and its end.
      await handle.syncAsync(0, size)
      ticksDuringSync += ticks - before
    }
    clearInterval(timer)
    expect(ticksDuringSync).toBeGreaterThan(0)
    handle.close()
    fs.closeSync(fd)
  })

  it('warmAsync faults pages in without changing their content', async () => {
    const fd = preallocated('warm', 1 << 20)
    const handle = native.map(fd, 1 << 20, true)
    Buffer.from(handle.buffer)[5000] = 42
    await handle.warmAsync(0, 1 << 20)
    expect(Buffer.from(handle.buffer)[5000]).toBe(42)
    handle.close()
    fs.closeSync(fd)
  })

  it('dropAsync unmaps the pages and starts their write-back, keeping every byte (Linux: /proc/self/smaps)', async () => {
    const size = 1 << 20
    const name = join(dir, 'drop')
    const fd = preallocated('drop', size)
    const handle = native.map(fd, size, true)
    const bytes = Buffer.from(handle.buffer)
    for (let at = 0; at < size; at += 4096) bytes.writeUInt32BE(at, at)
    const rssKb = (): number => {
      const lines = fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')
      const at = lines.findIndex((line) => line.endsWith(name))
      return Number(/^Rss:\s+(\d+)/m.exec(lines.slice(at, at + 8).join('\n'))?.[1])
    }
    const before = process.platform === 'linux' ? rssKb() : 0
    await handle.dropAsync(0, size, fd)
    if (process.platform === 'linux') {
      expect(before).toBeGreaterThanOrEqual(size / 1024)
      expect(rssKb()).toBe(0)
    }
    // The bytes were in the page cache all along: through the mapping and through the file.
    const read = fs.readFileSync(name)
    for (let at = 0; at < size; at += 4096) {
      expect(bytes.readUInt32BE(at)).toBe(at)
      expect(read.readUInt32BE(at)).toBe(at)
    }
    // Without a descriptor it only drops; the arguments are checked like the other calls'.
    await handle.dropAsync(0, 4096)
    expect(() => handle.dropAsync(0, size + 1, fd)).toThrow(RangeError)
    expect(() => handle.dropAsync(0, 4096, -1)).toThrow(RangeError)
    fs.closeSync(fd)
    if (process.platform === 'linux') expect(() => handle.dropAsync(0, 4096, fd)).toThrow(/EBADF/)
    handle.close()
    expect(() => handle.dropAsync(0, 4096)).toThrow(expect.objectContaining({ code: 'ERR_MAPPING_CLOSED' }))
  })

  it('mlock is best effort: it either succeeds or throws a system error', () => {
    const fd = preallocated('lock', 65536)
    const handle = native.map(fd, 65536, true)
    try {
      handle.lock(0, 65536)
      handle.unlock(0, 65536)
    } catch (error) {
      expect(['ENOMEM', 'EPERM', 'EAGAIN']).toContain((error as NodeJS.ErrnoException).code)
    }
    handle.close()
    fs.closeSync(fd)
  })

  it('flock excludes a second open file description and is released by unlock', () => {
    fs.writeFileSync(join(dir, 'lock'), 'lock')
    const a = fs.openSync(join(dir, 'lock'), 'r+')
    const b = fs.openSync(join(dir, 'lock'), 'r+')
    native.lockFile(a)
    expect(() => native.lockFile(b)).toThrow(expect.objectContaining({ syscall: 'flock' }))
    native.unlockFile(a)
    native.lockFile(b)
    fs.closeSync(a)
    fs.closeSync(b)
  })

  it('reading a view after the process closed every mapping exits cleanly (child process)', () => {
    const result = runNodeScript(
      `
      import * as fs from 'node:fs'
      import { native } from ${JSON.stringify(distInternals)}
      const file = process.argv[2]
      const fd = fs.openSync(file, 'w+')
      native.allocate(fd, 0, 1 << 16)
      const handle = native.map(fd, 1 << 16, true)
      const view = Buffer.from(handle.buffer)
      view[10] = 5
      handle.close()
      fs.closeSync(fd)
      fs.rmSync(file)
      let caught = 0
      try { view.readUInt8(10) } catch { caught++ }
      console.log(JSON.stringify({ length: view.length, value: view[10] ?? null, caught }))
    `,
      [join(dir, 'child')],
    )
    expect(result.signal).toBeNull()
    expect(result.status).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({ length: 0, value: null, caught: 1 })
  })

  it('mappings left open are unmapped by the environment cleanup hook at worker exit', () => {
    const result = runNodeScript(
      `
      import { Worker } from 'node:worker_threads'
      const code = \`
        const { native } = await import(${JSON.stringify(distInternals)})
        const fs = await import('node:fs')
        const fd = fs.openSync(process.env.FILE, 'w+')
        native.allocate(fd, 0, 1 << 20)
        globalThis.keep = Buffer.from(native.map(fd, 1 << 20, true).buffer)
        globalThis.keep[0] = 1
      \`
      const worker = new Worker(code, { eval: true, env: { FILE: process.argv[2] } })
      worker.on('exit', (code) => console.log('worker exit', code))
    `,
      [join(dir, 'worker')],
    )
    expect(result.signal).toBeNull()
    expect(result.status).toBe(0)
    expect(result.stdout).toContain('worker exit 0')
  })

  // A call whose environment is torn down under it fails inside the addon; node-addon-api could
  // not throw that failure to JavaScript any more and aborted the process (SIGABRT), every time.
  for (const end of ['process.exit', 'worker.terminate'] as const) {
    it(`workers mapping and closing in a loop survive ${end}() in the middle of their calls`, () => {
      const script = (file: string) =>
        runNodeScript(
          `
        import { Worker } from 'node:worker_threads'
        const code = \`
          const { native } = await import(${JSON.stringify(distInternals)})
          const fs = await import('node:fs')
          const { workerData } = await import('node:worker_threads')
          const fd = fs.openSync(workerData.file, 'w+')
          native.allocate(fd, 0, 1 << 16)
          for (let n = 1; ; n++) {
            const handle = native.map(fd, 1 << 16, true)
            new Uint8Array(handle.buffer)[0] = n & 0xff
            handle.warmAsync(0, 1 << 16).catch(() => {})
            handle.close()
            if (n === 200) Atomics.store(workerData.started, 0, 1)
          }
        \`
        const started = new Int32Array(new SharedArrayBuffer(4))
        const workers = [0, 1].map((k) => new Worker(code, { eval: true, workerData: { file: process.argv[2] + k, started } }))
        while (Atomics.load(started, 0) === 0) await new Promise((resolve) => setTimeout(resolve, 1))
        console.log('looping')
        if (${JSON.stringify(end)} === 'worker.terminate') await Promise.all(workers.map((w) => w.terminate()))
        process.exit(0)
      `,
          [file],
        )
      for (let run = 0; run < 3; run++) {
        const result = script(join(dir, `loop-${run}-`))
        expect(result.stderr).not.toContain('terminate called')
        expect(result.signal).toBeNull()
        expect(result.status).toBe(0)
        expect(result.stdout).toContain('looping')
      }
    })
  }
})

describe('native errors and async work at the edges', () => {
  it('names every errno as Node and libuv do, ENOLCK, ENXIO and EHWPOISON included', () => {
    const names = os.constants.errno as Record<string, number>
    for (const [name, value] of Object.entries(names)) {
      const libuv = util.getSystemErrorName(-value)
      // Where libuv knows the errno its spelling wins (ENOTSUP over EOPNOTSUPP on Linux);
      // otherwise the name is the errno's own.
      const expected = libuv.startsWith('Unknown system error') ? name : libuv
      const aliases = Object.entries(names)
        .filter(([, v]) => v === value)
        .map(([n]) => n)
      expect(aliases, `errno ${value}`).toContain(native.errnoName(value))
      expect(native.errnoName(value), `errno ${value} (${name})`).toBe(expected)
      expect(native.errnoName(-value)).toBe(expected)
    }
    expect(native.errnoName(names.ENOLCK ?? -1)).toBe('ENOLCK')
    expect(native.errnoName(names.ENXIO ?? -1)).toBe('ENXIO')
    if (process.platform === 'linux') expect(native.errnoName(133)).toBe('EHWPOISON')
    expect(native.errnoName(100_000)).toBe('UNKNOWN')
  })

  // MADV_POPULATE_* arrived in Linux 5.14; older kernels take the touch-every-page path, which
  // faults past the end of a file like any access would.
  const [major = 0, minor = 0] = os
    .release()
    .split('.')
    .map((n) => Number.parseInt(n, 10))
  const hasPopulate = process.platform === 'linux' && (major > 5 || (major === 5 && minor >= 14))
  it.runIf(hasPopulate)(
    'warming pages past the end of a truncated file rejects with EFAULT instead of a SIGBUS on the pool (Linux >= 5.14)',
    () => {
      const result = runNodeScript(
        `
        import * as fs from 'node:fs'
        import { native } from ${JSON.stringify(distInternals)}
        const file = process.argv[2]
        const fd = fs.openSync(file, 'w+')
        native.allocate(fd, 0, 1 << 20)
        for (const writable of [true, false]) {
          const handle = native.map(fd, 1 << 20, writable)
          fs.ftruncateSync(fd, 4096)
          const outcome = await handle.warmAsync(0, 1 << 20).then(() => 'resolved', (e) => e.code + ' ' + e.syscall)
          console.log(outcome)
          handle.close()
          fs.ftruncateSync(fd, 1 << 20)
        }
      `,
        [join(dir, 'short')],
      )
      expect(result.signal).toBeNull()
      expect(result.stderr).toBe('')
      expect(result.stdout.trim().split('\n')).toEqual(['EFAULT madvise', 'EFAULT madvise'])
    },
  )
  it.runIf(!hasPopulate)('warming past the end of a file is only checked on Linux >= 5.14 (MADV_POPULATE_*)', () => {
    expect(hasPopulate).toBe(false)
  })

  // A pool thread blocked on a FIFO open keeps later work queued; /proc/self/maps shows whether
  // the file is still mapped.
  it.runIf(process.platform === 'linux')(
    'close cancels warm-ups and drops the pool has not started, drops their in-flight count and unmaps at once; a queued sync still runs (Linux: /proc/self/maps)',
    () => {
      const fifo = join(dir, 'fifo')
      expect(spawnSync('mkfifo', [fifo]).status).toBe(0)
      const result = spawnSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `
          import * as fs from 'node:fs'
          import { native } from ${JSON.stringify(distInternals)}
          const [fifo, file] = process.argv.slice(1)
          const mapped = () => fs.readFileSync('/proc/self/maps', 'utf8').includes(file)
          // The only pool thread waits for a writer to open the FIFO.
          const blocked = new Promise((resolve) => fs.open(fifo, 'r', (err, fd) => resolve(fd)))
          const fd = fs.openSync(file, 'w+')
          native.allocate(fd, 0, 1 << 16)
          const handle = native.map(fd, 1 << 16, true)
          const before = mapped()
          const settle = (p) => p.then(() => 'resolved', (e) => e.code)
          const warms = [handle.warmAsync(0, 1 << 16), handle.warmAsync(0, 4096), handle.dropAsync(0, 1 << 16, fd)].map(settle)
          // The drop holds a duplicate of the descriptor: the caller's may close at once.
          fs.closeSync(fd)
          handle.close()
          const afterClose = mapped()
          const outcomes = await Promise.all(warms)
          // A sync queued before close still runs, and holds the mapping until it has.
          const other = native.map(fs.openSync(file, 'r+'), 1 << 16, true)
          const sync = settle(other.syncAsync(0, 1 << 16))
          other.close()
          const whileSyncQueued = mapped()
          const writer = fs.openSync(fifo, 'w')
          fs.closeSync(await blocked)
          fs.closeSync(writer)
          const syncOutcome = await sync
          console.log(JSON.stringify({ before, afterClose, outcomes, whileSyncQueued, syncOutcome, end: mapped() }))
        `,
          fifo,
          join(dir, 'queued'),
        ],
        { encoding: 'utf8', timeout: 30_000, env: { ...process.env, UV_THREADPOOL_SIZE: '1' } },
      )
      expect(result.signal).toBeNull()
      expect(result.status, result.stderr).toBe(0)
      expect(JSON.parse(result.stdout)).toEqual({
        before: true,
        afterClose: false,
        outcomes: ['ERR_MAPPING_CLOSED', 'ERR_MAPPING_CLOSED', 'ERR_MAPPING_CLOSED'],
        whileSyncQueued: true,
        syncOutcome: 'resolved',
        end: false,
      })
    },
  )
})

// A real, tiny tmpfs proves that a full disk is an error at preallocation, never a SIGBUS when a
// page of a sparse file is first touched.
describe.runIf(tmpfs.ok)('full disk (tmpfs)', () => {
  it('preallocating past the free space fails with ENOSPC as an error, not a SIGBUS', () => {
    const mount = tempDir('mqstore-tmpfs-')
    mountTmpfs(mount, '1m')
    try {
      const fd = fs.openSync(join(mount, 'big'), 'w+')
      let error: NodeJS.ErrnoException | undefined
      try {
        native.allocate(fd, 0, 8 << 20)
      } catch (e) {
        error = e as NodeJS.ErrnoException
      }
      expect(error?.code).toBe('ENOSPC')
      expect(error?.syscall).toBe('posix_fallocate')
      fs.closeSync(fd)
    } finally {
      unmountTmpfs(mount)
      fs.rmSync(mount, { recursive: true, force: true })
    }
  })
})
describe.runIf(!tmpfs.ok)(`full disk (skipped: ${tmpfs.reason})`, () => {
  it(`is skipped because ${tmpfs.reason}`, () => {
    expect(tmpfs.ok).toBe(false)
  })
})
