// Real tmpfs mounts for disk-full tests. Mounting needs Linux and either root with CAP_SYS_ADMIN
// or, where the environment allows it (MQSTORE_TEST_SUDO=1, as CI's Linux runners set), `sudo -n`.
// A root shell inside a container without CAP_SYS_ADMIN cannot mount: the probe finds out by
// mounting once, and the tests skip with the reason it gives.
import * as fs from 'node:fs'
import * as os from 'node:os'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'

export interface TmpfsSupport {
  /** True when a tmpfs can be mounted here. */
  ok: boolean
  /** Why not, for the skipped test's name; empty when ok. */
  reason: string
  /** How the mounts run: directly as root, or through sudo. */
  viaSudo: boolean
}

function command(viaSudo: boolean, args: string[]): { status: number | null; stderr: string } {
  const [cmd, ...rest] = viaSudo ? ['sudo', '-n', ...args] : args
  const result = spawnSync(cmd ?? 'true', rest, { encoding: 'utf8' })
  const text = (result.error?.message ?? result.stderr ?? '').trim()
  return { status: result.status, stderr: text.split('\n')[0] ?? '' }
}

function mountOptions(size: string, viaSudo: boolean): string {
  // Mounted through sudo, the tmpfs root must belong to the test's own user.
  return viaSudo ? `size=${size},uid=${process.getuid?.()},gid=${process.getgid?.()},mode=0700` : `size=${size}`
}

function probe(): TmpfsSupport {
  if (process.platform !== 'linux') return { ok: false, reason: `tmpfs mounts need Linux (this is ${process.platform})`, viaSudo: false }
  const root = process.getuid?.() === 0
  const viaSudo = !root && process.env.MQSTORE_TEST_SUDO === '1'
  if (!root && !viaSudo) {
    return { ok: false, reason: 'mounting a tmpfs needs root (or MQSTORE_TEST_SUDO=1 with passwordless sudo)', viaSudo }
  }
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'mqstore-tmpfs-probe-'))
  try {
    const mounted = command(viaSudo, ['mount', '-t', 'tmpfs', '-o', mountOptions('64k', viaSudo), 'tmpfs', dir])
    if (mounted.status !== 0) {
      return { ok: false, reason: `mount -t tmpfs failed here (${mounted.stderr || `exit ${mounted.status}`})`, viaSudo }
    }
    command(viaSudo, ['umount', dir])
    return { ok: true, reason: '', viaSudo }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

export const tmpfs: TmpfsSupport = probe()

/** Mounts a tmpfs of `size` (like "256k") on `dir`, or resizes the one mounted there. */
export function mountTmpfs(dir: string, size: string, remount = false): void {
  const options = remount ? `remount,${mountOptions(size, tmpfs.viaSudo)}` : mountOptions(size, tmpfs.viaSudo)
  const result = command(tmpfs.viaSudo, ['mount', '-t', 'tmpfs', '-o', options, 'tmpfs', dir])
  if (result.status !== 0) throw new Error(`mount -o ${options} on ${dir} failed: ${result.stderr}`)
}

export function unmountTmpfs(dir: string): void {
  command(tmpfs.viaSudo, ['umount', dir])
}
