// Compaction as a step of the simulator (test/helpers/simulator.ts): a compacted topic with a small
// key space gets keyed puts and tombstones, and `compact()` passes run as steps, sometimes with a
// power cut armed inside. The model of what the compacted queues must serve:
//
// - for each key, its latest version is readable in its queue and by getLatestByKey (while its
//   commit-log file exists; the index reads the commit log); a tombstone may disappear once its
//   delete horizon can have passed (deleteRetentionMs after it was put, the earliest a pass could
//   have stamped it), and then no older version of its key may come back;
// - superseded versions may or may not be served, never changed;
// - queue offsets only grow: a queue's max stays above every offset it handed out, reads go up
//   through the survivors skipping removed offsets, and a new put never gets an offset again.
//
// After a power cut the commit log says which versions survived (those at or above its minimum);
// below it, a version whose commit-log file retention deleted lives only in the compaction log, so
// one that was not durable may be gone.
import type { MessageExt } from '../../lib/index.js'
import type { ModelMessage, SimHost } from './simulator-model.js'

export const KV_TOPIC = 'sim-kv'
export const KV_QUEUES = 2
const KV_KEYS = 8
const DELETE_RETENTION_MS = 30 * 60_000

/** The compacted topic's settings (small segments, so that passes have sealed files to clean). */
export const KV_TOPIC_CONFIG = {
  cleanupPolicy: 'compact',
  segmentBytes: 4096,
  minCleanableDirtyRatio: 0.1,
  deleteRetentionMs: DELETE_RETENTION_MS,
} as const

/** The message property that names a model message (the compaction key is the whole KEYS). */
export const SIM_ID = 'SIMID'

export class CompactionModel {
  /** Storage events the last uncut pass made (where an armed cut is placed). */
  private lastPassEvents = 40

  /** A keyed update (sometimes a tombstone) of the compacted topic. */
  newMessage(host: SimHost, key: string): ModelMessage {
    const k = host.int(KV_KEYS)
    const tombstone = host.int(6) === 0
    const body = Buffer.alloc(tombstone ? 0 : 1 + host.int(300))
    for (let i = 0; i < body.length; i++) body[i] = host.int(256)
    return {
      key,
      topic: KV_TOPIC,
      queueId: k % KV_QUEUES,
      tags: 'kv',
      keys: [`kv-${k}`],
      properties: { [SIM_ID]: key },
      body,
      wroteOffset: -1,
      wroteBytes: 0,
      queueOffset: -1,
      durable: false,
      acked: false,
      present: true,
      compacted: true,
      putMs: Date.now(),
    }
  }

  /** A put was answered: its queue offset must be new (compaction never lowers a queue's max). */
  accepted(host: SimHost, m: ModelMessage): void {
    for (const other of host.messages.values()) {
      if (other !== m && other.compacted && other.present && other.queueId === m.queueId)
        host.check(other.queueOffset < m.queueOffset, () => `${KV_TOPIC}/${m.queueId} handed out queue offset ${m.queueOffset} again`)
    }
  }

  /** One compaction pass over the topic, maybe cut by the power. */
  async step(host: SimHost): Promise<void> {
    host.report.compactionPasses++
    const disk = host.disk!
    const armed = host.int(3) === 0
    // Within as many events as the last pass made (a pass with nothing to clean makes few).
    if (armed) disk.options.cutAtEvent = disk.events + 1 + host.int(Math.max(4, this.lastPassEvents))
    const before = disk.events
    const report = await host.store!.compact(KV_TOPIC)
    this.lastPassEvents = disk.events - before
    if (disk.cut !== null) {
      host.report.cutsDuringCompaction++
      host.log(`power cut during a compaction pass at event ${disk.cut.event} (${disk.cut.at})`)
      await host.afterOperation()
      return
    }
    if (armed) disk.options.cutAtEvent = null
    host.log(
      `compaction: ${this.lastPassEvents} storage events, ${report.recordsKept} kept, ${report.recordsDropped} dropped over ${report.queues.length} queues`,
    )
    host.check(report.failed.length === 0, () => `compaction pass failed: ${JSON.stringify(report.failed)}`)
    host.report.recordsCompactedAway += report.recordsDropped
    this.check(host, false)
  }

  /** A read from a random offset: survivors in order, each unchanged, none skipped that must be served. */
  read(host: SimHost): void {
    const store = host.store!
    const queueId = host.int(KV_QUEUES)
    const max = store.getMaxOffsetInQueue(KV_TOPIC, queueId)
    const offset = host.int(max + 2)
    const got = store.getMessage('reader', KV_TOPIC, queueId, offset, 1 + host.int(8))
    let previous = offset - 1
    for (const found of got.messages) {
      host.check(
        found.queueOffset > previous,
        () => `${KV_TOPIC}/${queueId} read at ${offset} served ${found.queueOffset} after ${previous}`,
      )
      previous = found.queueOffset
      const m = host.matchServed(found)
      host.check(m.compacted === true && m.queueId === queueId, () => `${KV_TOPIC}/${queueId} served ${m.key} of ${m.topic}/${m.queueId}`)
    }
    if (host.damaged) return
    const required = this.latest(host).some(
      (m) => m.queueId === queueId && m.queueOffset >= offset && !this.mayBeDropped(m) && (m.durable || m.present),
    )
    if (required)
      host.check(got.messages.length > 0, () => `${KV_TOPIC}/${queueId} read at ${offset} (max ${max}): ${got.status}, nothing served`)
  }

