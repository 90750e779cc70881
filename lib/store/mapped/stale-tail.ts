// Finding what a truncation left behind in a segment: the non-zero ranges after the new end.
//
// The scan reads through the descriptor, not the mapping: reading a hole of a sparse file through
// a shared mapping allocates a page (on a full tmpfs that is a SIGBUS), read(2) returns zeros.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

/** Stale tails are read and zeroed this many bytes at a time. */
export const STALE_CHUNK = 64 * 1024
const ZERO_CHUNK = Buffer.alloc(STALE_CHUNK)

/**
 * The ranges of [from, fileSize) of `fd` that hold non-zero bytes, chunk-aligned, up to the first
 * run of more than `quietBytes` zero bytes (data in a segment is written front to back, so nothing
 * older follows such a run).
 */
export function staleRanges(fd: number, from: number, fileSize: number, quietBytes: number): [number, number][] {
  const ranges: [number, number][] = []
  const chunk = Buffer.allocUnsafe(STALE_CHUNK)
  let zeroRun = 0
  for (let at = from; at < fileSize && zeroRun <= quietBytes; ) {
    const end = Math.min(fileSize, (Math.floor(at / STALE_CHUNK) + 1) * STALE_CHUNK)
    const n = fs.readSync(fd, chunk, 0, end - at, at)
    if (n < end - at) chunk.fill(0, n, end - at)
    if (chunk.compare(ZERO_CHUNK, 0, end - at, 0, end - at) === 0) {
      zeroRun += end - at
    } else {
      zeroRun = 0
      const last = ranges.at(-1)
      if (last !== undefined && last[1] === at) last[1] = end
      else ranges.push([at, end])
    }
    at = end
  }
  return ranges
}
