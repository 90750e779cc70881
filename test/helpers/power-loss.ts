// Power-loss simulation for tests: what a store directory may look like after the power goes.
//
// A SIGKILL keeps the page cache, so it cannot tell a store that syncs from one that never does.
// This module records what was made durable, and when, and builds the disk image a power cut may
// leave at any moment:
//
// - File contents. The durable image of a file is its content as of its last sync: `fsync` and
//   `fdatasync` make the whole file durable; `msync(off, len)` (the store's MapHandle.sync and
//   syncAsync, interposed through lib/native.ts) makes the pages covering the range durable and the
//   file's size (MS_SYNC is a data sync of the range). A file nobody synced has an empty durable
//   image. At a cut each page whose current content differs from its durable image (an unsynced
//   write) is taken old or new at random, page by page, not only as a suffix; a file whose size
//   changed since its last sync keeps its old or its new size.
// - Directory entries. The durable listing of a directory is the one it had at its last fsync (or
//   when recording began). A name created, renamed or unlinked since then may or may not be there
//   after the cut: each differing name independently takes its durable or its current inode, and
//   an inode never appears under two names.
//
// Everything else is real: the store runs on real files with real mappings; the page cache is the
// "new" side (read through the file system, which MAP_SHARED mappings keep coherent) and the
// recorded durable images are the "old" side. Files are identified by inode and a generation
// counter (ext4 reuses inode numbers of deleted files).
//
// - A process crash (crashNow) is not a power cut: the page cache survives it, so the image it
//   leaves holds every write (and its abort file names this boot, as the store wrote it; a cut's
//   image names none, as after a reboot), but what was durable stays what it was. The image carries the old
//   disk's durable contents and listings over to its files (CrashCarry), and a disk armed on it
//   with `after` starts from them instead of taking everything on it as synced: a later cut
//   before anything syncs them mixes old and new per page as usual. The kernel writes dirty
//   pages back on its own: with `writeback`, each unsynced page (and name) was written back by
//   the time of the crash with that probability.
//
// Determinism: async msync is performed synchronously (the promise resolves on the next microtask),
// so with fake timers a schedule replays exactly from its seed. Cuts happen at the Nth recorded
// event (every interposed call counts twice: before and after it), or when a test calls cutNow().
//
// Test-only: it patches the binding through interposeNativeForTesting and node:fs through
// module.syncBuiltinESMExports, and restores both on disarm(). Linux only (descriptors are
// resolved through /proc/self/fd).
import * as fs from 'node:fs'
import { createRequire, syncBuiltinESMExports } from 'node:module'
import { join } from 'node:path'

import { interposeNativeForTesting, native, type MapHandle } from '../../lib/native.js'
import { wrapMapHandle } from './map-handle.js'

const fsCjs = createRequire(import.meta.url)('node:fs') as typeof fs

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** A file's identity: inode number and the generation this module gave it. */
interface FileId {
  ino: number
  gen: number
}

interface Entry extends FileId {
  dir: boolean
}

/** How an entry of a carried directory listing is found on the crash image. */
type CarriedEntry =
  | { kind: 'placed'; path: string }
  /** Unlinked or replaced before the crash, but still in the durable listing: its durable content. */
  | { kind: 'ghost-file'; content: Buffer }
  /** A directory in the same state: its own durable listing is carried under its path. */
  | { kind: 'ghost-dir' }

/**
 * What a process crash leaves besides the page cache: by path relative to the image, each file's
 * durable content (absent: never synced) and each directory's durable listing.
 */
export interface CrashCarry {
  files: Map<string, Buffer>
  dirs: Map<string, Map<string, CarriedEntry>>
}

/** Built along with a crash image: which old identity went to which image path. */
interface CrashBuild {
  imageDir: string
  placedAt: Map<string, string>
  files: Map<string, Buffer>
  writeback: number
}

interface CutStats {
  oldPages: number
  newPages: number
  unsyncedNames: number
}

