// The addon's createMapped (a new segment made, reserved, mapped and faulted in on the libuv pool)
// on real files.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { native } from '../../lib/native.js'
import { distInternals, runNodeScript, tempDir } from '../helpers/tmp.js'
import { mountTmpfs, tmpfs, unmountTmpfs } from '../helpers/tmpfs.js'

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-create-mapped-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

async function rejection(promise: Promise<unknown>): Promise<NodeJS.ErrnoException> {
  try {
    await promise
  } catch (error) {
    return error as NodeJS.ErrnoException
  }
  throw new Error('expected a rejection')
}

describe('createMapped', () => {
  it('makes the file at full size with its first part reserved, and maps it for writing', async () => {
    const name = join(dir, 'seg')
    const handle = await native.createMapped(name, 1 << 20, 64 << 10, 64 << 10)
    try {
      const st = fs.statSync(name)
      expect(st.size).toBe(1 << 20)
      // Reserved: at least the first part has blocks; the rest is a hole.
      expect(st.blocks * 512).toBeGreaterThanOrEqual(64 << 10)
      expect(st.blocks * 512).toBeLessThan(1 << 20)
      expect(handle.length).toBe(1 << 20)
      expect(handle.writable).toBe(true)
      Buffer.from(handle.buffer, 1000, 5).write('hello')
      handle.sync(0, 4096)
      expect(fs.readFileSync(name).subarray(1000, 1005).toString()).toBe('hello')
    } finally {
      handle.close()
    }
  })

  it('a reservation of the whole file (or more) makes it whole', async () => {
    const name = join(dir, 'whole')
    const handle = await native.createMapped(name, 256 << 10, 1 << 20, 1 << 20)
    handle.close()
    const st = fs.statSync(name)
    expect(st.size).toBe(256 << 10)
    expect(st.blocks * 512).toBeGreaterThanOrEqual(256 << 10)
  })

  it('never replaces a file: an existing name rejects with EEXIST and keeps its content', async () => {
    const name = join(dir, 'taken')
    fs.writeFileSync(name, 'kept')
    const error = await rejection(native.createMapped(name, 65536, 65536, 0))
    expect(error.code).toBe('EEXIST')
    expect(error.syscall).toBe('open')
    expect(fs.readFileSync(name, 'utf8')).toBe('kept')
  })

  it('a missing folder rejects with ENOENT and leaves nothing', async () => {
    const error = await rejection(native.createMapped(join(dir, 'no', 'seg'), 65536, 65536, 65536))
    expect(error.code).toBe('ENOENT')
    expect(fs.existsSync(join(dir, 'no'))).toBe(false)
  })

  it('checks its arguments before any work', () => {
    expect(() => native.createMapped(42 as unknown as string, 65536, 0, 0)).toThrow(TypeError)
    expect(() => native.createMapped(join(dir, 'a'), 0, 0, 0)).toThrow(RangeError)
    expect(() => native.createMapped(join(dir, 'a'), -1, 0, 0)).toThrow(RangeError)
    expect(() => native.createMapped(join(dir, 'a'), 65536, 0.5, 0)).toThrow(RangeError)
    expect(() => native.createMapped(join(dir, 'a'), 65536, 0, Number.NaN)).toThrow(RangeError)
    expect(() => native.createMapped(join(dir, 'a'), 65536, 0, 0, 0)).toThrow(RangeError)
    expect(() => native.createMapped(join(dir, 'a'), 65536, 0, 0, 65537)).toThrow(RangeError)
    expect(fs.existsSync(join(dir, 'a'))).toBe(false)
  })
})

