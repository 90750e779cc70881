// A MapHandle that forwards to a real one, with some of its calls replaced: how tests interpose on
// msync (inject an error, stall it, record what was synced) without touching the rest.
import type { MapHandle } from '../../lib/native.js'

export type HandleOverrides = Partial<Pick<MapHandle, 'sync' | 'syncAsync' | 'warmAsync' | 'advise' | 'lock' | 'unlock' | 'close'>>

export function wrapMapHandle(handle: MapHandle, overrides: HandleOverrides): MapHandle {
  return {
    get buffer() {
      return handle.buffer
    },
    get length() {
      return handle.length
    },
    get closed() {
      return handle.closed
    },
    get writable() {
      return handle.writable
    },
    sync: overrides.sync ?? ((offset, length) => handle.sync(offset, length)),
    syncAsync: overrides.syncAsync ?? ((offset, length) => handle.syncAsync(offset, length)),
    warmAsync: overrides.warmAsync ?? ((offset, length) => handle.warmAsync(offset, length)),
    advise: overrides.advise ?? ((offset, length, advice) => handle.advise(offset, length, advice)),
    lock: overrides.lock ?? ((offset, length) => handle.lock(offset, length)),
    unlock: overrides.unlock ?? ((offset, length) => handle.unlock(offset, length)),
    close: overrides.close ?? (() => handle.close()),
  }
}
