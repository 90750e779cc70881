// A new queue's first file, made off the JS thread. Creating it costs a few system calls (mkdir of
// its folders, create, resize, the first page's fault) that each may wait for the file system's
// journal: milliseconds on the put path of every new queue. Dispatch instead asks for the file and
// waits (Dispatcher: a handler may return a promise); the commit log holds the records meanwhile,
// and the put that appended them resolves once they are dispatched, so the next read sees them.
import type { MappedFileQueue } from '../mapped/mapped-file-queue.js'
import { CQ_STORE_UNIT_SIZE } from './cq-unit.js'
import type { OwedSync, QueueDirectories } from './queue-directories.js'

export class QueueFirstFile {
  /** The file being made; null when none is. */
  private preparing: Promise<void> | null = null
  /** Making it off the JS thread failed: the put makes it there, and reports why it cannot. */
  private failed = false
  /** The queue's folders exist (made here): the put need not mkdir them. */
  foldersMade = false

  constructor(
    private readonly queueDir: string,
    private readonly files: MappedFileQueue,
    private readonly directories: QueueDirectories,
    /** Takes the directory syncs owed for the folders made (paid by the queue's first flush). */
    private readonly owe: (owed: OwedSync[]) => void,
  ) {}

  /** True when the queue has no file and none is ready: a unit written now would create it here. */
  get needed(): boolean {
    return this.files.mappedFiles.length === 0 && !this.files.hasPrepared && !this.failed
  }

  /** Makes the folders and the file for queue offset `cqOffset`; resolves (never rejects) once it is ready or failed. */
  prepare(cqOffset: number): Promise<void> {
    this.preparing ??= this.make(cqOffset).finally(() => {
      this.preparing = null
    })
    return this.preparing
  }

  private async make(cqOffset: number): Promise<void> {
    try {
      this.owe(await this.directories.createAsync(this.queueDir))
      this.foldersMade = true
      const logic = cqOffset * CQ_STORE_UNIT_SIZE
      await this.files.prepareFile(logic - (logic % this.files.mappedFileSize))
    } catch {
      this.failed = true
    }
  }
}
