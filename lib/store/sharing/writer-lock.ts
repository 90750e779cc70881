// Whether a writer holds a store's lock, told without touching the lock: taking it (even to test
// it) would stop the writer from opening, and releasing an fcntl lock is per process, so a reader
// in the writer's own process could drop the writer's. Linux lists every lock in /proc/locks.
import * as fs from 'node:fs'

/** True when some process holds a lock on the file at `lockPath`, false when none does; null where that cannot be told. */
export function writerHoldsLock(lockPath: string, locksFile = '/proc/locks'): boolean | null {
  const st = fs.statSync(lockPath, { throwIfNoEntry: false })
  if (st === undefined) return false
  const inode = st.ino
  let locks: string
  try {
    locks = fs.readFileSync(locksFile, 'utf8')
  } catch {
    return null
  }
  // Lines look like "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a waiter has "->" after
  // the number); the inode is the last colon-separated part of the device field. The device is not
  // compared: overlay file systems report one device to stat() and another in /proc/locks.
  for (const line of locks.split('\n')) {
    const fields = line.trim().split(/\s+/)
    const device = fields[fields[1] === '->' ? 6 : 5]
    if (device !== undefined && Number(device.split(':')[2]) === inode) return true
  }
  return false
}
