// A byte-rate limit shared by every cleaning pass (Kafka's cleaner throttler): bytes read and
// written are counted together; once per check interval, if the observed rate is above the
// desired one, the caller waits long enough to bring it back down.
import { setTimeout as sleep } from 'node:timers/promises'

import type { Clock } from '../environment.js'

export const THROTTLE_CHECK_INTERVAL_MS = 300

export class Throttler {
  /** Bytes per second; Infinity = no limit. */
  desiredRatePerSec: number
  private readonly clock: Clock
  private periodStart: number
  private observed = 0
  /** Bytes counted since creation (the cleaner-io meter) and ms spent waiting. */
  totalBytes = 0
  throttledMs = 0

  constructor(desiredRatePerSec: number, clock: Clock) {
    if (!(desiredRatePerSec > 0)) throw new RangeError(`a byte rate must be positive, got ${desiredRatePerSec}`)
    this.desiredRatePerSec = desiredRatePerSec
    this.clock = clock
    this.periodStart = clock.now()
  }

  /** Counts `bytes`; resolves after the pause the rate calls for (at once when under it). */
  async maybeThrottle(bytes: number): Promise<void> {
    this.observed += bytes
    this.totalBytes += bytes
    if (this.desiredRatePerSec === Infinity) return
    const now = this.clock.now()
    const elapsedMs = now - this.periodStart
    if (elapsedMs <= THROTTLE_CHECK_INTERVAL_MS || this.observed <= 0) return
    const desiredPerMs = this.desiredRatePerSec / 1000
    const waitMs = this.observed / desiredPerMs - elapsedMs
    if (waitMs > 0) {
      this.throttledMs += waitMs
      await sleep(Math.ceil(waitMs))
    }
    this.periodStart = this.clock.now()
    this.observed = 0
  }
}
