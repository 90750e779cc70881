// What a compacted queue's open tells the store's logger: a rewrite a crash interrupted (finished or
// undone by the open), and an active file whose tail is not a record (torn by a crash, or damaged).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { smallStoreOptions } from '../helpers/compaction.js'
import { tempDir } from '../helpers/tmp.js'

const T = 'kv'
let dir: string
let logs: string[]

const options = () =>
  smallStoreOptions({
    topics: { [T]: { cleanupPolicy: 'compact', segmentBytes: 4096 } },
    logger: (level, message) => logs.push(`${level} ${message}`),
  })

beforeEach(() => {
  dir = tempDir('mqstore-compaction-open-logs-')
  logs = []
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

/** A store whose compacted queue holds 60 records over several compaction-log files; its log's files. */
async function filled(): Promise<{ logDir: string; files: string[] }> {
  const store = await MessageStore.open(dir, options())
  try {
    for (let i = 0; i < 60; i++) {
      expect((await store.putMessage({ topic: T, queueId: 0, body: `v${i}`.padEnd(200, '.'), keys: `k${i}` })).status).toBe('PUT_OK')
    }
  } finally {
    await store.close()
  }
  const logDir = join(dir, 'compaction', T, '0')
  const files = fs.readdirSync(logDir).sort()
  expect(files.length).toBeGreaterThan(2)
  return { logDir, files }
}

function bodies(store: MessageStore): string[] {
  return store.getMessage('g', T, 0, 0, 100).messages.map((m) => Buffer.from(m.body).toString().replace(/\.+$/, ''))
}

describe('a compacted queue at open', () => {
  it('logs the rewrite a crash interrupted that the open undid, and serves what it served before', async () => {
    const { logDir, files } = await filled()
    // A pass that crashed after writing its rewrite of the first file, before any swap.
    fs.copyFileSync(join(logDir, files[1]), join(logDir, `${files[0]}.cleaned`))
    const store = await MessageStore.open(dir, options())
    try {
      expect(logs).toContainEqual(`info compaction log ${T}/0: recovered a rewrite a crash interrupted; removed ${files[0]}.cleaned`)
      expect(fs.readdirSync(logDir).sort()).toEqual(files)
      expect(bodies(store)).toEqual(Array.from({ length: 60 }, (_, i) => `v${i}`))
    } finally {
      await store.close()
    }
  })

  it('logs the rewrite a crash interrupted that the open finished', async () => {
    const { logDir, files } = await filled()
    // A pass that crashed after its swap file was complete, before it took the final name.
    fs.renameSync(join(logDir, files[0]), join(logDir, `${files[0]}.swap`))
    const store = await MessageStore.open(dir, options())
    try {
      expect(logs).toContainEqual(`info compaction log ${T}/0: recovered a rewrite a crash interrupted; rolled forward ${files[0]}.swap`)
      expect(fs.readdirSync(logDir).sort()).toEqual(files)
      expect(bodies(store)).toEqual(Array.from({ length: 60 }, (_, i) => `v${i}`))
    } finally {
      await store.close()
    }
  })

  it("warns of an active file's tail that is not a record; the records it dropped come back from the commit log", async () => {
    const { logDir, files } = await filled()
    const active = join(logDir, files.at(-1) as string)
    // The active file's first record damaged (its magic code): nothing of the file is a record.
    const fd = fs.openSync(active, 'r+')
    try {
      fs.writeSync(fd, Buffer.from([0xde, 0xad, 0xbe, 0xef]), 0, 4, 4)
    } finally {
      fs.closeSync(fd)
    }
    const store = await MessageStore.open(dir, options())
    try {
      expect(logs).toContainEqual(
        `warn compaction log ${T}/0: dropped what follows byte 0 of ${active} (not a record there: torn by a crash, or damaged)`,
      )
      expect(store.stats().repairs).toEqual([])
      // The commit log still holds them: the open's reconciliation puts them in the log again.
      expect(bodies(store)).toEqual(Array.from({ length: 60 }, (_, i) => `v${i}`))
      expect(store.getMaxOffsetInQueue(T, 0)).toBe(60)
    } finally {
      await store.close()
    }
  })
})
