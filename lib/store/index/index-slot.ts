// The store's index service behind one indirection: the index is derived data, so when open finds
// it untrustworthy its files are deleted and a fresh, empty service takes its place (dispatch then
// rebuilds it from the commit log). Everything that uses the index looks it up through the slot.
import * as fs from 'node:fs'

import { IndexService, type IndexServiceOptions } from './index-service.js'

export class IndexSlot {
  current: IndexService
  private deletions: Promise<void> = Promise.resolve()

  /** @param onRoll called with the end timestamp of each index file that fills up (the checkpoint). */
  constructor(
    private readonly dir: string,
    private readonly options: IndexServiceOptions,
    private readonly onRoll: (endTimestamp: number) => void,
  ) {
    this.current = this.create()
  }

  private create(): IndexService {
    const service = new IndexService(this.dir, this.options)
    service.onRoll = this.onRoll
    return service
  }

  /**
   * Loads the index files (after an abnormal exit, files newer than `indexMsgTimestamp` are
   * dropped, as RocketMQ does). When they fail to load, deletes them, starts afresh and returns why.
   */
  load(lastExitOK: boolean, indexMsgTimestamp: number, afterProcessCrash = false): string | null {
    try {
      this.current.load(lastExitOK, indexMsgTimestamp, afterProcessCrash)
      return null
    } catch (error) {
      this.discard(false)
      return (error as Error).message
    } finally {
      // Also when the service loaded is replaced later: its dropped files are still being deleted.
      this.deletions = this.current.deletionsDone()
    }
  }

  /** Settles once the index files the last load dropped are deleted (they go on the libuv pool). */
  deletionsDone(): Promise<void> {
    return this.deletions
  }

  /** Deletes every index file and starts afresh (`loaded`: the files are mapped and must be destroyed). */
  discard(loaded: boolean): void {
    if (loaded) this.current.destroy()
    else this.current.shutdown()
    fs.rmSync(this.dir, { recursive: true, force: true })
    this.current = this.create()
  }
}
