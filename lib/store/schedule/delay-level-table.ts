// The delay level table (RocketMQ 4.9's `messageDelayLevel`): level n (1-based) waits the n-th item.
import { MQStoreError } from '../../errors.js'
import { DEFAULT_MESSAGE_DELAY_LEVEL } from '../commitlog/record-names.js'

/** Milliseconds per unit of a `messageDelayLevel` item. */
const UNIT_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const ITEM = /^(\d{1,15})([smhd])$/

/**
 * Parses `messageDelayLevel` as RocketMQ does: items separated by single spaces, each a decimal
 * count and one lower-case unit (s, m, h, d); element i is level i + 1. A bad item, including the
 * empty one a double space makes, is INVALID_OPTION (RocketMQ fails its load on it).
 */
export function parseMessageDelayLevel(spec: string): number[] {
  if (typeof spec !== 'string' || spec === '') {
    throw new MQStoreError('INVALID_OPTION', `option 'messageDelayLevel' must be items like "1s 5s 1m 2h", got ${JSON.stringify(spec)}`)
  }
  return spec.split(' ').map((item, i) => {
    const match = ITEM.exec(item)
    if (match === null) {
      throw new MQStoreError(
        'INVALID_OPTION',
        `option 'messageDelayLevel': item ${i + 1} ${JSON.stringify(item)} is not a count followed by s, m, h or d`,
      )
    }
    return Number(match[1]) * UNIT_MS[match[2]]
  })
}

/** The level table of one store. */
export class DelayLevels {
  readonly table: readonly number[]
  readonly maxLevel: number
  /** True for RocketMQ's default table (the one the record parser assumes). */
  readonly isDefault: boolean

  constructor(spec: string = DEFAULT_MESSAGE_DELAY_LEVEL) {
    this.table = parseMessageDelayLevel(spec)
    this.maxLevel = this.table.length
    this.isDefault = spec === DEFAULT_MESSAGE_DELAY_LEVEL
  }

  /** The delay of `level` (1-based); RocketMQ's 1 s for a level outside the table. */
  delayOf(level: number): number {
    return this.table[level - 1] ?? 1000
  }
}
