// Page faults on file mappings read around the faulting page (up to the device's read-ahead, 8 MiB
// on some disks). For a new or small, sparse file that is megabytes of holes read as pages of
// zeros: the addon's warm-up of a new file populates only the range it is given, and consume-queue
// files are mapped with random-access advice (which later warm-ups follow). Linux only: the
// read-around and the page-cache count (util-linux's fincore) are Linux's.
import { execFileSync } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/index.js'
import { native } from '../../lib/native.js'
import { MappedFile } from '../../lib/store/mapped/mapped-file.js'
import { formatOffsetName } from '../../lib/store/mapped/segment-name.js'
import { tempDir } from '../helpers/tmp.js'

const FILE_SIZE = 8 << 20
const PAGE = 4096

/** Bytes of `file` in the page cache. */
function cachedBytes(file: string): number {
  return Number(execFileSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', file], { encoding: 'utf8' }).trim())
}

/** The VmFlags of this process's mapping of `file` (the first one listed). */
function mappingFlags(file: string): string[] {
  const lines = fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')
  const at = lines.findIndex((line) => line.endsWith(` ${file}`))
  if (at < 0) throw new Error(`${file} is not mapped`)
  const flags = lines.slice(at).find((line) => line.startsWith('VmFlags:'))
  return (flags ?? '').slice('VmFlags:'.length).trim().split(/\s+/)
}

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-read-around-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

describe.runIf(process.platform === 'linux')('read-around of file mappings (Linux: read-ahead and fincore are Linux facts)', () => {
  it('createMapped faults in the warmed range only, and leaves the mapping with its normal advice', async () => {
    const name = join(dir, 'seg')
    const handle = await native.createMapped(name, FILE_SIZE, 64 << 10, 64 << 10)
    try {
      expect(cachedBytes(name)).toBe(64 << 10)
      expect(mappingFlags(name)).not.toContain('rr')
    } finally {
      handle.close()
    }
  })

  it("createMapped with 'random' advice leaves the mapping so (the pool gives it), still warming its range only", async () => {
    const name = join(dir, 'random')
    const handle = await native.createMapped(name, FILE_SIZE, 64 << 10, 64 << 10, FILE_SIZE, 'random')
    try {
      expect(cachedBytes(name)).toBe(64 << 10)
      expect(mappingFlags(name)).toContain('rr')
    } finally {
      handle.close()
    }
    expect(() => native.createMapped(join(dir, 'bad'), FILE_SIZE, 0, 0, FILE_SIZE, 'sequential' as 'random')).toThrow(
      "advice must be 'normal' or 'random'",
    )
    expect(fs.existsSync(join(dir, 'bad'))).toBe(false)
  })

  it("a warm-up of a mapping with random-access advice (a consume queue's) faults in its range only", async () => {
    const name = join(dir, 'sparse')
    fs.writeFileSync(name, '')
    fs.truncateSync(name, FILE_SIZE)
    const fd = fs.openSync(name, 'r+')
    const handle = native.map(fd, FILE_SIZE, true)
    fs.closeSync(fd)
    try {
      handle.advise(0, FILE_SIZE, 'random')
      await handle.warmAsync(PAGE, 2 * PAGE)
      expect(cachedBytes(name)).toBe(2 * PAGE)
    } finally {
      handle.close()
    }
  })

  it('readAround false: a fault in a hole of a mapped file reads that page alone', () => {
    // (Without the advice, the same fault reads up to the device's read-ahead: 8 MiB here.)
    const name = join(dir, formatOffsetName(0))
    fs.writeFileSync(name, '')
    fs.truncateSync(name, FILE_SIZE)
    const file = MappedFile.open(name, FILE_SIZE, { readOnly: true, readAround: false })
    try {
      file.setPositions(FILE_SIZE)
      const view = file.selectMappedBuffer(FILE_SIZE / 2, 16)
      expect(view).not.toBeNull()
      try {
        expect(view!.buffer[0]).toBe(0)
      } finally {
        view!.release()
      }
      expect(cachedBytes(name)).toBe(PAGE)
    } finally {
      file.shutdown(0)
    }
  })

  it("a store maps its consume queues' files with random-access advice, its commit log without", async () => {
    const store = await MessageStore.open(dir)
    try {
      const put = await store.putMessage({ topic: 'T', queueId: 0, body: Buffer.from('one') })
      expect(put.status).toBe('PUT_OK')
      expect(store.getMessage('g', 'T', 0, 0, 1).messages).toHaveLength(1)
      expect(mappingFlags(join(dir, 'consumequeue', 'T', '0', formatOffsetName(0)))).toContain('rr')
      expect(mappingFlags(join(dir, 'commitlog', formatOffsetName(0)))).not.toContain('rr')
    } finally {
      await store.close()
    }
    // Reopened: the queue's file is mapped on first use, with the same advice.
    const again = await MessageStore.open(dir)
    try {
      expect(again.getMessage('g', 'T', 0, 0, 1).messages).toHaveLength(1)
      expect(mappingFlags(join(dir, 'consumequeue', 'T', '0', formatOffsetName(0)))).toContain('rr')
    } finally {
      await again.close()
    }
  })
})
