import * as fs from 'node:fs'
import * as os from 'node:os'
import { join } from 'node:path'
import { spawnSync, type SpawnSyncReturns } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** A fresh directory per call; removed by the returned cleanup. */
export function tempDir(prefix = 'mqstore-'): string {
  return fs.mkdtempSync(join(os.tmpdir(), prefix))
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
