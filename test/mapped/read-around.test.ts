// Page faults on file mappings read around the faulting page (up to the device's read-ahead, 8 MiB
// on some disks). For a new or small, sparse file that is megabytes of holes read as pages of
// zeros: the addon's warm-up populates only the range it is given. Linux only: the read-around
// and the page-cache count (util-linux's fincore) are Linux's.
import { execFileSync } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { native } from '../../lib/native.js'
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

  it('a warm-up of a reopened sparse file faults in its range only', async () => {
    const name = join(dir, 'sparse')
    fs.writeFileSync(name, '')
    fs.truncateSync(name, FILE_SIZE)
    const fd = fs.openSync(name, 'r+')
    const handle = native.map(fd, FILE_SIZE, true)
    fs.closeSync(fd)
    try {
      await handle.warmAsync(PAGE, 2 * PAGE)
      expect(cachedBytes(name)).toBe(2 * PAGE)
    } finally {
      handle.close()
    }
  })
})