export interface PowerLossOptions {
  /** The directory whose files are tracked (the store directory); it must exist. */
  root: string
  /** Drives every random choice of the image. */
  seed: number
  /** Cut at this event (1-based); null or undefined: only when cutNow() is called. */
  cutAtEvent?: number | null
  /** Where cut images go: `<imageRoot>/cut-<n>`. */
  imageRoot: string
  /**
   * 'power-loss' (default): every unsynced page and name old or new at random. 'lose-unsynced':
   * the worst case, every one old (for regression tests). 'keep-page-cache': what a process
   * crash leaves, every write kept.
   */
  mode?: 'power-loss' | 'lose-unsynced' | 'keep-page-cache'
  /**
   * Break the store on purpose: its data syncs (msync, and fdatasync, which SYNC_FLUSH's staged
   * commit log uses) do nothing, neither the real call nor a durable record. Used to show that the
   * power-cut tests catch a store that never syncs.
   */
  disableDataSyncs?: boolean
  /** Called synchronously at the cut, before the store runs on (to read what it claimed then). */
  onCut?: (cut: PowerCut) => void
  /** Called at every event with its number and what it was (to find the events worth cutting at). */
  onEvent?: (event: number, at: string) => void
  /**
   * The root is the image a process crash left (PowerCut.carry): start from the durable state it
   * carries instead of taking everything on it as synced.
   */
  after?: CrashCarry
}

export interface PowerCut {
  /** The event the cut happened at, and what it was. */
  event: number
  at: string
  /** The disk image the cut left. */
  dir: string
  /** Pages taken from the durable image / from the page cache, where the two differed. */
  oldPages: number
  newPages: number
  /** Names whose presence or inode differed between durable and current listings. */
  unsyncedNames: number
  /** Set for a process crash (crashNow): the durable state a disk armed on `dir` starts from. */
  carry?: CrashCarry
}

let active: PowerLossDisk | null = null

const PATCHED_FS = [
  'fsyncSync',
  'fdatasyncSync',
  'fsync',
  'fdatasync',
  'renameSync',
  'rmSync',
  'writeFileSync',
  'openSync',
  'mkdirSync',
  'copyFileSync',
  'closeSync',
] as const
type PatchedName = (typeof PATCHED_FS)[number]

export class PowerLossDisk {
  readonly root: string
  readonly options: PowerLossOptions
  /** Events seen so far (each interposed call counts before and after). */
  events = 0
  cut: PowerCut | null = null
  cuts = 0
  private readonly random: () => number
  private readonly pageSize = native.pageSize
  /** Durable content by `${ino}:${gen}`. */
  private readonly images = new Map<string, Buffer>()
  /** Current generation per inode. */
  private readonly generation = new Map<number, number>()
  /** Durable listing per directory path. */
  private readonly listings = new Map<string, Map<string, Entry>>()
  private restoreNative: (() => void) | null = null
  private readonly savedFs = new Map<PatchedName, unknown>()
  private building = false
  /** Negative inode numbers for carried names whose file is not on the image (see CarriedEntry). */
  private ghosts = 0

  constructor(options: PowerLossOptions) {
    this.options = options
    this.root = options.root
    this.random = prng(options.seed)
  }

  /** Takes the directory as it is now as durable, and starts recording. */
  arm(): this {
    if (active !== null) throw new Error('another PowerLossDisk is armed')
    if (process.platform !== 'linux') throw new Error('the power-loss model needs /proc/self/fd (Linux)')
    active = this
    if (this.options.after !== undefined) this.inherit(this.options.after)
    else this.snapshot(this.root)
    this.restoreNative = interposeNativeForTesting((original) => ({
      map: (fd, length, writable, expose) => this.wrapHandle(original.map(fd, length, writable, expose), fd),
      allocate: (fd, offset, length) => this.around('allocate', () => original.allocate(fd, offset, length)),
      // A file made and mapped in one call on the pool: a new inode (no durable content, its name
      // not synced), then a handle like map's.
      createMapped: async (path, size, reserve, warm, expose, advice) => {
        if (this.recording()) this.tick(`before createMapped ${path}`)
        const handle = await original.createMapped(path, size, reserve, warm, expose, advice)
        if (this.recording()) {
          this.born(fs.statSync(path).ino)
          this.tick(`after createMapped ${path}`)
        }
        return this.wrapHandle(handle, path)
      },
    }))
    this.patchFs()
    return this
  }

