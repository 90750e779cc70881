// A MapHandle that forwards to a real one, with some of its calls replaced: how tests interpose on
// msync (inject an error, stall it, record what was synced) without touching the rest.
import { interposeNativeForTesting, type MapHandle } from '../../lib/native.js'

export type HandleOverrides = Partial<
  Pick<MapHandle, 'sync' | 'syncAsync' | 'warmAsync' | 'dropAsync' | 'evictAsync' | 'advise' | 'lock' | 'unlock' | 'close'>
>

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
    expose: (length) => handle.expose(length),
    sync: overrides.sync ?? ((offset, length) => handle.sync(offset, length)),
    syncAsync: overrides.syncAsync ?? ((offset, length, fd, bytes, position) => handle.syncAsync(offset, length, fd, bytes, position)),
    warmAsync: overrides.warmAsync ?? ((offset, length) => handle.warmAsync(offset, length)),
    dropAsync: overrides.dropAsync ?? ((offset, length, fd) => handle.dropAsync(offset, length, fd)),
    evictAsync: overrides.evictAsync ?? ((offset, length, fd) => handle.evictAsync(offset, length, fd)),
    advise: overrides.advise ?? ((offset, length, advice) => handle.advise(offset, length, advice)),
    lock: overrides.lock ?? ((offset, length) => handle.lock(offset, length)),
    unlock: overrides.unlock ?? ((offset, length) => handle.unlock(offset, length)),
    close: overrides.close ?? (() => handle.close()),
  }
}

/**
 * Calls `record` for every write-back the store starts, whichever way: native.writeBack, or a
 * drop that carries a descriptor (MapHandle.dropAsync, Linux). `fd` is open during the call.
 * Returns the function that undoes the interposition.
 */
export function recordWriteBacks(record: (fd: number, offset: number, length: number) => void): () => void {
  const recordDrops = (handle: MapHandle): MapHandle =>
    wrapMapHandle(handle, {
      dropAsync: (offset, bytes, own) => {
        if (own !== undefined) record(own, offset, bytes)
        return handle.dropAsync(offset, bytes, own)
      },
    })
  return interposeNativeForTesting((original) => ({
    writeBack: (fd, offset, length) => {
      record(fd, offset, length)
      return original.writeBack(fd, offset, length)
    },
    map: (fd, length, writable, expose) => recordDrops(original.map(fd, length, writable, expose)),
    // A new queue's file is made and mapped in one call.
    createMapped: async (path, size, reserve, warm, expose, advice) =>
      recordDrops(await original.createMapped(path, size, reserve, warm, expose, advice)),
  }))
}

/**
 * Interposes both ways the store gets a mapping: map(), and createMapped() for the first file of a
 * new queue (mapped writable). `wrap` sees every handle with its length and returns what the store
 * gets. Returns the function that undoes the interposition.
 */
export function interposeMappings(wrap: (handle: MapHandle, length: number, writable: boolean) => MapHandle): () => void {
  return interposeNativeForTesting((original) => ({
    map: (fd, length, writable, expose) => wrap(original.map(fd, length, writable, expose), length, writable),
    createMapped: async (path, size, reserve, warm, expose, advice) =>
      wrap(await original.createMapped(path, size, reserve, warm, expose, advice), size, true),
  }))
}