  /** A tombstone whose horizon may have passed: a pass may have dropped it. */
  private mayBeDropped(m: ModelMessage): boolean {
    return m.body.length === 0 && Date.now() >= (m.putMs ?? 0) + DELETE_RETENTION_MS
  }

  /** The latest model version of each key. */
  private latest(host: SimHost): ModelMessage[] {
    const byKey = new Map<string, ModelMessage>()
    for (const m of host.messages.values()) {
      if (m.compacted !== true) continue
      const other = byKey.get(m.keys[0])
      if (other === undefined || other.queueOffset < m.queueOffset) byKey.set(m.keys[0], m)
    }
    return [...byKey.values()]
  }

  /**
   * Walks the compacted queues and checks the model; after a reopen it first learns from the
   * commit log which versions survived the cut.
   */
  check(host: SimHost, reopened: boolean): void {
    const store = host.store!
    const minPhy = store.getMinPhyOffset()
    const versions = [...host.messages.values()].filter((m) => m.compacted === true)
    if (reopened) {
      for (const m of versions) {
        // Below the log's start only the compaction log can hold it, and a cut can take its
        // unsynced tail (damage, any of it): present again only if the walk below serves it.
        if (m.wroteOffset < minPhy) {
          m.present = false
          continue
        }
        const found = store.lookMessageByOffset(m.wroteOffset)
        // Whatever is there must be a message that was put; after damage the model keeps lost
        // messages, whose offsets later puts may have taken.
        if (found !== null) host.matchServed(found)
        if (found !== null && found.properties[SIM_ID] === m.key) {
          m.present = true
          m.durable = true
          continue
        }
        host.check(
          !m.durable || host.damaged,
          () => `${m.key} (${KV_TOPIC}/${m.queueId} queue offset ${m.queueOffset}, commit-log ${m.wroteOffset}) was durable and is lost`,
        )
        m.present = false
        if (!host.damaged) host.messages.delete(m.key)
      }
    }

    const served = new Map<string, MessageExt[]>()
    for (let queueId = 0; queueId < KV_QUEUES; queueId++) {
      const max = store.getMaxOffsetInQueue(KV_TOPIC, queueId)
      let offset = 0
      let last = -1
      for (let turn = 0; turn < 10_000 && offset < max; turn++) {
        const got = store.getMessage('checker', KV_TOPIC, queueId, offset, 32)
        for (const found of got.messages) {
          host.check(
            found.queueOffset > last && found.queueOffset >= offset,
            () => `${KV_TOPIC}/${queueId}: ${found.queueOffset} served after ${last}`,
          )
          last = found.queueOffset
          const m = host.matchServed(found)
          host.check(
            m.compacted === true && m.queueId === queueId,
            () => `${KV_TOPIC}/${queueId} served ${m.key} of ${m.topic}/${m.queueId}`,
          )
          served.set(m.keys[0], [...(served.get(m.keys[0]) ?? []), found])
          m.present = true
        }
        if (got.nextBeginOffset <= offset) break
        offset = got.nextBeginOffset
      }
      for (const m of host.messages.values()) {
        if (m.compacted === true && m.queueId === queueId && m.present)
          host.check(m.queueOffset < max, () => `${KV_TOPIC}/${queueId} max offset ${max} is not above ${m.key}'s ${m.queueOffset}`)
      }
    }

    const byKey = new Map<string, ModelMessage[]>()
    for (const m of host.messages.values()) {
      if (m.compacted === true) byKey.set(m.keys[0], [...(byKey.get(m.keys[0]) ?? []), m])
    }
    for (const [key, all] of byKey) {
      all.sort((a, b) => a.queueOffset - b.queueOffset)
      const servedKeys = new Set((served.get(key) ?? []).map((f) => f.properties[SIM_ID]))
      // After a cut, a latest version below the commit log's minimum that was not durable and that
      // nothing serves was lost with the compaction log's unsynced tail.
      while (reopened && !host.damaged && all.length > 0) {
        const l = all.at(-1)!
        if (servedKeys.has(l.key) || l.durable || l.wroteOffset >= minPhy) break
        // A tombstone past its horizon that a pass dropped with every older version (a pass drops
        // older versions only for a newer one that is durable) is the latest still.
        if (this.mayBeDropped(l) && servedKeys.size === 0) break
        host.messages.delete(l.key)
        all.pop()
      }
      const latest = all.at(-1)
      if (latest === undefined || host.damaged) continue
      if (!servedKeys.has(latest.key)) {
        host.check(
          this.mayBeDropped(latest),
          () =>
            `latest version of ${key} (${latest.key}, queue offset ${latest.queueOffset}, ${latest.body.length} bytes${latest.durable ? ', durable' : ''}) is not served; served: ${[...servedKeys]}`,
        )
        host.check(servedKeys.size === 0, () => `${key} was deleted (tombstone dropped) but older versions ${[...servedKeys]} are served`)
      }
      const byIndex = store.getLatestByKey(KV_TOPIC, key)
      if (byIndex !== null) host.matchServed(byIndex)
      if (latest.wroteOffset >= minPhy)
        host.check(
          byIndex?.properties[SIM_ID] === latest.key,
          () => `getLatestByKey(${key}) gave ${byIndex?.properties[SIM_ID] ?? 'null'}, latest is ${latest.key}`,
        )
      else host.check(byIndex === null, () => `getLatestByKey(${key}) served ${byIndex?.properties[SIM_ID]} below the min offset ${minPhy}`)
    }
  }
}