describe('a handle that exposes part of its mapping (createMapped with expose, MapHandle.expose)', () => {
  const page = native.pageSize

  it('exposes a page-rounded prefix, widens on demand, and every buffer sees the same bytes', async () => {
    const name = join(dir, 'part')
    const handle = await native.createMapped(name, 1 << 20, 8192, 8192, 100)
    try {
      const first = handle.buffer
      expect(first.byteLength).toBe(page)
      expect(handle.length).toBe(1 << 20)
      // Asking for what is exposed returns the same buffer.
      expect(handle.expose(page)).toBe(first)
      expect(handle.expose(10)).toBe(first)
      const wider = handle.expose(3 * page + 1)
      expect(wider.byteLength).toBe(4 * page)
      expect(handle.buffer).toBe(wider)
      // The narrower buffer stays valid and is the same memory.
      expect(first.byteLength).toBe(page)
      Buffer.from(wider).write('through the wide one', 16)
      expect(Buffer.from(first, 16, 20).toString()).toBe('through the wide one')
      Buffer.from(wider).write('past the first', page + 8)
      handle.sync(0, 2 * page)
      const onDisk = fs.readFileSync(name)
      expect(onDisk.subarray(16, 36).toString()).toBe('through the wide one')
      expect(onDisk.subarray(page + 8, page + 22).toString()).toBe('past the first')
      // Up to the whole mapping, never past it.
      expect(handle.expose(1 << 20).byteLength).toBe(1 << 20)
      expect(() => handle.expose((1 << 20) + 1)).toThrow(RangeError)
      expect(() => handle.expose(-1)).toThrow(RangeError)
    } finally {
      handle.close()
    }
  })

  it('close detaches every buffer it gave out; expose after close is refused', async () => {
    const handle = await native.createMapped(join(dir, 'closing'), 256 << 10, 4096, 0, 4096)
    const buffers = [handle.buffer, handle.expose(8 * page), handle.expose(64 << 10)]
    const views = buffers.map((b) => new Uint8Array(b))
    views[2][0] = 7
    handle.close()
    for (const buffer of buffers) expect(buffer.byteLength).toBe(0)
    for (const view of views) expect(view.length).toBe(0)
    expect(handle.buffer.byteLength).toBe(0)
    expect(() => handle.expose(page)).toThrow(expect.objectContaining({ code: 'ERR_MAPPING_CLOSED' }))
  })

  it('map exposes part of an existing file the same way', () => {
    const name = join(dir, 'existing')
    fs.writeFileSync(name, Buffer.alloc(256 << 10, 1))
    const fd = fs.openSync(name, 'r+')
    try {
      const handle = native.map(fd, 256 << 10, true, 5000)
      expect(handle.buffer.byteLength).toBe(Math.ceil(5000 / page) * page)
      expect(new Uint8Array(handle.buffer)[100]).toBe(1)
      expect(handle.expose(100_000).byteLength).toBeGreaterThanOrEqual(100_000)
      handle.close()
      expect(native.map(fd, 256 << 10, false).buffer.byteLength).toBe(256 << 10)
      expect(() => native.map(fd, 256 << 10, true, 0)).toThrow(RangeError)
      expect(() => native.map(fd, 256 << 10, true, (256 << 10) + 1)).toThrow(RangeError)
    } finally {
      fs.closeSync(fd)
    }
  })

  it('without expose the whole file is exposed, as map does', async () => {
    const handle = await native.createMapped(join(dir, 'all'), 256 << 10, 4096, 0)
    try {
      expect(handle.buffer.byteLength).toBe(256 << 10)
      expect(handle.expose(4096)).toBe(handle.buffer)
    } finally {
      handle.close()
    }
  })
})

describe('createMapped at the edges of an environment', () => {
  // Work that completes while its worker or the process is torn down cannot settle its promise;
  // that must not abort the process (nor leave anything mapped that a view could reach).
  for (const end of ['process.exit', 'worker.terminate'] as const) {
    it(`workers creating files in a loop survive ${end}() with creations in flight`, () => {
      const script = (base: string) =>
        runNodeScript(
          `
        import { Worker } from 'node:worker_threads'
        const code = \`
          const { native } = await import(${JSON.stringify(distInternals)})
          const { workerData } = await import('node:worker_threads')
          for (let n = 0; ; n += 8) {
            const made = []
            for (let k = 0; k < 8; k++) made.push(native.createMapped(workerData.base + (n + k), 1 << 16, 1 << 16, 1 << 16))
            for (const handle of await Promise.all(made)) {
              new Uint8Array(handle.buffer)[0] = 1
              handle.close()
            }
            if (n === 64) Atomics.store(workerData.started, 0, 1)
          }
        \`
        const started = new Int32Array(new SharedArrayBuffer(4))
        const workers = [0, 1].map((k) => new Worker(code, { eval: true, workerData: { base: process.argv[2] + k + '-', started } }))
        while (Atomics.load(started, 0) === 0) await new Promise((resolve) => setTimeout(resolve, 1))
        console.log('looping')
        if (${JSON.stringify(end)} === 'worker.terminate') await Promise.all(workers.map((w) => w.terminate()))
        process.exit(0)
      `,
          [base],
        )
      for (let run = 0; run < 3; run++) {
        const result = script(join(dir, `run-${run}-`))
        expect(result.stderr).not.toContain('terminate called')
        expect(result.signal).toBeNull()
        expect(result.status).toBe(0)
        expect(result.stdout).toContain('looping')
      }
    })
  }
})

describe.runIf(tmpfs.ok)('createMapped on a full disk (tmpfs)', () => {
  it('a reservation past the free space rejects with ENOSPC and removes the file', async () => {
    const mount = tempDir('mqstore-tmpfs-')
    mountTmpfs(mount, '1m')
    try {
      const error = await rejection(native.createMapped(join(mount, 'seg'), 16 << 20, 8 << 20, 8 << 20))
      expect(error.code).toBe('ENOSPC')
      expect(fs.readdirSync(mount)).toEqual([])
    } finally {
      unmountTmpfs(mount)
      fs.rmSync(mount, { recursive: true, force: true })
    }
  })
})
describe.runIf(!tmpfs.ok)(`createMapped on a full disk (skipped: ${tmpfs.reason})`, () => {
  it(`is skipped because ${tmpfs.reason}`, () => {
    expect(tmpfs.ok).toBe(false)
  })
})