  disarm(): void {
    if (active !== this) return
    this.restoreNative?.()
    this.restoreNative = null
    for (const [name, fn] of this.savedFs) (fsCjs as unknown as Record<string, unknown>)[name] = fn
    this.savedFs.clear()
    syncBuiltinESMExports()
    active = null
  }

  /** Cuts the power now (between two operations of the store). */
  cutNow(at = 'between operations'): PowerCut {
    if (this.cut !== null) return this.cut
    return this.takeCut(at, null)
  }

  /**
   * The process crashes now (SIGKILL): the image holds the page cache, every write kept, and
   * `carry` the durable state behind it. `writeback` (0 to 1): the chance that the kernel wrote
   * an unsynced page or name back before the crash, making it durable.
   */
  crashNow(at = 'process crash', writeback = 0): PowerCut {
    if (this.cut !== null) return this.cut
    if (!(writeback >= 0 && writeback <= 1)) throw new RangeError(`writeback ${writeback} is not a probability`)
    return this.takeCut(at, writeback)
  }

  // ---- recording ------------------------------------------------------------------------------

  private idOf(ino: number): FileId {
    let gen = this.generation.get(ino)
    if (gen === undefined) {
      gen = 0
      this.generation.set(ino, gen)
    }
    return { ino, gen }
  }

  private key(id: FileId): string {
    return `${id.ino}:${id.gen}`
  }

  /** A new file took inode `ino`: it starts with no durable content of its own. */
  private born(ino: number): void {
    this.generation.set(ino, (this.generation.get(ino) ?? -1) + 1)
  }

  private snapshot(dir: string): void {
    const listing = new Map<string, Entry>()
    for (const name of fs.readdirSync(dir)) {
      const path = join(dir, name)
      const st = fs.lstatSync(path)
      const id = this.idOf(st.ino)
      listing.set(name, { ...id, dir: st.isDirectory() })
      if (st.isDirectory()) this.snapshot(path)
      else if (st.isFile()) this.images.set(this.key(id), fs.readFileSync(path))
    }
    this.listings.set(dir, listing)
  }

  /** The durable state a crash carried over (see crashNow), on the image this disk is armed on. */
  private inherit(carry: CrashCarry): void {
    const idAt = (rel: string): Entry => {
      const st = fs.lstatSync(join(this.root, rel))
      return { ...this.idOf(st.ino), dir: st.isDirectory() }
    }
    for (const [rel, content] of carry.files) this.images.set(this.key(idAt(rel)), content)
    for (const [rel, carried] of carry.dirs) {
      const listing = new Map<string, Entry>()
      for (const [name, entry] of carried) {
        if (entry.kind === 'placed') {
          listing.set(name, idAt(entry.path))
          continue
        }
        const ghost: Entry = { ino: -++this.ghosts, gen: 0, dir: entry.kind === 'ghost-dir' }
        if (entry.kind === 'ghost-file') this.images.set(this.key(ghost), entry.content)
        listing.set(name, ghost)
      }
      this.listings.set(join(this.root, rel), listing)
    }
  }

  private listDir(dir: string): Map<string, Entry> | null {
    let names: string[]
    try {
      names = fs.readdirSync(dir)
    } catch {
      return null
    }
    const listing = new Map<string, Entry>()
    for (const name of names) {
      try {
        const st = fs.lstatSync(join(dir, name))
        listing.set(name, { ...this.idOf(st.ino), dir: st.isDirectory() })
      } catch {
        // gone meanwhile
      }
    }
    return listing
  }

  private recording(): boolean {
    return active === this && this.cut === null && !this.building
  }

  /** Counts the call as two events (before and after), cutting at the chosen one. */
  private around<T>(what: string, run: () => T): T {
    if (!this.recording()) return run()
    this.tick(`before ${what}`)
    const result = run()
    if (this.recording()) this.tick(`after ${what}`)
    return result
  }

  private tick(at: string): void {
    this.events++
    this.options.onEvent?.(this.events, at)
    if (this.options.cutAtEvent != null && this.events === this.options.cutAtEvent) this.takeCut(at, null)
  }

  private inTree(path: string): boolean {
    return path === this.root || path.startsWith(`${this.root}/`)
  }

