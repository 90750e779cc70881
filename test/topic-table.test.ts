import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { MQStoreError } from '../lib/errors.js'
import { TopicTable, TOPIC_CONFIG_DEFAULTS } from '../lib/store/topics/topic-table.js'
import { ManualClock } from './helpers/compaction.js'
import { tempDir } from './helpers/tmp.js'

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-topics-')
})
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

describe('topic table', () => {
  it('persists settings in RocketMQ topics.json shape plus our fields, and reads them back', () => {
    const path = join(dir, 'config', 'topics.json')
    const clock = new ManualClock(1_700_000_000_000)
    const t = new TopicTable(path, clock)
    t.load()
    const c = t.set('orders', { cleanupPolicy: 'delete,compact', deleteRetentionMs: 5000 })
    expect(c).toEqual({ ...TOPIC_CONFIG_DEFAULTS, cleanupPolicy: 'compact,delete', deleteRetentionMs: 5000 })
    t.set('orders', { minCompactionLagMs: 10 })
    const json = JSON.parse(fs.readFileSync(path, 'utf8'))
    expect(json.topicConfigTable.orders).toEqual({
      topicName: 'orders',
      readQueueNums: 8,
      writeQueueNums: 8,
      perm: 6,
      topicFilterType: 'SINGLE_TAG',
      topicSysFlag: 0,
      order: false,
      cleanupPolicy: 'compact,delete',
      deleteRetentionMs: 5000,
      minCompactionLagMs: 10,
    })
    expect(json.dataVersion).toEqual({ timestamp: 1_700_000_000_000, counter: 2 })
    const again = new TopicTable(path, clock)
    again.load()
    expect(again.get('orders')).toEqual(t.get('orders'))
    expect(again.get('unknown')).toEqual(TOPIC_CONFIG_DEFAULTS)
  })

  it('refuses unknown fields and bad values with INVALID_OPTION, changing nothing', () => {
    const t = new TopicTable(join(dir, 'topics.json'), new ManualClock())
    const bad: unknown[] = [
      { cleanupPolicy: 'compacted' },
      { cleanupPolicy: 'compact,compact' },
      { minCleanableDirtyRatio: 1.5 },
      { minCompactionLagMs: -1 },
      { maxCompactionLagMs: 0 },
      { segmentBytes: 100 },
      { retentionMs: -2 },
      { deleteRetentionMs: 1.5 },
      { retention: 5 },
      { minCompactionLagMs: 10, maxCompactionLagMs: 5 },
      null,
    ]
    for (const input of bad) {
      let error: unknown
      try {
        t.set('orders', input)
      } catch (e) {
        error = e
      }
      expect(error, JSON.stringify(input)).toBeInstanceOf(MQStoreError)
      expect((error as MQStoreError).code).toBe('INVALID_OPTION')
    }
    expect(t.has('orders')).toBe(false)
    expect(() => t.set('bad topic!', { cleanupPolicy: 'compact' })).toThrow(MQStoreError)
  })

  it('keeps RocketMQ fields it does not interpret and refuses a file with bad settings', () => {
    const path = join(dir, 'topics.json')
    fs.writeFileSync(
      path,
      JSON.stringify({
        topicConfigTable: {
          a: { topicName: 'a', readQueueNums: 4, writeQueueNums: 2, perm: 6, topicFilterType: 'SINGLE_TAG', topicSysFlag: 0, order: true },
        },
      }),
    )
    const t = new TopicTable(path, new ManualClock())
    t.load()
    t.set('a', { cleanupPolicy: 'compact' })
    expect(t.entry('a')).toMatchObject({ readQueueNums: 4, writeQueueNums: 2, order: true, cleanupPolicy: 'compact' })
    fs.writeFileSync(path, JSON.stringify({ topicConfigTable: { a: { cleanupPolicy: 'nope' } } }))
    expect(() => new TopicTable(path, new ManualClock()).load()).toThrow(/cleanupPolicy/)
  })
})
