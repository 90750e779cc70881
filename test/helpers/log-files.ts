// The commit log makes its next file ahead of need on the libuv pool, in its own time (a put that
// cannot wait for it makes the file itself): a test that lists the commit-log folder while the
// store is open waits for that work first.
import type { MessageStore } from '../../lib/store/message-store.js'
import type { StoreEngine } from '../../lib/store/store-engine.js'

/** Waits until the commit log's file being made ahead, if any, is made or dropped (and its warm-ups are done). */
export async function settleLogFiles(store: MessageStore): Promise<void> {
  await (store as unknown as { e: StoreEngine }).e.commitLog.mappedFileQueue.settle()
}