  private syncFd(fd: number): void {
    if (!this.recording()) return
    let path: string
    try {
      path = fs.readlinkSync(`/proc/self/fd/${fd}`)
    } catch {
      return
    }
    if (!this.inTree(path)) return
    const st = fs.fstatSync(fd)
    if (st.isDirectory()) {
      const listing = this.listDir(path)
      if (listing !== null) this.listings.set(path, listing)
      return
    }
    // The descriptor may be write-only: read the file through its name.
    const content = fs.readFileSync(path)
    this.images.set(this.key(this.idOf(st.ino)), content)
  }

  private syncRange(id: FileId, length: number, buffer: ArrayBuffer, offset: number, size: number): void {
    if (!this.recording() || buffer.byteLength === 0) return
    const k = this.key(id)
    let image = this.images.get(k) ?? Buffer.alloc(0)
    if (image.length < length) {
      const grown = Buffer.alloc(length)
      image.copy(grown)
      image = grown
    }
    const from = Math.floor(offset / this.pageSize) * this.pageSize
    // `buffer` may cover less than the mapping (MapHandle.expose): nothing was written past it.
    const to = Math.min(length, buffer.byteLength, Math.ceil((offset + size) / this.pageSize) * this.pageSize)
    if (to > from) Buffer.from(buffer, from, to - from).copy(image, from)
    this.images.set(k, image)
  }

  /** `file`: the descriptor the handle was mapped from, or the path of a file createMapped made. */
  private wrapHandle(handle: MapHandle, file: number | string): MapHandle {
    const disk = this
    let id: FileId | null = null
    let path = ''
    try {
      path = typeof file === 'string' ? file : fs.readlinkSync(`/proc/self/fd/${file}`)
      if (this.inTree(path)) id = this.idOf(typeof file === 'string' ? fs.statSync(file).ino : fs.fstatSync(file).ino)
    } catch {
      id = null
    }
    const msync = (offset: number, length: number): void => {
      if (disk.options.disableDataSyncs === true) return
      handle.sync(offset, length)
      if (id !== null) disk.syncRange(id, handle.length, handle.buffer, offset, length)
    }
    return wrapMapHandle(handle, {
      sync(offset, length) {
        disk.around(`msync ${path}`, () => msync(offset, length))
      },
      syncAsync(offset, length, fd, bytes, position) {
        try {
          disk.around(`async msync ${path}`, () => msync(offset, length))
          // The write after a sync (index-durable.ts's mark): a plain write, durable only if synced.
          if (fd !== undefined && bytes !== undefined && disk.options.disableDataSyncs !== true)
            fs.writeSync(fd, bytes, 0, bytes.length, position ?? 0)
          return Promise.resolve()
        } catch (error) {
          return Promise.reject(error)
        }
      },
    })
  }

  private patchFs(): void {
    const f = fsCjs as unknown as Record<PatchedName, (...args: never[]) => unknown>
    for (const name of PATCHED_FS) this.savedFs.set(name, f[name])
    const orig = Object.fromEntries(this.savedFs) as Record<PatchedName, (...args: unknown[]) => unknown>
    const disk = this
    const pathArg = (p: unknown): string => (typeof p === 'string' ? p : p instanceof URL ? p.pathname : String(p))
    const created = (path: string, existed: boolean): void => {
      if (existed || !disk.recording()) return
      try {
        disk.born(fs.lstatSync(path).ino)
      } catch {
        // not created after all
      }
    }
    const exists = (path: string): boolean => {
      try {
        fs.lstatSync(path)
        return true
      } catch {
        return false
      }
    }
    const patched: Partial<Record<PatchedName, (...args: unknown[]) => unknown>> = {
      fsyncSync(fd) {
        return disk.around('fsync', () => {
          const r = orig.fsyncSync(fd)
          disk.syncFd(fd as number)
          return r
        })
      },
      fdatasyncSync(fd) {
        return disk.around('fdatasync', () => {
          if (disk.options.disableDataSyncs === true) return undefined
          const r = orig.fdatasyncSync(fd)
          disk.syncFd(fd as number)
          return r
        })
      },
      fsync(fd, callback) {
        disk.around('fsync', () => {
          orig.fsyncSync(fd)
          disk.syncFd(fd as number)
        })
        queueMicrotask(() => (callback as (e: Error | null) => void)(null))
      },
      fdatasync(fd, callback) {
        disk.around('fdatasync', () => {
          if (disk.options.disableDataSyncs === true) return
          orig.fdatasyncSync(fd)
          disk.syncFd(fd as number)
        })
        queueMicrotask(() => (callback as (e: Error | null) => void)(null))
      },
      renameSync(from, to) {
        return disk.around('rename', () => orig.renameSync(from, to))
      },
      rmSync(path, options) {
        return disk.around('unlink', () => orig.rmSync(path, options))
      },
      writeFileSync(path, data, options) {
        const p = pathArg(path)
        const existed = typeof path !== 'number' && exists(p)
        return disk.around('write file', () => {
          const r = orig.writeFileSync(path, data, options)
          if (typeof path !== 'number') created(p, existed)
          return r
        })
      },
      openSync(path, flags, mode) {
        const p = pathArg(path)
        const existed = exists(p)
        return disk.around('open', () => {
          const r = orig.openSync(path, flags, mode)
          created(p, existed)
          return r
        })
      },
      mkdirSync(path, options) {
        return disk.around('mkdir', () => orig.mkdirSync(path, options))
      },
      copyFileSync(from, to, mode) {
        const p = pathArg(to)
        const existed = exists(p)
        return disk.around('copy file', () => {
          const r = orig.copyFileSync(from, to, mode)
          created(p, existed)
          return r
        })
      },
      closeSync(fd) {
        return disk.around('close', () => orig.closeSync(fd))
      },
    }
    Object.assign(fsCjs, patched)
    syncBuiltinESMExports()
  }

