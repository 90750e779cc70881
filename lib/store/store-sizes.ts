// The file sizes of a store belong to the store, not to the options of whoever opens it. A store
// written with other sizes (RocketMQ's 1 GiB commit-log files and 6,000,000-byte consume-queue
// files, or another mqstore profile) opens without options: the sizes come from the record kept in
// config/storeSizes.json, or, for a store that has none (written by RocketMQ or an older mqstore),
// from the files present, and are then recorded. An option that contradicts the store is refused
// with INVALID_OPTION naming it: a configured size must never make open delete consume-queue or
// index files as "the wrong size" and rebuild them.
//
// Index files do not say how they split into hash slots and entries (the header counts the used
// ones, not the maximum), so without a record their size must match the configured dimensions or
// a known profile's (embedded, rocketmq); otherwise open asks for maxHashSlotNum and maxIndexNum.
import * as fs from 'node:fs'
import { join } from 'node:path'

import { ioError, MQStoreError } from '../errors.js'
import { EMBEDDED_DEFAULTS, ROCKETMQ_SIZES, type MessageStoreConfig, type MessageStoreOptions } from './config.js'
import { indexFileSize } from './index/index-file.js'
import { writeFileDurably } from './mapped/directory.js'
import { parseOffsetName } from './mapped/segment-name.js'
import type { StorePaths } from './store-paths.js'

export interface StoreSizes {
  mappedFileSizeCommitLog: number
  mappedFileSizeConsumeQueue: number
  maxHashSlotNum: number
  maxIndexNum: number
}

const SIZE_NAMES = ['mappedFileSizeCommitLog', 'mappedFileSizeConsumeQueue', 'maxHashSlotNum', 'maxIndexNum'] as const

/** Index dimensions open recognises from an index file's size alone. */
const KNOWN_INDEX_PROFILES: readonly { name: string; slots: number; entries: number }[] = [
  { name: 'embedded', slots: EMBEDDED_DEFAULTS.maxHashSlotNum, entries: EMBEDDED_DEFAULTS.maxIndexNum },
  { name: 'rocketmq', slots: ROCKETMQ_SIZES.maxHashSlotNum ?? 5_000_000, entries: ROCKETMQ_SIZES.maxIndexNum ?? 20_000_000 },
]

/** Sizes of the files present, null for a kind with no file. */
export interface FoundSizes {
  commitLogFileBytes: number | null
  consumeQueueFileBytes: number | null
  indexFileBytes: number | null
}

function firstFileSize(dir: string, accept: (name: string) => boolean): number | null {
  let names: string[]
  try {
    names = fs.readdirSync(dir).filter(accept).sort()
  } catch {
    return null
  }
  for (const name of names) {
    try {
      const stat = fs.statSync(join(dir, name))
      if (stat.isFile()) return stat.size
    } catch {
      // gone since the listing
    }
  }
  return null
}

const isSegment = (name: string): boolean => parseOffsetName(name) !== null

/** Reads the sizes off the files: the first commit-log segment, consume-queue segment and index file. */
export function findFileSizes(paths: StorePaths): FoundSizes {
  let consumeQueueFileBytes: number | null = null
  let topics: string[] = []
  try {
    topics = fs.readdirSync(paths.consumeQueues).sort()
  } catch {
    // no consume queues
  }
  outer: for (const topic of topics) {
    let queueIds: string[] = []
    try {
      queueIds = fs.readdirSync(paths.consumeQueueTopic(topic)).sort()
    } catch {
      continue
    }
    for (const queueId of queueIds) {
      // An empty file says nothing: a new queue file (created without syncs) that a power cut
      // brought back at length 0; open deletes and rebuilds it.
      const size = firstFileSize(join(paths.consumeQueueTopic(topic), queueId), isSegment)
      if (size !== null && size > 0) {
        consumeQueueFileBytes = size
        break outer
      }
    }
  }
  return {
    commitLogFileBytes: firstFileSize(paths.commitLog, isSegment),
    consumeQueueFileBytes,
    indexFileBytes: firstFileSize(paths.index, (name) => /^\d{17}$/.test(name)),
  }
}

/** The recorded sizes, null when there is no record; a damaged record is CORRUPTION. */
export function readStoreSizesRecord(path: string): StoreSizes | null {
  let text: string
  try {
    text = fs.readFileSync(path, 'utf8')
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw ioError(`cannot read ${path}`, cause)
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new MQStoreError('CORRUPTION', `${path} is not JSON; it records the store's file sizes (delete it to take them from the files)`)
  }
  const record = parsed as Record<string, unknown>
  for (const name of SIZE_NAMES) {
    const value = record?.[name]
    if (!Number.isSafeInteger(value) || (value as number) <= 0) {
      throw new MQStoreError('CORRUPTION', `${path}: ${name} is missing or not a positive integer`)
    }
  }
  return Object.fromEntries(SIZE_NAMES.map((name) => [name, record[name] as number])) as unknown as StoreSizes
}

function writeRecord(path: string, sizes: StoreSizes): void {
  writeFileDurably(path, `${JSON.stringify(sizes, null, 2)}\n`)
}

