#!/usr/bin/env node
// npm run test:asan: builds the addon with AddressSanitizer + UndefinedBehaviorSanitizer into
// .cmake-build/ (never build/Release, which node-gyp-build would pick up), runs a smoke test of
// every native entry point against that binary, then runs the store's test suite (vitest) with the
// loader pointed at it. Exits non-zero on any sanitizer report or failed test.
//
// Linux + GCC: Node is not instrumented, so the ASan runtime is preloaded
// (LD_PRELOAD=$(gcc -print-file-name=libasan.so)), leak detection is off (V8 keeps memory at exit on
// purpose) and UBSan is fatal. Needs cmake (Ninja if present, else make) and Node's headers at
// <node prefix>/include/node, or npm_config_nodedir pointing at a prefix that has them.
//
// The suite loads the sanitizer build through node-gyp-build's MQSTORE_PREBUILD override (a folder
// whose build/Release holds the addon); child processes the tests spawn inherit it and the preload.
// test/package.test.ts is left out: it packs and compiles a release build, which is not under test.
//
//   node scripts/test-asan.mjs                 build, smoke test, whole suite
//   node scripts/test-asan.mjs test/a.test.ts  build, smoke test, only these test files
//   node scripts/test-asan.mjs smoke X         (internal) run the smoke test against addon X
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const buildDir = join(root, '.cmake-build')
const SANITIZER_REPORT = /ERROR: AddressSanitizer|runtime error:|SUMMARY: (Address|UndefinedBehavior)Sanitizer/

if (process.argv[2] === 'smoke') {
  await smoke(process.argv[3])
} else {
  main(process.argv.slice(2))
}

function log(message) {
  console.log(`[test:asan] ${message}`)
}

function fail(message) {
  console.error(`[test:asan] FAIL: ${message}`)
  process.exit(1)
}

function run(command, args, options = {}) {
  log(`$ ${[command, ...args].join(' ')}`)
  const result = spawnSync(command, args, { stdio: 'inherit', ...options })
  if (result.error) fail(`${command}: ${result.error.message}`)
  if (result.status !== 0) fail(`${command} exited with ${result.status ?? result.signal}`)
}

function capture(command, args) {
  const result = spawnSync(command, args, { encoding: 'utf8' })
  return result.status === 0 ? result.stdout.trim() : ''
}

function onPath(name) {
  return spawnSync(name, ['--version'], { stdio: 'ignore' }).status === 0
}

function main(testFiles) {
  if (process.platform !== 'linux') {
    log(`skipped: the sanitizer run is set up for Linux + GCC (this is ${process.platform})`)
    return
  }
  const started = performance.now()

  const prefix = process.env.npm_config_nodedir || resolve(process.execPath, '..', '..')
  const nodeInclude = join(prefix, 'include', 'node')
  if (!existsSync(join(nodeInclude, 'node_api.h'))) {
    fail(`${nodeInclude}/node_api.h not found; set npm_config_nodedir to a Node prefix with headers`)
  }
  // include_dir is relative to the working directory.
  const addonApi = resolve(createRequire(join(root, 'package.json'))('node-addon-api').include_dir)
  const cxx = process.env.CXX || 'g++'
  const runtime = capture(cxx, ['-print-file-name=libasan.so'])
  if (!runtime.startsWith('/') || !existsSync(runtime)) {
    fail(`${cxx} -print-file-name=libasan.so gave "${runtime}"; install GCC's libasan`)
  }
  if (!onPath('cmake')) fail('cmake not found on PATH')

  const generator = onPath('ninja') ? 'Ninja' : 'Unix Makefiles'
  const cache = join(buildDir, 'CMakeCache.txt')
  if (existsSync(cache) && !readFileSync(cache, 'utf8').includes(`CMAKE_GENERATOR:INTERNAL=${generator}`)) {
    fail(`${buildDir} was configured with another generator; delete it`)
  }
  run('cmake', [
    '-S',
    root,
    '-B',
    buildDir,
    '-G',
    generator,
    '-DCMAKE_BUILD_TYPE=Debug',
    `-DCMAKE_CXX_COMPILER=${cxx}`,
    '-DMQSTORE_ASAN=ON',
    `-DNODE_INCLUDE_DIR=${nodeInclude}`,
    `-DNODE_ADDON_API_DIR=${addonApi}`,
    `-DNODE_EXECUTABLE=${process.execPath}`,
  ])
  run('cmake', ['--build', buildDir])
  const addon = join(buildDir, 'mqstore.node')
  if (!existsSync(addon)) fail(`${addon} was not built`)
  const bytes = readFileSync(addon)
  for (const marker of ['__asan_report_', '__ubsan_handle_']) {
    if (!bytes.includes(marker)) fail(`${addon} is not instrumented (no ${marker}* references)`)
  }
  const built = performance.now()
  log(`built ${addon} in ${((built - started) / 1000).toFixed(1)}s`)

  const result = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), 'smoke', addon], {
    encoding: 'utf8',
    stdio: ['ignore', 'inherit', 'pipe'],
    env: {
      ...process.env,
      LD_PRELOAD: [runtime, process.env.LD_PRELOAD].filter(Boolean).join(':'),
      ASAN_OPTIONS: 'detect_leaks=0',
      UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
    },
  })
  process.stderr.write(result.stderr ?? '')
  const report = SANITIZER_REPORT.exec(result.stderr ?? '')
  if (report) fail(`sanitizer report: ${report[0]}`)
  if (result.status !== 0) fail(`smoke test exited with ${result.status ?? result.signal}`)
  const smoked = performance.now()
  log(`smoke test passed in ${((smoked - built) / 1000).toFixed(1)}s`)

  suite(addon, runtime, testFiles)
  log(`test suite passed against the sanitizer build in ${((performance.now() - smoked) / 1000).toFixed(1)}s`)
}

