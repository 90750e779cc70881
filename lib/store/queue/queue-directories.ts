// Consume-queue folders (`<root>/<topic>/<queueId>/`) created cheaply on a queue's first put, and
// made durable by the queue's first flush instead of on the put path.
//
// A new queue needs up to two directory entries: its own folder in the topic's folder and, for a
// new topic, the topic's folder in the root. Creating them is a plain mkdir each (the topic's only
// when the queue's mkdir says it is missing); the fsync of each parent that got an entry is owed
// and paid by the first flush of a queue that needs it, before that flush returns. The file's own
// entry in the queue's folder is synced by the file's first flush (MappedFile, syncOnFirstFlush).
//
// Parents are shared (one topic folder holds thousands of queues), so the syncs are counted per
// folder: each change gets a number, and a sync that began after change n covers it. A queue
// created while a sync of its parent is in flight waits for the next one.
import * as fs from 'node:fs'
import { dirname } from 'node:path'

import { ensureDirectory, syncDirectory, syncDirectoryAsync } from '../mapped/directory.js'

/** A parent folder whose entry for a new child must be synced, and the change that added it. */
export interface OwedSync {
  /** The folder to fsync. */
  dir: string
  /** The change number of the entry: any sync of `dir` that began after it covers it. */
  change: number
}

export class QueueDirectories {
  /** Numbers changes; a sync begun when the counter was c covers every change <= c. */
  private changes = 0
  /** Per folder: the last change covered by a completed sync. */
  private readonly covered = new Map<string, number>()
  /** Per folder: the sync in flight and the last change it covers. */
  private readonly inFlight = new Map<string, { covers: number; done: Promise<void> }>()
  /** Topic folders known to exist. */
  private readonly topics = new Set<string>()
  /** Topic folders whose making is in flight. */
  private readonly topicsMaking = new Map<string, Promise<void>>()
  /** Topic folders this process made, and the root's sync owed for each (until known paid). */
  private readonly topicsMade = new Map<string, OwedSync>()

  /**
   * Creates `queueDir` (and its topic folder when missing; the root, durably, when that is missing
   * too) without any sync. Returns the syncs owed for the entries it added (none when the folder
   * was there already).
   */
  create(queueDir: string): OwedSync[] {
    const topicDir = dirname(queueDir)
    const made = this.mkdir(queueDir)
    if (made === 'exists') return []
    if (made === 'made') return this.queueMade(topicDir)
    // The topic's folder is missing: one mkdir for it, then the queue's again.
    const root = dirname(topicDir)
    if (this.mkdir(topicDir) === 'missing') {
      ensureDirectory(root)
      fs.mkdirSync(topicDir)
    }
    this.topicsMade.set(topicDir, this.changed(root))
    this.topics.add(topicDir)
    fs.mkdirSync(queueDir)
    return this.queueMade(topicDir)
  }

  /**
   * create() with its mkdirs on the libuv pool (they may wait for the file system's journal): one
   * for the queue's folder and, the first time a topic is seen, one for the topic's, shared by the
   * new queues of a new topic, which come together.
   */
  async createAsync(queueDir: string): Promise<OwedSync[]> {
    const topicDir = dirname(queueDir)
    for (let attempt = 0; ; attempt++) {
      if (!this.topics.has(topicDir)) await this.makeTopic(topicDir)
      const made = await mkdirAsync(queueDir)
      if (made === 'exists') return []
      if (made === 'made') return this.queueMade(topicDir)
      // The topic's folder went (a topic deleted meanwhile): make it again, once.
      this.topics.delete(topicDir)
      if (attempt > 0) throw new Error(`cannot create ${queueDir}: its parent is missing`)
    }
  }

  /** Makes a topic's folder (durably its root, when that is missing) unless it exists. */
  private makeTopic(topicDir: string): Promise<void> {
    let making = this.topicsMaking.get(topicDir)
    if (making === undefined) {
      making = (async () => {
        const root = dirname(topicDir)
        let made = await mkdirAsync(topicDir)
        if (made === 'missing') {
          ensureDirectory(root)
          made = await mkdirAsync(topicDir)
        }
        if (made === 'missing') throw new Error(`cannot create ${topicDir}: its parent is missing`)
        if (made === 'made') this.topicsMade.set(topicDir, this.changed(root))
        this.topics.add(topicDir)
      })().finally(() => this.topicsMaking.delete(topicDir))
      this.topicsMaking.set(topicDir, making)
    }
    return making
  }

  /**
   * The syncs owed for a queue folder just made: its topic's folder and, while the topic's own
   * entry (made by this process) is not known durable, the root's. Every queue of a new topic owes
   * that one: any of them may be flushed first.
   */
  private queueMade(topicDir: string): OwedSync[] {
    const queueEntry = this.changed(topicDir)
    const topicEntry = this.topicsMade.get(topicDir)
    if (topicEntry === undefined) return [queueEntry]
    if ((this.covered.get(topicEntry.dir) ?? 0) < topicEntry.change) return [topicEntry, queueEntry]
    this.topicsMade.delete(topicDir)
    return [queueEntry]
  }

  /** Pays the owed syncs on the calling thread. Throws (IO_ERROR, NO_SPACE) as syncDirectory does. */
  sync(owed: readonly OwedSync[]): void {
    for (const { dir, change } of owed) {
      if ((this.covered.get(dir) ?? 0) >= change) continue
      const covers = this.changes
      // The sync of a directory's entry needs a file inside it: syncDirectory syncs a name's parent.
      syncDirectory(`${dir}/.`)
      this.cover(dir, covers)
    }
  }

  /** Pays the owed syncs on the libuv pool; syncs of one folder in flight at once are shared. */
  async syncAsync(owed: readonly OwedSync[]): Promise<void> {
    for (const { dir, change } of owed) {
      for (;;) {
        if ((this.covered.get(dir) ?? 0) >= change) break
        const running = this.inFlight.get(dir)
        if (running !== undefined) {
          // Wait for it; the loop then checks whether it covered this change (a sync that began
          // before the change, or failed, does not) and starts another if not.
          await running.done.catch(() => undefined)
          continue
        }
        const covers = this.changes
        const done = syncDirectoryAsync(`${dir}/.`).then(() => this.cover(dir, covers))
        const entry = { covers, done }
        this.inFlight.set(dir, entry)
        try {
          await done
        } finally {
          if (this.inFlight.get(dir) === entry) this.inFlight.delete(dir)
        }
        break
      }
    }
  }

  /** mkdir of one folder, without its parents. */
  private mkdir(dir: string): MkdirOutcome {
    try {
      fs.mkdirSync(dir)
      return 'made'
    } catch (error) {
      return mkdirFailure(error)
    }
  }

  private changed(dir: string): OwedSync {
    return { dir, change: ++this.changes }
  }

  private cover(dir: string, covers: number): void {
    if ((this.covered.get(dir) ?? 0) < covers) this.covered.set(dir, covers)
  }
}

type MkdirOutcome = 'made' | 'exists' | 'missing'

function mkdirFailure(error: unknown): MkdirOutcome {
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'EEXIST') return 'exists'
  if (code === 'ENOENT') return 'missing'
  throw error
}

async function mkdirAsync(dir: string): Promise<MkdirOutcome> {
  try {
    await fs.promises.mkdir(dir)
    return 'made'
  } catch (error) {
    return mkdirFailure(error)
  }
}
