// What the store reads from the world for its policy decisions: the clock and disk usage. The facade
// is given both (the real clock and fs.statfs by default; a test moves time and pressure by hand),
// and passes them down, so that nothing below it calls Date.now() or statfs to decide what to keep.
import * as fs from 'node:fs'

/** Wall-clock milliseconds since the epoch, like Date.now(). */
export interface Clock {
  now(): number
}

/** Usage of the file system that holds `path`. */
export interface DiskUsage {
  /** Bytes in the file system. */
  totalBytes: number
  /** Bytes free for an unprivileged writer (statfs's bavail). */
  availableBytes: number
  /**
   * Used share, 0..1, as df's Use% counts it: used / (used + available). Blocks reserved for root
   * (or otherwise not available to this writer) count neither as used nor as room.
   */
  usedRatio: number
}

export interface DiskUsageSource {
  /** Usage of the partition holding `path`; throws an fs error when it cannot be read. */
  usage(path: string): DiskUsage
}

export const systemClock: Clock = { now: () => Date.now() }

export const statfsDiskUsage: DiskUsageSource = {
  usage(path: string): DiskUsage {
    const s = fs.statfsSync(path)
    const totalBytes = s.blocks * s.bsize
    const availableBytes = s.bavail * s.bsize
    const usedBytes = (s.blocks - s.bfree) * s.bsize
    const usedRatio = usedBytes + availableBytes > 0 ? usedBytes / (usedBytes + availableBytes) : 0
    return { totalBytes, availableBytes, usedRatio }
  },
}

/** The sources a store runs with; internal options of `MessageStore.open` replace them in tests. */
export interface StoreEnvironment {
  clock: Clock
  diskUsage: DiskUsageSource
}

export const defaultEnvironment: StoreEnvironment = { clock: systemClock, diskUsage: statfsDiskUsage }
