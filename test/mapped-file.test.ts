import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MQStoreError } from '../lib/errors.js'
import { formatOffsetName, parseOffsetName } from '../lib/store/mapped/segment-name.js'
import { MappedFile } from '../lib/store/mapped/mapped-file.js'
import { TransientStorePool } from '../lib/store/mapped/transient-store-pool.js'
import { distInternals, runNodeScript, tempDir } from './helpers/tmp.js'

const SIZE = 64 * 1024
let dir: string
beforeEach(() => {
  dir = tempDir()
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

function fileAt(start: number): string {
  return join(dir, formatOffsetName(start))
}

function appendBytes(file: MappedFile, bytes: Buffer): void {
  file.appendWith((target, pos) => {
    bytes.copy(target, pos)
    return { wroteBytes: bytes.length }
  })
}

describe('segment names', () => {
  it('format and parse 20-digit start offsets in one place', () => {
    expect(formatOffsetName(0)).toBe('00000000000000000000')
    expect(formatOffsetName(1073741824)).toBe('00000000001073741824')
    expect(parseOffsetName('00000000001073741824')).toBe(1073741824)
    expect(parseOffsetName('0000000000107374182')).toBeNull()
    expect(parseOffsetName('0000000000107374182x')).toBeNull()
    expect(parseOffsetName('00000000000000000000.tmp')).toBeNull()
    expect(() => formatOffsetName(-1)).toThrow(RangeError)
    expect(() => formatOffsetName(1.5)).toThrow(RangeError)
  })
})

describe('MappedFile', () => {
  it('is created whole at full size, named by its start offset', () => {
    const file = MappedFile.create(fileAt(SIZE * 3), SIZE)
    expect(file.fileFromOffset).toBe(SIZE * 3)
    const st = fs.statSync(file.fileName)
    expect(st.size).toBe(SIZE)
    expect(st.blocks * 512).toBeGreaterThanOrEqual(SIZE)
    expect(fs.readdirSync(dir)).toEqual([formatOffsetName(SIZE * 3)])
    file.shutdown(0)
  })

  it('refuses a name that is not a start offset', () => {
    expect(() => MappedFile.create(join(dir, 'oops'), SIZE)).toThrow(MQStoreError)
  })

  it('refuses to open a file of the wrong size', () => {
    fs.writeFileSync(fileAt(0), Buffer.alloc(SIZE - 1))
    expect(() => MappedFile.open(fileAt(0), SIZE)).toThrow(expect.objectContaining({ code: 'BAD_FILE_SIZE' }))
  })

  it('appends advance the write position; readers never see past it', () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    appendBytes(file, Buffer.from('abcdef'))
    expect(file.wrotePosition).toBe(6)
    expect(file.readPosition).toBe(6)
    expect(file.selectMappedBuffer(0, 7)).toBeNull()
    expect(file.selectMappedBuffer(6)).toBeNull()
    const view = file.selectMappedBuffer(2)
    expect(view?.buffer.toString()).toBe('cdef')
    expect(view?.startOffset).toBe(2)
    view?.release()
    expect(file.appendMessage(Buffer.alloc(SIZE - 6))).toBe(true)
    expect(file.isFull()).toBe(true)
    expect(file.appendMessage(Buffer.alloc(1))).toBe(false)
    file.shutdown(0)
  })

  it('an append callback cannot overflow the file', () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    expect(() => file.appendWith(() => ({ wroteBytes: SIZE + 1 }))).toThrow(RangeError)
    expect(file.wrotePosition).toBe(0)
    file.shutdown(0)
  })

  it('flush honours flushLeastPages and forces everything with 0', () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    appendBytes(file, Buffer.alloc(4096 * 3, 1))
    expect(file.flush(4)).toBe(0)
    appendBytes(file, Buffer.alloc(4096, 2))
    expect(file.flush(4)).toBe(4096 * 4)
    appendBytes(file, Buffer.alloc(10, 3))
    expect(file.flush(1)).toBe(4096 * 4)
    expect(file.flush(0)).toBe(4096 * 4 + 10)
    file.shutdown(0)
  })

  it('flushAsync moves the flushed position after msync on the pool', async () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    appendBytes(file, Buffer.alloc(5000, 1))
    await expect(file.flushAsync(0)).resolves.toBe(5000)
    expect(file.flushedPosition).toBe(5000)
    file.shutdown(0)
  })

  it('reopen reads back what was written', () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    appendBytes(file, Buffer.from('durable bytes'))
    file.flush(0)
    file.shutdown(0)
    expect(file.isCleanupOver()).toBe(true)
    const again = MappedFile.open(fileAt(0), SIZE)
    again.setPositions(13)
    const view = again.selectMappedBuffer(0)
    expect(view?.buffer.toString()).toBe('durable bytes')
    view?.release()
    again.shutdown(0)
  })

  it('hold/release count readers; shutdown waits for them, then the last release unmaps', () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    appendBytes(file, Buffer.from('x'))
    const a = file.selectMappedBuffer(0)!
    const b = file.selectMappedBuffer(0)!
    expect(file.getRefCount()).toBe(3)
    file.shutdown(60_000)
    expect(file.isAvailable()).toBe(false)
    expect(file.hold()).toBe(false)
    expect(file.selectMappedBuffer(0)).toBeNull()
    expect(file.getRefCount()).toBe(2)
    a.release()
    a.release() // a second release of the same result is a no-op
    expect(file.getRefCount()).toBe(1)
    expect(file.isCleanupOver()).toBe(false)
    expect(b.buffer.toString()).toBe('x')
    b.release()
    expect(file.getRefCount()).toBe(0)
    expect(file.isCleanupOver()).toBe(true)
    expect(b.buffer.length).toBe(0)
  })

  it('refcounts never go negative except through a forced destroy', () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    appendBytes(file, Buffer.from('y'))
    for (let i = 0; i < 100; i++) {
      const view = file.selectMappedBuffer(0)!
      view.release()
      view.release()
      expect(file.getRefCount()).toBe(1)
    }
    const held = file.selectMappedBuffer(0)!
    expect(file.destroy(0)).toBe(false) // first call: owner reference dropped, reader remains
    expect(file.getRefCount()).toBe(1)
    expect(fs.existsSync(file.fileName)).toBe(true)
    expect(file.destroy(0)).toBe(true) // interval passed: forced
    expect(file.getRefCount()).toBeLessThan(0)
    expect(fs.existsSync(file.fileName)).toBe(false)
    // The reader's view is now empty: reads fail cleanly instead of touching unmapped memory.
    expect(held.buffer.length).toBe(0)
    expect(() => held.buffer.readUInt8(0)).toThrow(RangeError)
    held.release()
  })

  it('destroy waits for readers within the forced interval', () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    appendBytes(file, Buffer.from('z'))
    const held = file.selectMappedBuffer(0)!
    expect(file.destroy(60_000)).toBe(false)
    expect(file.destroy(60_000)).toBe(false)
    held.release()
    expect(file.destroy(60_000)).toBe(true)
    expect(fs.existsSync(file.fileName)).toBe(false)
  })

  it('commits through a transient store pool buffer; readers see only committed bytes', () => {
    const pool = new TransientStorePool(1, SIZE)
    const file = MappedFile.create(fileAt(0), SIZE, { transientStorePool: pool })
    expect(file.hasWriteBuffer()).toBe(true)
    expect(pool.availableBufferNums()).toBe(0)
    appendBytes(file, Buffer.alloc(4096 * 2, 7))
    expect(file.readPosition).toBe(0)
    expect(file.selectMappedBuffer(0)).toBeNull()
    expect(file.commit(4)).toBe(0) // fewer than 4 pages pending
    expect(file.commit(0)).toBe(8192)
    const view = file.selectMappedBuffer(0)!
    expect(view.buffer[8191]).toBe(7)
    view.release()
    expect(file.flush(0)).toBe(8192)
    appendBytes(file, Buffer.alloc(SIZE - 8192, 8))
    expect(file.commit(0)).toBe(SIZE)
    expect(file.hasWriteBuffer()).toBe(false)
    expect(pool.availableBufferNums()).toBe(1)
    file.shutdown(0)
    expect(fs.readFileSync(fileAt(0))[SIZE - 1]).toBe(8)
  })

  it('warm-up keeps the content and reports mlock as best effort', async () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    appendBytes(file, Buffer.from('warm'))
    const locked = await file.warm(true)
    expect(typeof locked).toBe('boolean')
    const view = file.selectMappedBuffer(0)!
    expect(view.buffer.toString()).toBe('warm')
    view.release()
    file.shutdown(0)
  })

  it('last-modified time comes from the file system', () => {
    const file = MappedFile.create(fileAt(0), SIZE)
    const past = new Date(Date.now() - 3_600_000)
    fs.utimesSync(file.fileName, past, past)
    expect(Math.abs(file.getLastModifiedTimestamp() - past.getTime())).toBeLessThan(1000)
    file.shutdown(0)
  })

  it('a view read after a forced destroy fails cleanly and the process lives (child process)', () => {
    const result = runNodeScript(
      `
      import * as fs from 'node:fs'
      import { join } from 'node:path'
      import { MappedFile, formatOffsetName } from ${JSON.stringify(distInternals)}
      const dir = fs.mkdtempSync(join(process.argv[2], 'x-'))
      const file = MappedFile.create(join(dir, formatOffsetName(0)), 65536)
      file.appendWith((target, pos) => { target.write('payload', pos); return { wroteBytes: 7 } })
      const view = file.selectMappedBuffer(0)
      const destroyed = [file.destroy(0), file.destroy(0)]
      let errors = 0
      for (const read of [() => view.buffer.readUInt32BE(0), () => view.buffer.toString('utf8', 0, 7)]) {
        try { read() } catch { errors++ }
      }
      console.log(JSON.stringify({ destroyed, length: view.buffer.length, byte: view.buffer[0] ?? null, errors }))
    `,
      [dir],
    )
    expect(result.signal).toBeNull()
    expect(result.status).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({ destroyed: [false, true], length: 0, byte: null, errors: 1 })
  })
})
