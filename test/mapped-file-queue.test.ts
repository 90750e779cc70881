import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { AHEAD_SUFFIX, formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MappedFileQueue } from '../lib/store/mapped/mapped-file-queue.js'
import type { MappedFile } from '../lib/store/mapped/mapped-file.js'
import { tempDir } from './helpers/tmp.js'

const SIZE = 8192
let dir: string
const queues: MappedFileQueue[] = []
beforeEach(() => {
  dir = tempDir()
})
afterEach(() => {
  for (const queue of queues.splice(0)) queue.shutdown(0)
  fs.rmSync(dir, { recursive: true, force: true })
})

function open(options: ConstructorParameters<typeof MappedFileQueue>[2] = {}): MappedFileQueue {
  const queue = new MappedFileQueue(join(dir, 'q'), SIZE, options)
  queues.push(queue)
  queue.load()
  return queue
}

/** Appends `length` bytes of `value`, rolling to a new file when the last one is full. */
function append(queue: MappedFileQueue, length: number, value = 1): void {
  let file = queue.getLastMappedFile(0)!
  if (file.wrotePosition + length > SIZE) {
    // Fill the tail like a blank record does, then roll.
    file.appendWith((_t, _p, maxBlank) => ({ wroteBytes: maxBlank }))
    file = queue.getLastMappedFile(0)!
  }
  file.appendWith((target, pos) => {
    target.fill(value, pos, pos + length)
    return { wroteBytes: length }
  })
}

function names(): string[] {
  return fs.readdirSync(join(dir, 'q')).sort()
}

