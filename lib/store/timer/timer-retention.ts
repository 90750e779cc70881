// Retention and the timer: what commit-log retention took from the pending timers (the entries of
// the wheel not delivered yet whose parked record lay in the range it just deleted: a walk of the
// wheel and of every pending chain, about a second for a million pending timers, run only when
// the commit log's min offset moved), and how much of the timer log is still needed (its old
// files go once every entry in them is delivered or cancelled).
import { TimerMagic, type TimerLog } from './timer-log.js'
import type { TimerWheel } from './timer-wheel.js'

/** Pending entries (slots from `readTime` on, not flagged `delivered`) whose record lies in [from, to). */
export function pendingInRange(wheel: TimerWheel, log: TimerLog, readTime: number, delivered: number, from: number, to: number): number {
  let count = 0
  const end = log.end
  wheel.forEach((slotTime, slot, flags) => {
    if (slotTime < readTime || (flags & delivered) !== 0) return
    for (let pos = slot.lastPos; pos >= 0 && pos < end; ) {
      const unit = log.read(pos)
      if (unit === null || unit.slotTime !== slotTime) break
      if ((unit.magic & TimerMagic.DELETE) === 0 && unit.offsetPy >= from && unit.offsetPy < to) count++
      if (unit.prevPos >= pos) break
      pos = unit.prevPos
    }
  })
  return count
}

/**
 * The lowest timer-log position still needed: the first unit of every slot from `from` on (chains
 * run forward from it; flags are ignored, since a crash makes flagged slots past the saved read
 * time go again), and `recoverFrom`, where an open's recovery scan starts.
 */
export function neededLogPosition(wheel: TimerWheel, from: number, recoverFrom: number): number {
  let needed = recoverFrom
  wheel.forEach((slotTime, slot) => {
    if (slotTime >= from && slot.firstPos >= 0 && slot.firstPos < needed) needed = slot.firstPos
  })
  return needed
}
