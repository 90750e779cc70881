// What retention took from the pending timers: the entries of the wheel not delivered yet whose
// parked record lay in the commit-log range retention just deleted. Run only when the commit
// log's min offset moved (a file deleted): it walks the wheel and every pending chain, about a
// second for a million pending timers.
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
