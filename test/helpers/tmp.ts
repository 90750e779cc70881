import * as fs from 'node:fs'
import * as os from 'node:os'
import { join } from 'node:path'
import { spawnSync, type SpawnSyncReturns } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll } from 'vitest'

const made = new Set<string>()
function removeMade(): void {
  if (process.env.MQSTORE_KEEP_TMP) return
  for (const dir of made) {
    try {
      fs.rmSync(dir, { recursive: true, force: true })
      made.delete(dir)
    } catch {
      // a folder still mounted or busy stays for the OS to clean
    }
  }
}
// vitest ends its fork workers without an 'exit' event: remove the folders when the test file
// ends (each file loads this module afresh), and at exit for anything else.
afterAll(removeMade)
process.once('exit', removeMade)

/**
 * A fresh directory per call under the OS temp folder. Every directory it made is removed when
 * the test file ends (kept when MQSTORE_KEEP_TMP is set, to look at after a failure).
 */
export function tempDir(prefix = 'mqstore-'): string {
  const dir = fs.mkdtempSync(join(os.tmpdir(), prefix))
  made.add(dir)
  return dir
}

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url))

/**
 * Runs an ESM script in a fresh Node process, with the package's TypeScript sources importable
 * through the compiled loader-free path: scripts import from the built addon via lib/native.ts
 * compiled on the fly is not available, so scripts import `mqstore` from dist/ (built by
 * `npm run build:ts`, which `npm ci`/`npm install` run through `prepare`).
 */
export function runNodeScript(source: string, args: string[] = [], timeoutMs = 60_000): SpawnSyncReturns<string> {
  const dir = tempDir('mqstore-script-')
  const file = join(dir, 'script.mjs')
  fs.writeFileSync(file, source)
  try {
    return spawnSync(process.execPath, [file, ...args], {
      encoding: 'utf8',
      timeout: timeoutMs,
      env: { ...process.env, MQSTORE_ROOT: repoRoot },
    })
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** The compiled package entry, for child-process scripts. */
export const distEntry = new URL('../../dist/lib/index.js', import.meta.url).href

/** The compiled `mqstore/internals` entry (native binding, mapped files), for child-process scripts. */
export const distInternals = new URL('../../dist/lib/internals.js', import.meta.url).href
