// The commit-log write-back that a crash open starts before its scan (crash-sync.ts): it settles
// once every file is synced, and a file it cannot sync is reported as a typed error rather than
// a rejection (open may fail before it waits for the write-back).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MQStoreError } from '../lib/errors.js'
import { syncCommitLogAhead } from '../lib/store/recovery/crash-sync.js'
import { tempDir } from './helpers/tmp.js'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

function filesIn(count: number): string[] {
  const dir = tempDir('mqstore-syncahead-')
  dirs.push(dir)
  return Array.from({ length: count }, (_, i) => {
    const path = join(dir, String(i).padStart(20, '0'))
    fs.writeFileSync(path, Buffer.alloc(64 * 1024, i + 1))
    return path
  })
}

describe('syncCommitLogAhead', () => {
  it('resolves with null once every file is synced, and at once for no file', async () => {
    await expect(syncCommitLogAhead(filesIn(6))).resolves.toBeNull()
    await expect(syncCommitLogAhead([])).resolves.toBeNull()
  })

  it('resolves with an IO_ERROR naming a file it cannot open, after syncing the others', async () => {
    const files = filesIn(3)
    const missing = `${files[1]}-gone`
    const failure = await syncCommitLogAhead([files[0], missing, files[2]])
    expect(failure).toBeInstanceOf(MQStoreError)
    expect((failure as MQStoreError).code).toBe('IO_ERROR')
    expect((failure as MQStoreError).message).toContain(missing)
  })
})
