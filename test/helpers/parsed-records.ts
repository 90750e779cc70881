// The records a store's dispatcher parses back out of the commit log (its passes), as opposed to
// those its puts dispatch from what they know.
import type { MessageStore } from '../../lib/store/message-store.js'
import type { StoreEngine } from '../../lib/store/store-engine.js'

/** From now on, counts the records the dispatcher's passes dispatch; returns the running count. */
export function countParsedRecords(store: MessageStore): () => number {
  const dispatcher = (store as unknown as { e: StoreEngine }).e.dispatcher
  const reput = dispatcher.doReput.bind(dispatcher)
  let parsed = 0
  dispatcher.doReput = () => {
    const n = reput()
    parsed += n
    return n
  }
  return () => parsed
}