  // ---- the image ------------------------------------------------------------------------------

  /** `writeback` null: a power cut; a number: a process crash (see crashNow). */
  private takeCut(at: string, writeback: number | null): PowerCut {
    this.building = true
    try {
      this.cuts++
      const dir = join(this.options.imageRoot, `cut-${this.cuts}`)
      fs.rmSync(dir, { recursive: true, force: true })
      const stats: CutStats = { oldPages: 0, newPages: 0, unsyncedNames: 0 }
      const crash: CrashBuild | null = writeback === null ? null : { imageDir: dir, placedAt: new Map(), files: new Map(), writeback }
      this.buildDir(this.root, dir, true, new Set(), stats, crash)
      // A power cut is followed by a boot: the abort file cannot name the boot that opens the
      // image (lib/store/recovery/boot-identity.ts), so its content, if any, is dropped.
      const abort = join(dir, 'abort')
      if (crash === null && fs.existsSync(abort)) fs.writeFileSync(abort, '')
      this.cut = { event: this.events, at, dir, ...stats }
      if (crash !== null) this.cut.carry = { files: crash.files, dirs: this.carriedListings(crash) }
    } finally {
      this.building = false
    }
    this.options.onCut?.(this.cut)
    return this.cut
  }

  /** True: take the durable (old) side. A crash keeps the page cache (every write new). */
  private coin(crash: CrashBuild | null = null): boolean {
    if (crash !== null || this.options.mode === 'keep-page-cache') return false
    if (this.options.mode === 'lose-unsynced') return true
    return this.random() < 0.5
  }

  private buildDir(
    source: string,
    target: string,
    useCurrent: boolean,
    placed: Set<string>,
    stats: CutStats,
    crash: CrashBuild | null,
  ): void {
    fs.mkdirSync(target, { recursive: true })
    const durable = this.listings.get(source) ?? new Map<string, Entry>()
    const current = (useCurrent ? this.listDir(source) : null) ?? new Map<string, Entry>()
    const names = [...new Set([...durable.keys(), ...current.keys()])].sort()
    for (const name of names) {
      const d = durable.get(name)
      const c = current.get(name)
      const same = d !== undefined && c !== undefined && sameEntry(d, c)
      if (!same) stats.unsyncedNames++
      const chosen = same ? c : this.coin(crash) ? d : c
      if (chosen === undefined) continue
      const k = this.key(chosen)
      if (placed.has(k)) continue
      placed.add(k)
      crash?.placedAt.set(k, join(target, name).slice(crash.imageDir.length + 1))
      // A directory or file that is not current any more (unlinked or replaced) keeps only what
      // was durable: its durable listing, its durable content.
      const isCurrent = chosen === c
      if (chosen.dir) this.buildDir(join(source, name), join(target, name), isCurrent, placed, stats, crash)
      else fs.writeFileSync(join(target, name), this.fileImage(chosen, isCurrent ? join(source, name) : null, stats, crash))
    }
  }

