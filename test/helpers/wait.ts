// Polling waits for tests: the condition is checked every few milliseconds (a loaded machine may
// take a while; never a fixed sleep), and a wait that outlasts its deadline fails with what it was
// waiting for rather than hanging until the test's own timeout.

/** Resolves once `condition()` holds; rejects with `timed out waiting for <what>` after `timeoutMs`. */
export async function waitFor(condition: () => boolean, what: string, timeoutMs = 30_000, intervalMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
