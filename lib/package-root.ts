// Where the package's own files are (its native build, the benchmark of a source checkout), found
// from the running module rather than by fixed relative paths: the published entry points are
// bundles (dist/pkg) and the compiled modules (dist/lib) sit at another depth.
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The package root: the first folder above this module that holds package.json and binding.gyp. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'binding.gyp'))) return dir
    const parent = dirname(dir)
    if (parent === dir) throw new Error('mqstore: cannot find the package root')
    dir = parent
  }
}