// The store's vitest suite against the sanitizer build.
function suite(addon, runtime, testFiles) {
  const loadDir = join(buildDir, 'suite')
  mkdirSync(join(loadDir, 'build', 'Release'), { recursive: true })
  const staged = join(loadDir, 'build', 'Release', 'mqstore.node')
  copyFileSync(addon, staged)
  const env = {
    ...process.env,
    MQSTORE_PREBUILD: loadDir,
    LD_PRELOAD: [runtime, process.env.LD_PRELOAD].filter(Boolean).join(':'),
    ASAN_OPTIONS: 'detect_leaks=0',
    UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
  }
  delete env.PREBUILDS_ONLY
  // Child-process tests import the compiled package from dist/.
  run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json')])
  // The suite must load the sanitizer build, not build/Release or a prebuild.
  const probe = spawnSync(process.execPath, ['-e', 'console.log(require("node-gyp-build").path(process.argv[1]))', root], {
    cwd: root,
    env,
    encoding: 'utf8',
  })
  const loaded = (probe.stdout ?? '').trim()
  if (loaded !== staged) fail(`the loader picks ${loaded || probe.stderr}, not ${staged}`)
  log(`suite loads ${loaded}`)

  const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs')
  const args = [vitest, 'run', '--exclude', 'test/package.test.ts', ...testFiles]
  log(`$ ${args.join(' ')}`)
  const result = spawnSync(process.execPath, args, {
    cwd: root,
    env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 256 * 1024 * 1024,
  })
  process.stdout.write(result.stdout ?? '')
  process.stderr.write(result.stderr ?? '')
  const report = SANITIZER_REPORT.exec(`${result.stdout ?? ''}\n${result.stderr ?? ''}`)
  if (report) fail(`sanitizer report during the suite: ${report[0]}`)
  if (result.status !== 0) fail(`the suite exited with ${result.status ?? result.signal}`)
}