/** Why the recorded sizes disagree with the files present, or null when they agree. */
function recordMismatch(recorded: StoreSizes, found: FoundSizes, path: string): string | null {
  if (found.commitLogFileBytes !== null && found.commitLogFileBytes !== recorded.mappedFileSizeCommitLog) {
    return `commit-log files are ${found.commitLogFileBytes} bytes, but ${path} records ${recorded.mappedFileSizeCommitLog}`
  }
  if (found.consumeQueueFileBytes !== null && found.consumeQueueFileBytes !== recorded.mappedFileSizeConsumeQueue) {
    return `consume-queue files are ${found.consumeQueueFileBytes} bytes, but ${path} records ${recorded.mappedFileSizeConsumeQueue}`
  }
  return null
}

/**
 * What open would refuse about the sizes record of the store at `paths` (verify's check): a damaged
 * record, or one that disagrees with the files; null when there is none or it is sound.
 */
export function checkStoreSizesRecord(paths: StorePaths, given: Partial<StoreSizes> = {}): string | null {
  try {
    const recorded = readStoreSizesRecord(paths.storeSizes)
    if (recorded === null) return null
    for (const name of SIZE_NAMES) {
      const value = given[name]
      if (value !== undefined && value !== recorded[name])
        return `${paths.storeSizes} records ${name} ${recorded[name]}, but ${value} was given`
    }
    return recordMismatch(recorded, findFileSizes(paths), paths.storeSizes)
  } catch (error) {
    return (error as Error).message
  }
}

function refuse(name: string, given: number, store: number, source: string): never {
  throw new MQStoreError(
    'INVALID_OPTION',
    `option '${name}' is ${given}, but this store's ${source}: omit the option (sizes are taken from the store) or pass ${store}`,
  )
}

/**
 * The sizes the store at `paths` must be opened with. `config` holds the resolved options (with
 * defaults and preset), `given` the options as passed: only an explicitly passed size can
 * contradict the store, and that is refused. Writes the record when the store had none.
 * Call with the directory lock held.
 */
export function resolveStoreSizes(paths: StorePaths, config: MessageStoreConfig, given: MessageStoreOptions): StoreSizes {
  const recorded = readStoreSizesRecord(paths.storeSizes)
  const found = findFileSizes(paths)
  const explicit = (name: (typeof SIZE_NAMES)[number]): number | undefined => given[name]

  let sizes: StoreSizes
  if (recorded !== null) {
    sizes = recorded
    const mismatch = recordMismatch(recorded, found, paths.storeSizes)
    if (mismatch !== null) throw new MQStoreError('BAD_FILE_SIZE', mismatch)
    for (const name of SIZE_NAMES) {
      const value = explicit(name)
      const normalized = name === 'mappedFileSizeConsumeQueue' && value !== undefined ? config.mappedFileSizeConsumeQueue : value
      if (normalized !== undefined && normalized !== recorded[name])
        refuse(name, value as number, recorded[name], `files were written with ${recorded[name]}`)
    }
    return sizes
  }

  sizes = {
    mappedFileSizeCommitLog: config.mappedFileSizeCommitLog,
    mappedFileSizeConsumeQueue: config.mappedFileSizeConsumeQueue,
    maxHashSlotNum: config.maxHashSlotNum,
    maxIndexNum: config.maxIndexNum,
  }
  if (found.commitLogFileBytes !== null && found.commitLogFileBytes !== sizes.mappedFileSizeCommitLog) {
    if (explicit('mappedFileSizeCommitLog') !== undefined) {
      refuse(
        'mappedFileSizeCommitLog',
        sizes.mappedFileSizeCommitLog,
        found.commitLogFileBytes,
        `commit-log files are ${found.commitLogFileBytes} bytes`,
      )
    }
    sizes.mappedFileSizeCommitLog = found.commitLogFileBytes
  }
  if (found.consumeQueueFileBytes !== null && found.consumeQueueFileBytes !== sizes.mappedFileSizeConsumeQueue) {
    if (explicit('mappedFileSizeConsumeQueue') !== undefined) {
      refuse(
        'mappedFileSizeConsumeQueue',
        sizes.mappedFileSizeConsumeQueue,
        found.consumeQueueFileBytes,
        `consume-queue files are ${found.consumeQueueFileBytes} bytes`,
      )
    }
    sizes.mappedFileSizeConsumeQueue = found.consumeQueueFileBytes
  }
  if (found.indexFileBytes !== null && found.indexFileBytes !== indexFileSize(sizes.maxHashSlotNum, sizes.maxIndexNum)) {
    const profile = KNOWN_INDEX_PROFILES.find((p) => indexFileSize(p.slots, p.entries) === found.indexFileBytes)
    if (profile === undefined || explicit('maxHashSlotNum') !== undefined || explicit('maxIndexNum') !== undefined) {
      throw new MQStoreError(
        'INVALID_OPTION',
        `index files are ${found.indexFileBytes} bytes, which options 'maxHashSlotNum' (${sizes.maxHashSlotNum}) and ` +
          `'maxIndexNum' (${sizes.maxIndexNum}) do not give (40 + 4 × slots + 20 × entries): pass the ones the store was written with`,
      )
    }
    sizes.maxHashSlotNum = profile.slots
    sizes.maxIndexNum = profile.entries
  }
  writeRecord(paths.storeSizes, sizes)
  return sizes
}
