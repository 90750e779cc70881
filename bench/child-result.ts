// A bench step run in a child process of its own: the one message it sends is its result.
import { fork } from 'node:child_process'

/**
 * Runs `script` with `args` (and node flags `execArgv`; none by default) and resolves with the
 * message it sends; rejects with `failure(reason)` when it exits without one or with a non-zero
 * status.
 */
export function resultFromChild<T>(
  script: string,
  args: readonly string[],
  failure: (reason: string) => Error,
  execArgv: readonly string[] = [],
): Promise<T> {
  return new Promise((resolve, reject) => {
    let result: T | null = null
    const child = fork(script, [...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...execArgv] })
    child.on('message', (message) => {
      result = message as T
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (result !== null && code === 0) resolve(result)
      else reject(failure(`child exited with ${signal ?? `status ${code}`}`))
    })
  })
}
