// The published tarball must install and load on a machine with no C++ toolchain, with or without
// install scripts (npm 12, pnpm and Bun skip them), using only the prebuild it carries.
//
// The work tree is left alone: the packable files are copied to a temp folder, a host prebuild is
// made there if the work tree has none, and the tarball is packed from that copy.
import { spawnSync, type SpawnSyncOptions } from 'node:child_process'
import {
  accessSync,
  constants,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const host = `${process.platform}-${process.arch}`

/** Top-level entries of the work tree that are never copied into the staging folder. */
const NOT_COPIED = new Set(['node_modules', 'build', 'dist', '.git', '.cmake-build', 'data', 'coverage'])

interface PackResult {
  filename: string
  files: { path: string }[]
}

interface LoadReport {
  pageSize: number
  platform: string
  exports: string[]
  internals: string[]
  pkgDir: string
  binding: string
  /** How importing mqstore/metrics went without prom-client installed (an optional peer). */
  metrics: string
  /** Where Node finds prom-client from the consumer's project, or null (none installed anywhere above it). */
  promClient: string | null
}

function run(command: string, args: string[], options: SpawnSyncOptions): string {
  const result = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...options })
  if (result.error) throw result.error
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} exited with ${result.status ?? result.signal}\n` +
        `--- stdout\n${String(result.stdout)}\n--- stderr\n${String(result.stderr)}`,
    )
  }
  return String(result.stdout)
}

/** The first executable called `name` on PATH. */
function which(name: string, fallback: string): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue
    const candidate = join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return fallback
}

/** The Node install prefix, if it carries the headers node-gyp needs (no download then). */
function localNodedir(): string | undefined {
  if (process.env.npm_config_nodedir) return process.env.npm_config_nodedir
  const prefix = resolve(process.execPath, '..', '..')
  return existsSync(join(prefix, 'include', 'node', 'node_api.h')) ? prefix : undefined
}

/**
 * The environment of a consumer's machine: PATH holds only node, npm and sh; compilers are
 * disabled; no npm settings leak in from an enclosing `npm test` apart from registry, cache and
 * proxy settings; node-gyp gets no local headers.
 */
function consumerEnv(bin: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const keep = /^npm_config_(registry|cache|userconfig|globalconfig|proxy|https_proxy|noproxy|strict_ssl|cafile|ca)$/i
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (/^npm_/i.test(key) && !keep.test(key)) continue
    if (key === 'INIT_CWD' || key === 'PREBUILDS_ONLY') continue
    env[key] = value
  }
  return { ...env, PATH: bin, CC: 'false', CXX: 'false', ...extra }
}

describe('npm tarball', () => {
  let work = ''
  let stage = ''
  let bin = ''
  let tarball = ''
  let listed: string[] = []
  let sourceTarball = ''
  let sourceListed: string[] = []

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'mqstore-package-'))
    stage = join(work, 'stage')

    // 1. A copy of the work tree without build output or dependencies.
    cpSync(root, stage, {
      recursive: true,
      filter: (src) => {
        const rel = relative(root, src)
        if (rel === '') return true
        const top = rel.split(sep)[0] ?? rel
        return !NOT_COPIED.has(top) && !(top === rel && top.endsWith('.tgz'))
      },
    })
    // Dependencies are linked from the work tree, except node-addon-api: gyp writes build files
    // for an included .gyp next to a path computed relative to the build folder, so that package
    // must live inside the copy or those files would land outside it.
    const modules = join(stage, 'node_modules')
    mkdirSync(modules)
    for (const entry of readdirSync(join(root, 'node_modules'))) {
      const from = join(root, 'node_modules', entry)
      if (entry === 'node-addon-api') cpSync(from, join(modules, entry), { recursive: true })
      else symlinkSync(from, join(modules, entry))
    }

    // 2. A tarball with no prebuild at all: what a platform without one (or a git install)
    //    gets. Packed before any prebuild exists in the copy.
    const sourceStage = join(work, 'source-stage')
    cpSync(stage, sourceStage, { recursive: true, filter: (src) => !src.startsWith(join(stage, 'prebuilds')) })
    const sourcePacked = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], { cwd: sourceStage })) as PackResult[]
    sourceTarball = join(work, `source-${sourcePacked[0]?.filename ?? 'missing.tgz'}`)
    renameSync(join(work, sourcePacked[0]?.filename ?? 'missing.tgz'), sourceTarball)
    sourceListed = (sourcePacked[0]?.files ?? []).map((f) => f.path)

    // 3. A prebuild for this host, unless the work tree already carries one (CI's prebuild job
    //    tests the binary it just made this way).
    const prebuildDir = join(stage, 'prebuilds', host)
    const hasPrebuild = existsSync(prebuildDir) && readdirSync(prebuildDir).some((f) => f.startsWith('mqstore') && f.endsWith('.node'))
    if (!hasPrebuild) {
      const nodedir = localNodedir()
      const env: NodeJS.ProcessEnv = { ...process.env }
      if (nodedir) env.npm_config_nodedir = nodedir
      run(join(modules, '.bin', 'prebuildify'), ['--napi', '--strip'], { cwd: stage, env })
    }

    // 4. What npm would publish. pack runs `prepare` (tsc) in the copy.
    const dry = JSON.parse(run('npm', ['pack', '--dry-run', '--json'], { cwd: stage })) as PackResult[]
    listed = (dry[0]?.files ?? []).map((f) => f.path).sort()

    // 5. The tarball itself, outside the copy.
    const packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], { cwd: stage })) as PackResult[]
    tarball = join(work, packed[0]?.filename ?? 'missing.tgz')

    // 6. A PATH with no compiler, make or python.
    bin = join(work, 'bin')
    mkdirSync(bin)
    symlinkSync(process.execPath, join(bin, 'node'))
    symlinkSync(which('npm', join(dirname(process.execPath), 'npm')), join(bin, 'npm'))
    symlinkSync(which('sh', '/bin/sh'), join(bin, 'sh'))
  }, 180_000)

  afterAll(() => {
    if (work && !process.env.MQSTORE_KEEP_TMP) rmSync(work, { recursive: true, force: true })
  })

  it('ships the host prebuild, bundled JS and typings and the sources to rebuild, and nothing else', () => {
    const prebuild = new RegExp(`^prebuilds/${host}/mqstore[^/]*\\.node$`)
    expect(
      listed.filter((f) => prebuild.test(f)),
      listed.join('\n'),
    ).not.toHaveLength(0)
    expect(listed).toEqual(
      expect.arrayContaining([
        'package.json',
        'dist/pkg/index.js',
        'dist/pkg/internals.js',
        'dist/pkg/metrics.js',
        'dist/pkg/cli.js',
        'dist/lib/index.d.ts',
        'dist/lib/metrics.d.ts',
        'binding.gyp',
        'native/addon.cc',
      ]),
    )
    // The entry points are bundles (scripts/bundle.mjs): the compiled modules they were made from
    // stay behind, only their typings ship.
    expect(listed.filter((f) => f.startsWith('dist/lib/') && !f.endsWith('.d.ts'))).toEqual([])
    expect(listed.filter((f) => /^(build|test|node_modules)\//.test(f))).toEqual([])
    expect(existsSync(tarball)).toBe(true)
  })

  interface InstallSetup {
    tarball: string
    /** The install's environment; a consumer with no compiler by default. */
    env: NodeJS.ProcessEnv
    /** The load's environment; prebuilds only by default. */
    loadEnv: NodeJS.ProcessEnv
    /** Whether the install may compile (leave build/ behind). */
    compiles: boolean
  }

  function installAndLoad(name: string, installArgs: string[], setup: Partial<InstallSetup> = {}): LoadReport {
    const project = join(work, name)
    mkdirSync(project)
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }))
    run(
      setup.env === undefined ? join(bin, 'npm') : 'npm',
      ['install', setup.tarball ?? tarball, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', ...installArgs],
      { cwd: project, env: setup.env ?? consumerEnv(bin) },
    )
    const script = `
      import { createRequire } from 'node:module'
      import { dirname, join } from 'node:path'
      const metrics = await import('mqstore/metrics').then(() => 'loaded', (e) => e.code + ': ' + e.message)
      Promise.all([import('mqstore'), import('mqstore/internals')]).then(([root, m]) => {
        const require = createRequire(join(process.cwd(), 'package.json'))
        const pkgDir = dirname(require.resolve('mqstore/package.json'))
        const binding = createRequire(join(pkgDir, 'package.json'))('node-gyp-build').path(pkgDir)
        let promClient = null
        try { promClient = createRequire(join(pkgDir, 'package.json')).resolve('prom-client') } catch {}
        console.log(JSON.stringify({
          pageSize: m.native.pageSize,
          platform: m.native.platform,
          exports: Object.keys(root),
          internals: Object.keys(m),
          pkgDir,
          binding,
          metrics,
          promClient,
        }))
      })
    `
    const out = run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: project,
      env: setup.loadEnv ?? consumerEnv(bin, { PREBUILDS_ONLY: '1' }),
    })
    const report = JSON.parse(out.trim().split('\n').pop() ?? '{}') as LoadReport
    // The command the package installs (a bundle of its own) runs too.
    const help = run(join(project, 'node_modules', '.bin', 'mqstore'), ['--help'], {
      cwd: project,
      env: setup.loadEnv ?? consumerEnv(bin, { PREBUILDS_ONLY: '1' }),
    })
    expect(help).toContain('usage: mqstore <command>')
    // Nothing was compiled at install time, unless that is the point.
    expect(existsSync(join(report.pkgDir, 'build'))).toBe(setup.compiles === true)
    return report
  }

  function expectPrebuildLoaded(report: LoadReport): void {
    expect(report.exports).toEqual(expect.arrayContaining(['MessageStore', 'MQStoreError', 'verifyStore']))
    expect(report.exports).not.toContain('native')
    // prom-client is not installed with the package: only mqstore/metrics needs it, and says so.
    // (A node_modules folder above the temporary directory, outside the consumer's project, may
    // still hold one, and Node finds it there: then mqstore/metrics loads it.)
    expect(report.promClient === null || !report.promClient.startsWith(join(report.pkgDir, '..') + sep)).toBe(true)
    if (report.promClient === null) expect(report.metrics).toMatch(/^ERR_MODULE_NOT_FOUND: .*'prom-client'/)
    else expect(report.metrics).toBe('loaded')
    expect(report.internals).toContain('native')
    expect(report.pageSize).toBeGreaterThan(0)
    expect(report.platform).toBe(process.platform)
    expect(report.binding.startsWith(join(report.pkgDir, 'prebuilds', host) + sep)).toBe(true)
    expect(report.binding).toMatch(/mqstore[^/]*\.node$/)
  }

  it('installs with --ignore-scripts and no compiler, and loads the bundled prebuild', () => {
    expectPrebuildLoaded(installAndLoad('consumer-no-scripts', ['--ignore-scripts']))
  }, 120_000)

  it('installs with its install script and no compiler, and loads the bundled prebuild', () => {
    expectPrebuildLoaded(installAndLoad('consumer-scripts', []))
  }, 120_000)

  // node-addon-api is a dependency: binding.gyp needs it wherever the addon is compiled on
  // install. The consumer has a compiler and Node's headers (no download), nothing else.
  it('without a prebuild, installs by compiling from source with a compiler present, and loads that build', () => {
    expect(sourceListed.filter((f) => f.startsWith('prebuilds/'))).toEqual([])
    expect(sourceListed).toEqual(expect.arrayContaining(['binding.gyp', 'native/addon.cc', 'native/mapping.h']))
    const nodedir = localNodedir()
    const env: NodeJS.ProcessEnv = { ...consumerEnv(process.env.PATH ?? '') }
    delete env.CC
    delete env.CXX
    if (nodedir) env.npm_config_nodedir = nodedir
    const loadEnv = { ...env }
    const report = installAndLoad('consumer-source-build', [], { tarball: sourceTarball, env, loadEnv, compiles: true })
    expect(report.internals).toContain('native')
    expect(report.pageSize).toBeGreaterThan(0)
    expect(report.binding.startsWith(join(report.pkgDir, 'build', 'Release') + sep)).toBe(true)
  }, 300_000)
})

// The release workflow runs this check on every Linux prebuild; here it runs on the local build.
const objdump = spawnSync('objdump', ['--version']).status === 0
const localBuild = join(root, 'build', 'Release', 'mqstore.node')
const canCheckFloor = process.platform === 'linux' && objdump && existsSync(localBuild)
describe.runIf(canCheckFloor)('symbol floor check (Linux, objdump)', () => {
  const check = (...args: string[]) =>
    spawnSync(process.execPath, [join(root, 'scripts', 'check-symbol-floor.mjs'), localBuild, ...args], { encoding: 'utf8' })

  it('passes a binary whose glibc, libstdc++ and C++ ABI versions are all at or below the floors', () => {
    const result = check('--glibc', '99', '--glibcxx', '3.4.999', '--cxxabi', '1.3.999')
    expect(result.status, result.stderr).toBe(0)
    expect(result.stdout).toMatch(/highest GLIBCXX_ symbol: 3\.4\.\d+/)
  })

  it('fails naming the symbols when the libstdc++ floor is below what the binary needs', () => {
    const result = check('--glibc', '99', '--glibcxx', '3.4', '--cxxabi', '1.3.999')
    expect(result.status).toBe(1)
    expect(result.stderr).toMatch(/needs GLIBCXX_3\.4\.\d+, above the 3\.4 floor: \S+/)
  })
})
describe.runIf(!canCheckFloor)('symbol floor check (skipped: needs Linux, objdump and a local build/Release)', () => {
  it('is skipped because objdump or the local build is missing, or this is not Linux', () => {
    expect(canCheckFloor).toBe(false)
  })
})
