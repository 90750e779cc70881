// Work on the libuv pool that holds its file until it ends (the warm-up of a reserved chunk), so
// the mapping outlives it, and a wait for all of it before a shutdown unmaps.

/** What the work holds: a MappedFile's reference count. */
interface Holdable {
  hold(): boolean
  release(): void
}

export class HeldWork {
  private readonly inFlight = new Set<Promise<unknown>>()

  /** Starts `work` holding `file`; skipped when the file cannot be held. A hint: failures are ignored. */
  run(file: Holdable, work: () => Promise<unknown>): void {
    if (!file.hold()) return
    let started: Promise<unknown>
    try {
      started = work()
    } catch {
      file.release()
      return
    }
    const done: Promise<unknown> = started
      .catch(() => undefined)
      .finally(() => {
        this.inFlight.delete(done)
        file.release()
      })
    this.inFlight.add(done)
  }

  /** Settles once no work is in flight. */
  async settle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight])
  }
}
