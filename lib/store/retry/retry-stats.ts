// stats().retry: per consumer group, the nacks since open and where they went.

/** One group's nacks since open. */
export interface RetryGroupStats {
  /** Nacks sent to `%RETRY%<group>` (through the schedule topic). */
  readonly retried: number
  /** Nacks sent to `%DLQ%<group>`. */
  readonly deadLettered: number
}

/** stats().retry */
export interface RetryStats {
  /** By consumer group, the groups that nacked since open. */
  readonly groups: Readonly<Record<string, RetryGroupStats>>
}

export class RetryCounts {
  private readonly groups = new Map<string, { retried: number; deadLettered: number }>()

  record(group: string, deadLettered: boolean): void {
    let counts = this.groups.get(group)
    if (counts === undefined) {
      counts = { retried: 0, deadLettered: 0 }
      this.groups.set(group, counts)
    }
    if (deadLettered) counts.deadLettered++
    else counts.retried++
  }

  stats(): RetryStats {
    const groups: Record<string, RetryGroupStats> = {}
    for (const [group, counts] of this.groups) groups[group] = { ...counts }
    return { groups }
  }
}
