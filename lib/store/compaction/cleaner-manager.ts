// Who may touch a queue's compaction-log files right now (Kafka's cleaner-manager states). A queue
// has no entry (idle) or one of:
//   InProgress   a pass or a retention step is rewriting / deleting its files
//   Aborted      someone asked that work to stop; it has not noticed yet
//   Paused(n)    nothing may rewrite or delete its files; n pause requests are outstanding
// Every operation that rewrites or deletes a queue's files takes InProgress or a pause first.
// Also kept here: queues marked uncleanable after an unexpected error, retried after a backoff that
// doubles from the cleaner backoff up to an hour.
import { MQStoreError } from '../../errors.js'

export type QueueState = { kind: 'InProgress' } | { kind: 'Aborted' } | { kind: 'Paused'; count: number }

export const MAX_UNCLEANABLE_BACKOFF_MS = 3_600_000

export interface UncleanableMark {
  error: string
  failures: number
  retryAt: number
  /** Cleanable bytes at the time of the failure (for the uncleanable-bytes measurement). */
  bytes: number
}

/** Thrown inside a pass when its queue was aborted; the pass unwinds without a checkpoint. */
export class CleaningAborted extends Error {
  constructor(key: string) {
    super(`cleaning of ${key} was aborted`)
    this.name = 'CleaningAborted'
  }
}

export class CleanerManager {
  private readonly states = new Map<string, QueueState>()
  private readonly waiters = new Map<string, (() => void)[]>()
  readonly uncleanable = new Map<string, UncleanableMark>()
  readonly backoffMs: number

  constructor(backoffMs: number) {
    this.backoffMs = backoffMs
  }

  state(key: string): QueueState | undefined {
    return this.states.get(key)
  }

  /** none → InProgress; false when the queue has any state already. */
  tryStart(key: string): boolean {
    if (this.states.has(key)) return false
    this.states.set(key, { kind: 'InProgress' })
    return true
  }

  /** Called by the running pass between I/O chunks. */
  checkDone(key: string): void {
    if (this.states.get(key)?.kind === 'Aborted') throw new CleaningAborted(key)
  }

  /** The pass ended: InProgress → none; Aborted → Paused(n waiters), waking whoever waits in abortAndPause. */
  done(key: string): void {
    const s = this.states.get(key)
    if (s === undefined) throw new MQStoreError('INVALID_OPTION', `${key}: done without a pass in progress`)
    if (s.kind === 'InProgress') this.states.delete(key)
    else if (s.kind === 'Aborted') {
      // Every caller waiting in abortAndPause owns one pause.
      const waiting = this.waiters.get(key) ?? []
      this.waiters.delete(key)
      this.states.set(key, { kind: 'Paused', count: Math.max(1, waiting.length) })
      for (const wake of waiting) wake()
    }
  }

  /**
   * Stops a running pass (at its next chunk) and leaves the queue paused: none → Paused(1);
   * InProgress → Aborted, resolved once the pass has unwound; Paused(n) → Paused(n+1).
   */
  async abortAndPause(key: string): Promise<void> {
    const s = this.states.get(key)
    if (s === undefined) {
      this.states.set(key, { kind: 'Paused', count: 1 })
      return
    }
    if (s.kind === 'Paused') {
      s.count++
      return
    }
    if (s.kind === 'InProgress') this.states.set(key, { kind: 'Aborted' })
    await new Promise<void>((resolve) => {
      const list = this.waiters.get(key) ?? []
      list.push(resolve)
      this.waiters.set(key, list)
    })
  }

  /** Paused(1) → none; Paused(n) → Paused(n-1); anything else is an error. */
  resume(key: string): void {
    const s = this.states.get(key)
    if (s?.kind !== 'Paused') {
      throw new MQStoreError('INVALID_OPTION', `${key}: resume of a queue that is not paused (${s?.kind ?? 'idle'})`)
    }
    if (s.count > 1) s.count--
    else this.states.delete(key)
  }

  /** abortAndPause then resume: the running pass stops and the queue ends idle. */
  async abort(key: string): Promise<void> {
    await this.abortAndPause(key)
    this.resume(key)
  }

  isPaused(key: string): boolean {
    return this.states.get(key)?.kind === 'Paused'
  }

  // ---- uncleanable queues -------------------------------------------------------------------

  markUncleanable(key: string, error: unknown, now: number, bytes: number): void {
    const previous = this.uncleanable.get(key)
    const failures = (previous?.failures ?? 0) + 1
    const delay = Math.min(MAX_UNCLEANABLE_BACKOFF_MS, this.backoffMs * 2 ** (failures - 1))
    const text = error instanceof Error ? error.message : String(error)
    this.uncleanable.set(key, { error: text, failures, retryAt: now + delay, bytes })
  }

  /** True while the queue waits out its backoff. */
  isUncleanable(key: string, now: number): boolean {
    const mark = this.uncleanable.get(key)
    return mark !== undefined && now < mark.retryAt
  }

  cleared(key: string): void {
    this.uncleanable.delete(key)
  }

  /** The manual "retry now": forget every mark (or one queue's). */
  retryUncleanable(key?: string): void {
    if (key === undefined) this.uncleanable.clear()
    else this.uncleanable.delete(key)
  }
}
