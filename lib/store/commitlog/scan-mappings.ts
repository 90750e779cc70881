// Read-ahead for a recovery scan. The scan reads every byte of the files it walks once, in order, on
// the JavaScript thread, and its first touch of each page was a page fault there (about 0.7 ms per
// MiB with the data in the page cache; a disk read when it is not, after a reboot). Each scanned
// file gets a private read-only mapping of its own for the scan, faulted in on the libuv pool as
// soon as the scan starts, so the faults run beside the scan rather than in it (all but the last
// file, see adviseWillNeed). Read-only: a
// warm-up through the store's writable mapping would fault pages in for writing, marking every
// page of the log dirty (and written back again). The store's own mappings are left alone: the
// scan maps none of them.
import type { MapHandle } from '../../native.js'
import { native } from '../../native.js'
import { descriptors } from '../mapped/descriptors.js'
import type { MappedFile } from '../mapped/mapped-file.js'

export class ScanMappings {
  private readonly handles: (MapHandle | null)[] = []
  private readonly views: (Buffer | null)[] = []

  /** Maps files[from...] for reading and starts faulting them in, oldest first. */
  constructor(
    private readonly files: readonly MappedFile[],
    from: number,
  ) {
    for (let i = 0; i < files.length; i++) {
      const handle = i < from ? null : mapForScan(files[i])
      this.handles.push(handle)
      this.views.push(handle === null ? null : Buffer.from(handle.buffer))
    }
    // Every mmap first: a warm-up holds the process's mapping lock for reading, and an mmap waits for it.
    for (let i = from; i < files.length; i++) {
      const handle = this.handles[i]
      if (handle === null) continue
      // Best effort: a page that cannot be faulted in is met by the scan itself, which decides.
      if (i < files.length - 1) handle.warmAsync(0, handle.length).catch(() => undefined)
      else adviseWillNeed(handle)
    }
  }

  /** Bytes [from, to) of file `index` as the store's own readableBuffer gives them. */
  read(index: number, from: number, to: number): Buffer {
    const file = this.files[index]
    const view = this.views[index]
    if (view === null || view === undefined) return file.readableBuffer().subarray(from, to)
    return view.subarray(from, Math.min(to, file.readPosition))
  }

  /** Unmaps every scan mapping (a warm-up not started yet is cancelled). */
  close(): void {
    for (const handle of this.handles) handle?.close()
    this.handles.length = 0
    this.views.length = 0
  }
}

/**
 * The last file is where appends stopped: past its data it is mostly holes, and faulting holes in
 * would allocate them on a tmpfs (filling a small one). It only gets the kernel's read-ahead of
 * what the file holds, which allocates nothing.
 */
function adviseWillNeed(handle: MapHandle): void {
  try {
    handle.advise(0, handle.length, 'willneed')
  } catch {
    // A hint: the scan reads the file either way.
  }
}

/** A private read-only mapping of the whole file, or null when one cannot be made (the scan reads the store's). */
function mapForScan(file: MappedFile): MapHandle | null {
  try {
    return descriptors.use(file.fileName, false, (fd) => native.map(fd, file.fileSize, false))
  } catch {
    return null
  }
}
