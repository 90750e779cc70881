// The mapping budget counts a file for what it can have touched (written or reserved), not its
// full size, and caps the number of mapped files: thousands of small queues stay mapped, so their
// puts do not map and unmap a file each.
import { describe, expect, it } from 'vitest'

import { type BudgetedFile, MappingBudget } from '../../lib/store/mapped/mapping-budget.js'
import { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'

const MiB = 1024 * 1024

/** A file that unmaps when asked (always idle), with positions the test moves. */
class FakeFile implements BudgetedFile {
  mapped = true
  constructor(
    readonly budget: MappingBudget,
    readonly fileSize: number,
    public reservedPosition?: number,
    public wrotePosition = 0,
  ) {}
  unmapIfIdle(): boolean {
    if (!this.mapped) return false
    this.mapped = false
    this.budget.unmapped(this)
    return true
  }
}

describe('mapping budget', () => {
  const clock = () => 0

  it('counts a file by what is written or reserved (at least a page), and its whole size when it has no reservation', () => {
    const budget = new MappingBudget({ maxBytes: 64 * MiB, idleMs: 1_000, clock })
    const small = new FakeFile(budget, 6 * MiB, 0)
    budget.mapped(small)
    expect(budget.mappedBytes).toBe(4096)
    small.reservedPosition = 64 * 1024
    budget.used(small)
    expect(budget.mappedBytes).toBe(64 * 1024)
    // A reopened file written further than its (new, lazily started) reservation counts for what was written.
    const reopened = new FakeFile(budget, 6 * MiB, 0, 2 * MiB)
    budget.mapped(reopened)
    expect(budget.mappedBytes).toBe(64 * 1024 + 2 * MiB)
    const whole = new FakeFile(budget, 8 * MiB)
    budget.mapped(whole)
    expect(budget.mappedBytes).toBe(64 * 1024 + 10 * MiB)
    budget.unmapped(small)
    budget.unmapped(reopened)
    budget.unmapped(whole)
    expect(budget.mappedBytes).toBe(0)
    expect(budget.mappedFiles).toBe(0)
  })

  it('a file that grows past the budget pushes the least recently used idle files out', () => {
    const budget = new MappingBudget({ maxBytes: 1 * MiB, idleMs: 1_000, clock })
    const files = [0, 1, 2].map(() => new FakeFile(budget, 6 * MiB, 256 * 1024))
    for (const file of files) budget.mapped(file)
    expect(budget.mappedBytes).toBe(768 * 1024)
    files[2].reservedPosition = 768 * 1024
    budget.used(files[2])
    // 256 + 256 + 768 KiB > 1 MiB: the oldest goes, the growing one stays.
    expect(files.map((f) => f.mapped)).toEqual([false, true, true])
    expect(budget.mappedBytes).toBe(1 * MiB)
  })

  it('unmaps the least recently used idle files past maxFiles, however few bytes they count for', () => {
    const budget = new MappingBudget({ maxBytes: 1024 * MiB, idleMs: 1_000, clock, maxFiles: 3 })
    const files = [0, 1, 2, 3, 4].map(() => new FakeFile(budget, 6 * MiB, 0))
    for (const file of files.slice(0, 3)) budget.mapped(file)
    budget.used(files[0])
    budget.mapped(files[3])
    expect(files.map((f) => f.mapped)).toEqual([true, false, true, true, true])
    budget.mapped(files[4])
    expect(files.map((f) => f.mapped)).toEqual([true, false, false, true, true])
    expect(budget.mappedFiles).toBe(3)
    expect(() => new MappingBudget({ maxBytes: 0, idleMs: 0, clock, maxFiles: 0 })).toThrow(RangeError)
  })

  it('a store with 300 small queues of full-size (6 MB) files maps each queue file once under the default 256 MiB budget', async () => {
    const dir = tempDir('mqstore-budget-')
    const store = await MessageStore.open(dir, { mappedFileSizeCommitLog: 4 * MiB, flushDiskType: 'ASYNC_FLUSH' })
    try {
      const queues = 300
      for (let round = 0; round < 3; round++) {
        const batch = Array.from({ length: queues }, (_, q) => ({
          topic: `t${q % 10}`,
          queueId: Math.floor(q / 10),
          body: Buffer.from(`r${round}q${q}`),
        }))
        for (const message of batch) expect((await store.putMessage(message)).status).toBe('PUT_OK')
      }
      const mapping = store.stats().mapping
      // Counted by size, 300 files of 6 MB would be 1.7 GiB: every put past the 42nd queue would unmap another.
      expect(mapping.unmaps).toBe(0)
      expect(mapping.mappedFiles).toBeGreaterThanOrEqual(queues)
      expect(mapping.maps).toBeLessThanOrEqual(mapping.mappedFiles)
      expect(mapping.mappedBytes).toBeLessThan(32 * MiB)
      const got = store.getMessage('g', 't7', 29, 0, 8)
      expect(got.messages.map((m) => Buffer.from(m.body).toString())).toEqual(['r0q297', 'r1q297', 'r2q297'])
    } finally {
      await store.close()
    }
  })
})