// Exercises map, write, sync, syncAsync, warmAsync, advise, close (also with work in flight), reads
// after close, GC of unclosed handles, allocate, and lockFile/unlockFile.
async function smoke(addonPath) {
  const assert = (await import('node:assert/strict')).default
  const fs = await import('node:fs')
  const os = await import('node:os')
  const path = await import('node:path')

  const require = createRequire(import.meta.url)
  const native = require(addonPath)
  const step = (name) => console.log(`  ok ${name}`)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mqstore-asan-'))
  try {
    assert.ok(native.pageSize > 0 && (native.pageSize & (native.pageSize - 1)) === 0)
    assert.equal(native.platform, process.platform)
    step(`load (pageSize ${native.pageSize})`)

    const size = 4 * native.pageSize
    const file = path.join(dir, '00000000000000000000')
    const fd = fs.openSync(file, 'w+')
    native.allocate(fd, 0, size)
    assert.equal(fs.fstatSync(fd).size, size)
    step('allocate')

    const handle = native.map(fd, size, true)
    assert.equal(handle.length, size)
    assert.equal(handle.writable, true)
    const view = Buffer.from(handle.buffer)
    assert.equal(view.length, size)
    view.write('hello mqstore', 0)
    view.writeUInt32BE(0xdeadbeef, size - 4)
    step('map + write')

    handle.sync(0, native.pageSize)
    handle.sync(size - 4, 4)
    handle.sync(0, 0)
    assert.throws(() => handle.sync(size, 1), RangeError)
    const readBack = Buffer.alloc(13)
    fs.readSync(fd, readBack, 0, 13, 0)
    assert.equal(readBack.toString(), 'hello mqstore')
    step('sync')

    await handle.syncAsync(0, size)
    await Promise.all([handle.syncAsync(1, 100), handle.warmAsync(0, size), handle.syncAsync(size - 1, 1)])
    step('syncAsync + warmAsync')

    handle.advise(0, size, 'sequential')
    handle.advise(0, size, 'normal')
    assert.throws(() => handle.advise(0, size, 'bogus'), RangeError)
    step('advise')

    const sub = view.subarray(0, 5)
    handle.close()
    handle.close()
    assert.equal(handle.closed, true)
    assert.equal(handle.buffer.byteLength, 0)
    assert.equal(view.length, 0)
    assert.equal(sub.length, 0)
    assert.equal(view[0], undefined)
    assert.equal(sub[4], undefined)
    assert.throws(() => handle.sync(0, 1), { code: 'ERR_MAPPING_CLOSED' })
    assert.throws(() => handle.syncAsync(0, 1), { code: 'ERR_MAPPING_CLOSED' })
    const tail = Buffer.alloc(4)
    fs.readSync(fd, tail, 0, 4, size - 4)
    assert.equal(tail.readUInt32BE(0), 0xdeadbeef)
    step('close + read after close')

    // close() while async work holds the mapping: the last work item unmaps.
    const busy = native.map(fd, size, true)
    const pending = [busy.syncAsync(0, size), busy.warmAsync(0, size), busy.syncAsync(0, size)]
    busy.close()
    assert.equal(busy.buffer.byteLength, 0)
    await Promise.all(pending)
    step('close with work in flight')

    // A private (read-only) map: writes stay in the process.
    const priv = native.map(fd, size, false)
    const privView = new Uint8Array(priv.buffer)
    privView[0] = 0x58
    await priv.warmAsync(0, size)
    priv.close()
    const first = Buffer.alloc(1)
    fs.readSync(fd, first, 0, 1, 0)
    assert.equal(first.toString(), 'h')
    step('private map')

    // Handles dropped without close(): the finalizers unmap. Over 64 maps also exercises the
    // addon's pruning of its live-mapping list.
    for (let i = 0; i < 200; i++) {
      const h = native.map(fd, native.pageSize, true)
      new Uint8Array(h.buffer)[i % native.pageSize] = i & 0xff
      if (i % 3 === 0) h.close()
    }
    globalThis.gc?.()
    await new Promise((r) => setImmediate(r))
    globalThis.gc?.()
    await new Promise((r) => setImmediate(r))
    step('finalizers')

    assert.throws(() => native.map(fd, size * 2, true), { code: 'EINVAL' })
    assert.throws(() => native.map(fd, 0, true), RangeError)
    assert.throws(() => native.map(-1, size, true), RangeError)
    step('map argument errors')

    const lockPath = path.join(dir, 'lock')
    const a = fs.openSync(lockPath, 'w+')
    const b = fs.openSync(lockPath, 'r+')
    native.lockFile(a)
    assert.throws(
      () => native.lockFile(b),
      (error) => error.code === 'EAGAIN' || error.code === 'EWOULDBLOCK',
    )
    native.unlockFile(a)
    native.lockFile(b)
    native.unlockFile(b)
    fs.closeSync(a)
    fs.closeSync(b)
    step('lockFile / unlockFile')

    // Left open on purpose: the environment cleanup hook unmaps it at exit.
    const leftOpen = native.map(fd, size, true)
    new Uint8Array(leftOpen.buffer)[1] = 1
    fs.closeSync(fd)
    step('mapping left open for the exit hook')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
  console.log('  smoke test done')
}
