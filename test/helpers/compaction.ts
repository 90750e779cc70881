// Builds real commit-log records for compaction-unit tests and reads compacted queues back.
import {
  checkRecord,
  decodeMessage,
  encodeProperties,
  isPrepareFailure,
  prepareRecord,
  writeRecord,
  type DispatchRequest,
} from '../../lib/store/commitlog/record.js'
import type { CompactionService } from '../../lib/store/compaction/compaction-service.js'
import type { Clock } from '../../lib/store/environment.js'
import type { OpenOptions } from '../../lib/store/types.js'

export class ManualClock implements Clock {
  t: number
  constructor(t = 1_700_000_000_000) {
    this.t = t
  }
  now(): number {
    return this.t
  }
  advance(ms: number): void {
    this.t += ms
  }
}

/** A record of `topic`/`queueId` at `queueOffset`; `value` null makes a tombstone (empty body). */
export function makeRecord(
  topic: string,
  queueId: number,
  queueOffset: number,
  key: string | undefined,
  value: string | null,
  storeTimestamp: number,
  tags?: string,
): { request: DispatchRequest; bytes: Buffer } {
  const prepared = prepareRecord(
    {
      topic,
      queueId,
      body: Buffer.from(value ?? ''),
      flag: 0,
      sysFlag: 0,
      bornTimestamp: storeTimestamp,
      bornHost: { address: '127.0.0.1', port: 1 },
      storeHost: { address: '127.0.0.1', port: 10911 },
      reconsumeTimes: 0,
      preparedTransactionOffset: 0,
      propertiesString: encodeProperties({ KEYS: key, TAGS: tags }),
    },
    4 * 1024 * 1024,
  )
  if (isPrepareFailure(prepared)) throw new Error(prepared.reason)
  const bytes = Buffer.alloc(prepared.length)
  writeRecord(bytes, 0, prepared, queueOffset, 1_000_000 + queueOffset * 1000, storeTimestamp)
  const request = checkRecord(bytes, 0, bytes.length, true)
  if (request.status !== 'OK') throw new Error(request.reason)
  return { request, bytes }
}

export interface Survivor {
  offset: number
  key: string
  value: string
  tombstone: boolean
  horizon: string | undefined
}

/** Every record a reader from offset 0 sees in the queue. */
export function readAll(service: CompactionService, topic: string, queueId: number, from = 0): Survivor[] {
  const out: Survivor[] = []
  service.read(topic, queueId, from, (data, position) => {
    const m = decodeMessage(data, position, true)
    if (m === null) throw new Error(`no record at ${position}`)
    out.push({
      offset: m.queueOffset,
      key: m.properties.KEYS,
      value: m.body.toString(),
      tombstone: m.body.length === 0,
      horizon: m.properties.DELETE_HORIZON,
    })
    return true
  })
  return out
}

/**
 * Options of a store small enough that a few dozen puts fill several files of each kind (64 KiB
 * commit-log files, consume-queue files of 200 units, an index of 64 slots and 256 entries), with
 * compaction passes run only when a test asks; `extra` overrides (the topics, a clock, a logger).
 */
export function smallStoreOptions(extra: OpenOptions = {}): OpenOptions {
  return {
    mappedFileSizeCommitLog: 64 * 1024,
    mappedFileSizeConsumeQueue: 20 * 200,
    maxHashSlotNum: 64,
    maxIndexNum: 256,
    compaction: { enabled: false, fileDeleteDelayMs: 0 },
    ...extra,
  }
}