  private fileImage(id: FileId, currentPath: string | null, stats: CutStats, crash: CrashBuild | null): Buffer {
    const old = this.images.get(this.key(id))
    const oldOrEmpty = old ?? Buffer.alloc(0)
    if (currentPath === null) return oldOrEmpty
    let now: Buffer
    try {
      now = fs.readFileSync(currentPath)
    } catch {
      return oldOrEmpty
    }
    if (crash !== null) {
      // What stays durable behind the page cache; pages the kernel wrote back meanwhile join it.
      const rel = currentPath.slice(this.root.length + 1)
      const writtenBack = () => this.random() < crash.writeback
      if (crash.writeback > 0)
        crash.files.set(
          rel,
          mixPages(oldOrEmpty, now, this.pageSize, () => !writtenBack()),
        )
      else if (old !== undefined) crash.files.set(rel, old)
    }
    if (oldOrEmpty.equals(now)) return now
    return mixPages(oldOrEmpty, now, this.pageSize, () => this.coin(crash), stats)
  }

  /**
   * The durable listing of every directory, by path relative to the crash image, with each entry
   * found on the image (or carried as a ghost: unlinked or replaced since its directory's last
   * fsync). With writeback, each name that differs from its directory's current listing may
   * have been made durable by the kernel meanwhile.
   */
  private carriedListings(crash: CrashBuild): Map<string, Map<string, CarriedEntry>> {
    const carried = new Map<string, Map<string, CarriedEntry>>()
    const translate = (entry: Entry): CarriedEntry => {
      const path = crash.placedAt.get(this.key(entry))
      if (path !== undefined) return { kind: 'placed', path }
      if (entry.dir) return { kind: 'ghost-dir' }
      return { kind: 'ghost-file', content: this.images.get(this.key(entry)) ?? Buffer.alloc(0) }
    }
    const paths = [...this.listings.keys()].filter((p) => this.inTree(p)).sort()
    for (const path of paths) {
      const durable = this.listings.get(path)!
      const current = crash.writeback > 0 ? (this.listDir(path) ?? new Map<string, Entry>()) : null
      const out = new Map<string, CarriedEntry>()
      for (const name of [...new Set([...durable.keys(), ...(current?.keys() ?? [])])].sort()) {
        let entry = durable.get(name)
        const now = current?.get(name)
        if (current !== null && !(entry !== undefined && now !== undefined && sameEntry(entry, now)) && this.random() < crash.writeback)
          entry = now
        if (entry !== undefined) out.set(name, translate(entry))
      }
      carried.set(path === this.root ? '' : path.slice(this.root.length + 1), out)
    }
    return carried
  }
}

function sameEntry(a: Entry, b: Entry): boolean {
  return a.ino === b.ino && a.gen === b.gen && a.dir === b.dir
}

/**
 * Page by page, `old` or `now` where they differ (`takeOld` decides each); the length is the old
 * or the new one, also as `takeOld` says when they differ.
 */
function mixPages(old: Buffer, now: Buffer, pageSize: number, takeOld: () => boolean, stats?: CutStats): Buffer {
  const length = old.length === now.length ? now.length : takeOld() ? old.length : now.length
  const out = Buffer.alloc(length)
  for (let from = 0; from < length; from += pageSize) {
    const to = Math.min(length, from + pageSize)
    const a = pageOf(old, from, to)
    const b = pageOf(now, from, to)
    if (a.equals(b)) {
      b.copy(out, from)
    } else if (takeOld()) {
      if (stats !== undefined) stats.oldPages++
      a.copy(out, from)
    } else {
      if (stats !== undefined) stats.newPages++
      b.copy(out, from)
    }
  }
  return out
}

/** Bytes [from, to) of `data`, zero-padded past its end. */
function pageOf(data: Buffer, from: number, to: number): Buffer {
  if (to <= data.length) return data.subarray(from, to)
  const page = Buffer.alloc(to - from)
  if (from < data.length) data.copy(page, 0, from, data.length)
  return page
}
