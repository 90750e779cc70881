// The small files a store reads at open: most are optional and absent, and a missing one reads as
// null without an exception; other failures still surface.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { readFileWithBackup, readTextIfExists, writeFileDurably } from '../../lib/store/mapped/directory.js'
import { tempDir } from '../helpers/tmp.js'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

function newDir(): string {
  const dir = tempDir('mqstore-directory-')
  dirs.push(dir)
  return dir
}

describe('readTextIfExists', () => {
  it('reads a file that is there, and null for one that is not', () => {
    const dir = newDir()
    const path = join(dir, 'present.json')
    fs.writeFileSync(path, '{"a":1}\n')
    expect(readTextIfExists(path)).toBe('{"a":1}\n')
    expect(readTextIfExists(join(dir, 'absent.json'))).toBeNull()
    expect(readTextIfExists(join(dir, 'no-such-dir', 'absent.json'))).toBeNull()
  })

  it('throws what is not a missing file: a directory where the file should be', () => {
    const dir = newDir()
    const path = join(dir, 'a-directory')
    fs.mkdirSync(path)
    expect(() => readTextIfExists(path)).toThrow(expect.objectContaining({ code: 'EISDIR' }))
  })
})

describe('readFileWithBackup', () => {
  it('takes the backup when the file is missing or does not parse, and null when neither is there', () => {
    const dir = newDir()
    const path = join(dir, 'offsets.json')
    expect(readFileWithBackup(path)).toBeNull()
    writeFileDurably(path, '{"v":1}', { backup: true })
    writeFileDurably(path, '{"v":2}', { backup: true })
    expect(readFileWithBackup(path)).toEqual({ v: 2 })
    fs.writeFileSync(path, '{"v":')
    expect(readFileWithBackup(path)).toEqual({ v: 1 })
    fs.rmSync(path)
    expect(readFileWithBackup(path)).toEqual({ v: 1 })
    fs.rmSync(`${path}.bak`)
    expect(readFileWithBackup(path)).toBeNull()
  })
})
