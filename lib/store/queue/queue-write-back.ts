// Write-back of the consume queues during a burst of puts (ASYNC_FLUSH). The periodic flush runs
// on a timer, and a producer that puts batch after batch without yielding to the event loop keeps
// every timer from firing: each queue's units then stay dirty until close, which syncs them all at
// once. Every so many dispatched units this starts the kernel's write-back of what each queue
// wrote since (sync_file_range on the libuv pool, fire and forget), as the commit log does for its
// own bytes (CommitLog.writeBackBehind). It makes nothing durable and moves no flushed position:
// the flushes still do that, and find little left to write.
import { OS_PAGE_SIZE, type MappedFile } from '../mapped/mapped-file.js'
import type { ConsumeQueue } from './consume-queue.js'

/** Units dispatched between two looks at the queues (a look costs one check per queue). */
export const WRITE_BACK_EVERY_UNITS = 16_384
/**
 * Bytes a queue's file must have unflushed past its last write-back before one starts. Each
 * write-back wakes a pool thread (costly to the JS thread in a virtual machine): 256 KiB makes a
 * burst over 16 queues start about 30 of them per 400,000 puts instead of about 180.
 */
export const QUEUE_WRITE_BACK_STEP = 256 * 1024

export class QueueWriteBack {
  private units = 0
  /** Where the next write-back of each file starts. */
  private readonly marks = new WeakMap<MappedFile, number>()

  /** Counts `units` dispatched; every WRITE_BACK_EVERY_UNITS, starts the write-back of the queues. */
  note(units: number, queues: { all(): Iterable<ConsumeQueue> }): void {
    this.units += units
    if (this.units < WRITE_BACK_EVERY_UNITS) return
    this.units = 0
    for (const queue of queues.all()) this.writeBack(queue.mappedFileQueue.getLastMappedFile())
  }

  private writeBack(file: MappedFile | null): void {
    if (file === null || !file.isMapped) return
    const from = Math.max(this.marks.get(file) ?? 0, Math.floor(file.flushedPosition / OS_PAGE_SIZE) * OS_PAGE_SIZE)
    const to = Math.floor(file.wrotePosition / OS_PAGE_SIZE) * OS_PAGE_SIZE
    if (to - from < QUEUE_WRITE_BACK_STEP) return
    this.marks.set(file, to)
    file.dropPages(from, to, true)
  }
}