describe('MappedFileQueue', () => {
  it('creates the first file at the start offset rounded down, then rolls contiguously', () => {
    const queue = open()
    const first = queue.getLastMappedFile(SIZE * 2 + 100)!
    expect(first.fileFromOffset).toBe(SIZE * 2)
    expect(first.firstCreateInQueue).toBe(true)
    first.appendWith((_t, _p, maxBlank) => ({ wroteBytes: maxBlank }))
    const second = queue.getLastMappedFile(0)!
    expect(second.fileFromOffset).toBe(SIZE * 3)
    expect(second.firstCreateInQueue).toBe(false)
    expect(names()).toEqual([formatOffsetName(SIZE * 2), formatOffsetName(SIZE * 3)])
    expect(queue.getMinOffset()).toBe(SIZE * 2)
    expect(queue.getMaxOffset()).toBe(SIZE * 3)
  })

  it('getLastMappedFile without needCreate never creates', () => {
    const queue = open()
    expect(queue.getLastMappedFile(0, false)).toBeNull()
    expect(fs.existsSync(join(dir, 'q'))).toBe(false)
  })

  it('finds files by offset, and the first one on request when out of range', () => {
    const queue = open()
    append(queue, SIZE - 8)
    append(queue, 100)
    append(queue, SIZE - 8)
    expect(queue.mappedFiles.length).toBe(3)
    expect(queue.findMappedFileByOffset(0)?.fileFromOffset).toBe(0)
    expect(queue.findMappedFileByOffset(SIZE + 5)?.fileFromOffset).toBe(SIZE)
    expect(queue.findMappedFileByOffset(SIZE * 3 - 1)?.fileFromOffset).toBe(SIZE * 2)
    expect(queue.findMappedFileByOffset(SIZE * 3)).toBeNull()
    expect(queue.findMappedFileByOffset(SIZE * 3, true)?.fileFromOffset).toBe(0)
  })

  it('load rejects files of the wrong size with a clear error', () => {
    fs.mkdirSync(join(dir, 'q'))
    fs.writeFileSync(join(dir, 'q', formatOffsetName(0)), Buffer.alloc(SIZE))
    fs.writeFileSync(join(dir, 'q', formatOffsetName(SIZE)), Buffer.alloc(SIZE - 1))
    expect(() => open()).toThrow(expect.objectContaining({ code: 'BAD_FILE_SIZE' }))
  })

  it('load rejects non-contiguous names and names that are not offsets', () => {
    fs.mkdirSync(join(dir, 'q'))
    fs.writeFileSync(join(dir, 'q', formatOffsetName(0)), Buffer.alloc(SIZE))
    fs.writeFileSync(join(dir, 'q', formatOffsetName(SIZE * 2)), Buffer.alloc(SIZE))
    expect(() => open()).toThrow(expect.objectContaining({ code: 'NON_CONTIGUOUS' }))
    fs.rmSync(join(dir, 'q', formatOffsetName(SIZE * 2)))
    fs.writeFileSync(join(dir, 'q', formatOffsetName(100)), Buffer.alloc(SIZE))
    expect(() => open()).toThrow(expect.objectContaining({ code: 'NON_CONTIGUOUS' }))
    fs.rmSync(join(dir, 'q', formatOffsetName(100)))
    fs.writeFileSync(join(dir, 'q', 'notes.txt'), 'x')
    expect(() => open()).toThrow(expect.objectContaining({ code: 'BAD_FILE_NAME' }))
  })

  it('load maps files with every position at the file size and removes leftover .tmp files', () => {
    const queue = open()
    append(queue, SIZE - 8)
    append(queue, 10)
    queue.shutdown(0)
    fs.writeFileSync(join(dir, 'q', `${formatOffsetName(SIZE * 2)}.tmp`), 'partial')
    fs.writeFileSync(join(dir, 'q', `${formatOffsetName(SIZE * 2)}${AHEAD_SUFFIX}`), 'made ahead, cut short')
    const again = open()
    expect(again.mappedFiles.map((f) => f.wrotePosition)).toEqual([SIZE, SIZE])
    expect(names()).toEqual([formatOffsetName(0), formatOffsetName(SIZE)])
  })

  it('flush writes only the file holding flushedWhere and reports whether it moved', () => {
    const queue = open()
    append(queue, 5000)
    expect(queue.flush(0)).toBe(false)
    expect(queue.flushedWhere).toBe(5000)
    expect(queue.flush(0)).toBe(true)
    append(queue, 5000) // rolls: the first file ends in a blank
    expect(queue.flush(0)).toBe(false)
    expect(queue.flushedWhere).toBe(SIZE)
    expect(queue.flush(0)).toBe(false)
    expect(queue.flushedWhere).toBe(SIZE + 5000)
    expect(queue.remainHowManyDataToFlush()).toBe(0)
  })

  it('flushAsync advances flushedWhere through msync on the pool', async () => {
    const queue = open()
    append(queue, 3000)
    await expect(queue.flushAsync(0)).resolves.toBe(false)
    expect(queue.flushedWhere).toBe(3000)
  })

  it('truncateDirtyFiles keeps a prefix and destroys later files', () => {
    const queue = open()
    append(queue, SIZE - 8)
    append(queue, SIZE - 8)
    append(queue, 100)
    queue.truncateDirtyFiles(SIZE + 50)
    expect(queue.mappedFiles.length).toBe(2)
    expect(queue.getMaxOffset()).toBe(SIZE + 50)
    expect(names()).toEqual([formatOffsetName(0), formatOffsetName(SIZE)])
    queue.deleteLastMappedFile()
    expect(names()).toEqual([formatOffsetName(0)])
  })

  it('truncation removes later files even while a reader holds one; the reader sees an empty view', () => {
    const queue = open()
    append(queue, SIZE - 8)
    append(queue, 100, 7)
    const held = queue.mappedFiles[1].selectMappedBuffer(0)!
    expect(held.buffer[0]).toBe(7)
    queue.truncateDirtyFiles(SIZE - 8)
    expect(names()).toEqual([formatOffsetName(0)])
    expect(held.buffer.length).toBe(0)
    held.release()
    queue.shutdown(0)
    const again = open()
    expect(again.mappedFiles.length).toBe(1)
  })

  it('deleteExpiredFileByTime deletes old files oldest first, never the last one', async () => {
    const queue = open()
    for (let i = 0; i < 4; i++) append(queue, SIZE - 8)
    const old = new Date(Date.now() - 10_000)
    for (const file of queue.mappedFiles.slice(0, 2)) fs.utimesSync(file.fileName, old, old)
    expect(await queue.deleteExpiredFileByTime(5_000, 0, 1000, false)).toBe(2)
    expect(queue.getMinOffset()).toBe(SIZE * 2)
    expect(await queue.deleteExpiredFileByTime(5_000, 0, 1000, true)).toBe(1)
    expect(queue.mappedFiles.length).toBe(1)
    expect(await queue.deleteExpiredFileByTime(0, 0, 1000, true)).toBe(0)
  })

  it('deleting head files that were never flushed moves the flush past them, so later data still gets flushed', async () => {
    const queue = open()
    for (let i = 0; i < 3; i++) append(queue, SIZE - 8)
    append(queue, 100)
    expect(queue.flushedWhere).toBe(0)
    expect(await queue.deleteExpiredFileByTime(0, 0, 1000, true)).toBe(3)
    expect(queue.flushedWhere).toBe(SIZE * 3)
    expect(queue.committedWhere).toBe(SIZE * 3)
    expect(queue.flush(0)).toBe(false)
    expect(queue.flushedWhere).toBe(SIZE * 3 + 100)
  })

  it('deleteExpiredFileByTime stops at a file a reader holds, and retryDeleteFirstFile finishes it', async () => {
    const queue = open()
    for (let i = 0; i < 3; i++) append(queue, SIZE - 8)
    const held = queue.mappedFiles[0].selectMappedBuffer(0)!
    expect(await queue.deleteExpiredFileByTime(0, 0, 60_000, true)).toBe(0)
    expect(queue.retryDeleteFirstFile(60_000)).toBe(false)
    held.release()
    expect(queue.retryDeleteFirstFile(60_000)).toBe(true)
    expect(queue.getMinOffset()).toBe(SIZE)
  })

  it('deleteExpiredFileByOffset removes files whose last unit points below the min offset', () => {
    const queue = open()
    const unit = 20
    const writeUnits = (file: MappedFile, phy: number) => {
      file.appendWith((target, pos, maxBlank) => {
        for (let at = pos; at + unit <= pos + maxBlank; at += unit) target.writeBigInt64BE(BigInt(phy), at)
        return { wroteBytes: maxBlank - (maxBlank % unit) }
      })
    }
    const sizeInUnits = new MappedFileQueue(join(dir, 'cq'), unit * 10)
    queues.push(sizeInUnits)
    for (const phy of [100, 200, 300]) writeUnits(sizeInUnits.getLastMappedFile(0)!, phy)
    expect(sizeInUnits.mappedFiles.length).toBe(3)
    expect(sizeInUnits.deleteExpiredFileByOffset(250, unit)).toBe(2)
    expect(sizeInUnits.getMinOffset()).toBe(unit * 20)
    expect(queue.deleteExpiredFileByOffset(1000, unit)).toBe(0)
  })

  it('makes the next file ahead of need on the pool when asked to', async () => {
    const queue = open({ preallocateNext: true })
    append(queue, 100)
    await queue.settle()
    expect(names()).toEqual([formatOffsetName(0)])
    queue.prepareNext()
    await queue.settle()
    expect(names()).toEqual([formatOffsetName(0), formatOffsetName(SIZE)])
    expect(queue.mappedFiles.length).toBe(1)
    append(queue, SIZE - 8)
    expect(queue.mappedFiles.length).toBe(2)
    expect(queue.mappedFiles[1].fileFromOffset).toBe(SIZE)
  })

  it('an append that needs the next file while it is being made makes its own; the made one goes, and the file asked for since is made', async () => {
    const queue = open({ preallocateNext: true })
    append(queue, 100)
    queue.prepareNext()
    // No turn of the event loop: the file being made on the pool cannot be kept before these rolls.
    append(queue, SIZE - 8)
    append(queue, SIZE - 8)
    queue.prepareNext()
    expect(queue.mappedFiles.map((f) => f.fileFromOffset)).toEqual([0, SIZE, SIZE * 2])
    const written = queue.mappedFiles[1]
    await queue.settle()
    // The file the appends made is the one in the queue (the made one never replaced it), nothing
    // of the made one is left, and the file asked for since (after the last) is made instead.
    expect(queue.mappedFiles[1]).toBe(written)
    expect(names()).toEqual([0, 1, 2, 3].map((k) => formatOffsetName(SIZE * k)))
    expect(queue.mappedFiles.length).toBe(3)
    append(queue, SIZE - 8)
    expect(queue.mappedFiles.map((f) => f.fileFromOffset)).toEqual([0, SIZE, SIZE * 2, SIZE * 3])
  })

  it('a file still being made when a close drops the prepared file is not kept', async () => {
    const queue = open({ preallocateNext: true })
    append(queue, 100)
    queue.prepareNext()
    await queue.dropPrepared()
    expect(names()).toEqual([formatOffsetName(0)])
    expect(queue.hasPrepared).toBe(false)
  })

  it('destroy removes every file and the directory', () => {
    const queue = open()
    append(queue, SIZE - 8)
    append(queue, 8)
    queue.destroy()
    expect(fs.existsSync(join(dir, 'q'))).toBe(false)
  })
})
