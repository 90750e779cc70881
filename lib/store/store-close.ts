// A store's close, in order: stop the services, flush, save the consumer offsets, vouch for the
// files with the shutdown record, take the figures at close, unmap, remove the abort file, release
// the lock. Every step runs even when an earlier one fails (see shutdown-steps.ts), so close
// always releases every mapping, descriptor and the lock, then throws what failed.
import * as fs from 'node:fs'
import { sep } from 'node:path'

import type { CleanupService } from './cleanup/cleanup-service.js'
import type { CommitLog } from './commitlog/commit-log.js'
import type { CompactedTopics } from './compaction/compacted-topics.js'
import type { ConsumerOffsets } from './consumer-offsets.js'
import type { Dispatcher } from './dispatcher.js'
import type { CommitLogFlusher } from './flusher.js'
import type { IndexSlot } from './index/index-slot.js'
import { native } from '../native.js'
import { descriptors } from './mapped/descriptors.js'
import { syncDirectory } from './mapped/directory.js'
import type { TransientStorePool } from './mapped/transient-store-pool.js'
import type { ConsumeQueueTable } from './queue/queue-table.js'
import type { RunningFlags } from './running-flags.js'
import type { ServiceLoop } from './service-loop.js'
import { closeInSteps } from './shutdown-steps.js'
import type { StoreCheckpoint } from './store-checkpoint.js'
import type { StoreLock } from './store-lock.js'
import type { StoreLog } from './store-logger.js'
import type { StorePaths } from './store-paths.js'
import type { StoreStatsService } from './store-stats.js'

/** The parts of a store that close touches. */
export interface ClosingStore {
  cleanup: CleanupService
  loops: readonly ServiceLoop[]
  statsService: StoreStatsService
  dispatcher: Dispatcher
  compacted: CompactedTopics
  flusher: CommitLogFlusher
  commitLog: CommitLog
  queues: ConsumeQueueTable
  index: IndexSlot
  checkpoint: StoreCheckpoint
  consumerOffsets: ConsumerOffsets
  flags: RunningFlags
  pool: TransientStorePool | null
  paths: StorePaths
  lock: StoreLock
  logger: StoreLog
  /** Saves its progress once the commit log is flushed. */
  schedule: { saveAtClose(onError: (error: Error) => void): void }
  /** The files are about to be unmapped: from here on stats() gives the figures at close. */
  takeFigures(): void
}

export function closeStore(store: ClosingStore): Promise<void> {
  const { commitLog, queues, checkpoint, dispatcher, paths } = store
  /** What the sync of the consume queues and the index ended with (see stopServices); undefined until then. */
  let derivedFlushed: Promise<unknown> | undefined
  return closeInSteps({
    log: (message) => store.logger('error', message),
    stopServices: async () => {
      // The commit log's next file, made ahead and empty, goes while the syncs run.
      const prepared = commitLog.mappedFileQueue.dropPrepared().catch(() => undefined)
      await store.cleanup.stop()
      for (const loop of store.loops) await loop.stop()
      store.statsService.shutdown()
      dispatcher.doReput()
      await dispatcher.settle()
      dispatcher.stop()
      await store.compacted.close()
      dropMappedPages(store)
      // Nothing is dispatched any more: the consume queues and the index are synced on the libuv
      // pool while the commit log is (a burst leaves all three dirty; one after another, close
      // waited for the sum). The checkpoint is written after all of them, in the flush step.
      const derived = flushDerived(store)
      derivedFlushed = derived
      await store.flusher.shutdown()
      await commitLog.closeZeroAhead()
      await commitLog.mappedFileQueue.settle()
      await derived
      await store.index.current.settle()
      await prepared
    },
    durable: () => !store.flags.isSet('NOT_WRITEABLE'),
    flush: async () => {
      const failure = await (derivedFlushed ?? flushDerived(store))
      if (failure !== null) throw failure
      const logQueue = commitLog.mappedFileQueue
      if (logQueue.storeTimestamp > 0) checkpoint.physicMsgTimestamp = logQueue.storeTimestamp
      checkpoint.flush()
    },
    saveOffsets: async () => {
      await store.consumerOffsets.settle()
      store.consumerOffsets.saveAtClose((error) => store.logger('error', `consumer offsets not saved at close: ${error.message}`))
      store.schedule.saveAtClose((error) => store.logger('error', `delay offsets not saved at close: ${error.message}`))
    },
    caughtUp: () => dispatcher.behindBytes() <= 0 && !dispatcher.failed,
    writeShutdownRecord: () =>
      checkpoint.writeShutdownRecord(
        {
          endOffset: commitLog.getMaxOffset(),
          lastRecordOffset: commitLog.lastRecordOffset,
          ...queues.summary(),
        },
        queues.ends(),
      ),
    takeFigures: () => store.takeFigures(),
    unmap: [
      ['unmap consume queues', () => queues.shutdown()],
      ['unmap the index', () => store.index.current.shutdown()],
      ['unmap the commit log', () => commitLog.shutdown()],
      ['unmap the checkpoint', () => checkpoint.shutdown()],
      ['release the write buffers', () => store.pool?.destroy()],
    ],
    removeAbortFile: () => {
      fs.rmSync(paths.abort, { force: true })
      syncDirectory(paths.abort)
    },
    distrustAbortFile: () => {
      if (fs.existsSync(paths.abort)) fs.writeFileSync(paths.abort, '')
    },
    releaseLock: () => store.lock.release(),
    forgetDescriptors: () => descriptors.forgetUnder(paths.root + sep),
  })
}

/**
 * Drops the pages close syncs from their mappings (the bytes stay in the page cache, dirty ones
 * dirty): the syncs then clean them without write-protecting each mapped page, a TLB shootdown
 * per page (see dropPages). Nothing writes them any more. Only what may be dirty: below its
 * flushed position a file is clean (the log and the queues are written in order), and an index
 * file without unflushed changes is clean; the unmap takes their pages out anyway, and dropping
 * them first only did that work twice (after a read phase, most of every file is mapped).
 */
function dropMappedPages(store: ClosingStore): void {
  const files = [...store.commitLog.mappedFileQueue.mappedFiles]
  for (const queue of store.queues.all()) files.push(...queue.mappedFileQueue.mappedFiles)
  for (const file of files) {
    const from = Math.floor(file.flushedPosition / native.pageSize) * native.pageSize
    if (from < file.fileSize) file.dropPages(from, file.fileSize, false)
  }
  for (const file of store.index.current.getFiles()) if (file.hasUnflushedChanges()) file.dropPages()
}

/**
 * Syncs the consume queues and the index at once, msync on the libuv pool; resolves with the
 * first failure, or null (never rejects: the flush step reports it). Rolled index files are held
 * until their background flush ends: once it has, this skips them and the unmap step releases
 * them (none is left mapped after close).
 */
async function flushDerived(store: ClosingStore): Promise<unknown> {
  const index = store.index.current
  const indexFlushed = index.waitForRollFlushes().then(() => index.flushAsync())
  const results = await Promise.allSettled([store.queues.flushAllAsync(store.checkpoint), indexFlushed])
  for (const result of results) if (result.status === 'rejected') return result.reason ?? new Error('a sync failed')
  return null
}
