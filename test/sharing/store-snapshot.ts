// What a store directory holds, file by file, to check that readers changed nothing: each file's
// content hash, size, modification time and inode number, and each folder's entries.
import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import { join, relative } from 'node:path'

export interface EntryState {
  kind: 'file' | 'dir'
  ino: number
  mtimeNs: string
  size: number
  sha256: string
}

export function snapshotStore(root: string): Record<string, EntryState> {
  const out: Record<string, EntryState> = {}
  const walk = (dir: string): void => {
    for (const name of fs.readdirSync(dir).sort()) {
      const path = join(dir, name)
      const st = fs.statSync(path, { bigint: true })
      const key = relative(root, path)
      if (st.isDirectory()) {
        out[key] = { kind: 'dir', ino: Number(st.ino), mtimeNs: String(st.mtimeNs), size: 0, sha256: '' }
        walk(path)
      } else {
        const sha256 = createHash('sha256').update(fs.readFileSync(path)).digest('hex')
        out[key] = { kind: 'file', ino: Number(st.ino), mtimeNs: String(st.mtimeNs), size: Number(st.size), sha256 }
      }
    }
  }
  walk(root)
  return out
}
