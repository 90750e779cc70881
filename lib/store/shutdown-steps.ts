// The steps of a store's close, run so that a failing step never skips the ones after it: every
// mapping, descriptor and the directory lock are released whatever happened before, and the
// failures are reported together afterwards as one MQStoreError (the first failure's code, every
// failure in `cause`).
import { ioError, MQStoreError, type ErrorCode } from '../errors.js'

export class ShutdownSteps {
  private readonly failures: { step: string; error: unknown }[] = []

  constructor(private readonly log: (message: string) => void) {}

  /** True while no step has failed. */
  get ok(): boolean {
    return this.failures.length === 0
  }

  /** Runs one step; a failure is logged and kept, never thrown. */
  async run(step: string, fn: () => void | Promise<void>): Promise<void> {
    try {
      await fn()
    } catch (error) {
      this.failures.push({ step, error })
      this.log(`close: ${step} failed: ${(error as Error)?.message ?? String(error)}`)
    }
  }

  /** Throws the failures as one typed error; does nothing when every step succeeded. */
  throwIfFailed(what: string): void {
    if (this.failures.length === 0) return
    const first = this.failures[0].error
    const code: ErrorCode = first instanceof MQStoreError ? first.code : ioError(what, first).code
    const detail = this.failures.map(({ step, error }) => `${step}: ${(error as Error)?.message ?? String(error)}`).join('; ')
    const cause =
      this.failures.length === 1
        ? first
        : new AggregateError(
            this.failures.map((f) => f.error),
            detail,
          )
    throw new MQStoreError(code, `${what} failed (${detail}); every mapping and descriptor was released`, { cause })
  }
}

/** What close does, as the facade wires it; closeInSteps runs it in order. */
export interface CloseSequence {
  log: (message: string) => void
  stopServices(): Promise<void>
  /** False after a failed sync: nothing more is synced or vouched for (the abort file stays). */
  durable(): boolean
  flush(): Promise<void>
  /** A failed save of the consumer offsets is logged by this step itself and close goes on. */
  saveOffsets(): Promise<void>
  /** Dispatch reached the end of the log: the shutdown record may vouch for every queue. */
  caughtUp(): boolean
  writeShutdownRecord(): void
  /** The files are about to be unmapped: from here on stats() gives the figures at close. */
  takeFigures(): void
  unmap: [step: string, release: () => void][]
  removeAbortFile(): void
  /** The abort file stays, naming no boot: the next open recovers as after a power cut. */
  distrustAbortFile(): void
  releaseLock(): void
  forgetDescriptors(): void
}

/**
 * A store's close: every step runs even when an earlier one fails, so that every mapping,
 * descriptor and the lock are released; only a close whose every step succeeded vouches for the
 * files (shutdown record, abort file removed). The failures are thrown together at the end.
 */
export async function closeInSteps(close: CloseSequence): Promise<void> {
  const steps = new ShutdownSteps(close.log)
  await steps.run('stop services', () => close.stopServices())
  const durable = close.durable()
  if (durable) await steps.run('flush', () => close.flush())
  await steps.run('persist consumer offsets', () => close.saveOffsets())
  let clean = durable && steps.ok && close.caughtUp()
  if (clean) {
    await steps.run('write the shutdown record', () => close.writeShutdownRecord())
    clean = steps.ok
  }
  await steps.run('take the figures at close', () => close.takeFigures())
  for (const [step, release] of close.unmap) await steps.run(step, release)
  if (clean) await steps.run('remove the abort file', () => close.removeAbortFile())
  // A close that failed (a sync, a file gone) leaves files that may not be as this run wrote them:
  // the next open must not take them for a process crash's intact page cache (boot-identity.ts).
  else await steps.run('keep the abort file for a full recovery', () => close.distrustAbortFile())
  await steps.run('release the lock', () => close.releaseLock())
  close.forgetDescriptors()
  steps.throwIfFailed('close')
}
