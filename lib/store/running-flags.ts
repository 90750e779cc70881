// RunningFlags: RocketMQ's store state bits. Each flag carries the reason it was set, so a refused
// put can say why; stats() lists the flags that are set with their reasons.

/** Bit values as RocketMQ numbers them (RunningFlags in the 4.x store). */
export const RunningFlag = {
  NOT_READABLE: 1,
  NOT_WRITEABLE: 2,
  WRITE_LOGICS_QUEUE_ERROR: 4,
  WRITE_INDEX_FILE_ERROR: 8,
  DISK_FULL: 16,
} as const

export type RunningFlagName = keyof typeof RunningFlag

/** What blocks puts: every flag but NOT_READABLE. */
const WRITE_BLOCKING =
  RunningFlag.NOT_WRITEABLE | RunningFlag.WRITE_LOGICS_QUEUE_ERROR | RunningFlag.WRITE_INDEX_FILE_ERROR | RunningFlag.DISK_FULL
/** What blocks dispatch into consume queues: a full disk does not (the log already holds the data). */
const LOGICS_BLOCKING = RunningFlag.NOT_WRITEABLE | RunningFlag.WRITE_LOGICS_QUEUE_ERROR | RunningFlag.WRITE_INDEX_FILE_ERROR

export interface RunningFlagState {
  name: RunningFlagName
  reason: string
  since: number
}

export class RunningFlags {
  private bits = 0
  private readonly reasons = new Map<RunningFlagName, RunningFlagState>()

  /**
   * @param onChange called once per transition (set or cleared), never for a repeated set; the
   *   store logs it.
   */
  constructor(
    private readonly now: () => number = Date.now,
    private readonly onChange: (name: RunningFlagName, set: boolean, reason: string) => void = () => {},
  ) {}

  get value(): number {
    return this.bits
  }

  isSet(name: RunningFlagName): boolean {
    return (this.bits & RunningFlag[name]) !== 0
  }

  /** Sets a flag; returns true when it was clear before. A repeated set keeps the first reason. */
  set(name: RunningFlagName, reason: string): boolean {
    if (this.isSet(name)) return false
    this.bits |= RunningFlag[name]
    this.reasons.set(name, { name, reason, since: this.now() })
    this.onChange(name, true, reason)
    return true
  }

  /** Clears a flag; returns true when it was set before. */
  clear(name: RunningFlagName, reason = ''): boolean {
    if (!this.isSet(name)) return false
    this.bits &= ~RunningFlag[name]
    this.reasons.delete(name)
    this.onChange(name, false, reason)
    return true
  }

  isWriteable(): boolean {
    return (this.bits & WRITE_BLOCKING) === 0
  }

  isLogicsWriteable(): boolean {
    return (this.bits & LOGICS_BLOCKING) === 0
  }

  isReadable(): boolean {
    return (this.bits & RunningFlag.NOT_READABLE) === 0
  }

  /** Why puts are refused now (the first write-blocking flag's reason), or null when writeable. */
  writeBlockedReason(): string | null {
    for (const state of this.reasons.values()) {
      if ((RunningFlag[state.name] & WRITE_BLOCKING) !== 0) return `${state.name}: ${state.reason}`
    }
    return null
  }

  /** The flags that are set, oldest first. */
  list(): RunningFlagState[] {
    return [...this.reasons.values()]
  }
}
