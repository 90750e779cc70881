// Every file and folder name of a store directory, in one place (RocketMQ's layout):
//   <root>/commitlog/<20-digit offset>        the commit log's segments
//   <root>/consumequeue/<topic>/<queueId>/...  one folder of segments per queue
//   <root>/index/<yyyyMMddHHmmssSSS>           key index files
//   <root>/checkpoint, <root>/abort, <root>/lock
//   <root>/queueends                          each queue's end at the last clean close (mqstore)
//   <root>/config/consumerOffset.json, <root>/config/topics.json
//   <root>/config/delayOffset.json            the schedule service's progress per delay level
//   <root>/config/storeSizes.json             the file sizes the store was written with (mqstore)
//   <root>/config/haRole.json                 the replication role it last ran with, when not a plain master (mqstore)
//   <root>/compaction/<topic>/<queueId>/<20-digit queue offset>   compaction logs of compacted topics
//   <root>/compaction/cleaner-offset-checkpoint
//   <root>/writer.sock                        the writer's socket for producers in other processes (shareWrites)
//   <root>/arrivals                           touched by the writer after dispatching, watched by readers (mqstore)
//   <root>/indexmark                          the index entries known to be on disk (mqstore; index-durable.ts)
import * as fs from 'node:fs'
import { join } from 'node:path'

import { ioError } from '../errors.js'

export const COMMITLOG_DIR = 'commitlog'
export const CONSUME_QUEUE_DIR = 'consumequeue'
export const INDEX_DIR = 'index'
export const CONFIG_DIR = 'config'
export const CHECKPOINT_FILE = 'checkpoint'
export const ABORT_FILE = 'abort'
export const LOCK_FILE = 'lock'
export const QUEUE_ENDS_FILE = 'queueends'
export const CONSUMER_OFFSET_FILE = 'consumerOffset.json'
export const TOPICS_FILE = 'topics.json'
export const STORE_SIZES_FILE = 'storeSizes.json'
export const DELAY_OFFSET_FILE = 'delayOffset.json'
export const HA_ROLE_FILE = 'haRole.json'
export const COMPACTION_DIR = 'compaction'
export const SHARE_SOCKET_FILE = 'writer.sock'
export const ARRIVALS_FILE = 'arrivals'
export const INDEX_MARK_FILE = 'indexmark'

/** The paths of one store directory. */
export class StorePaths {
  readonly commitLog: string
  readonly consumeQueues: string
  readonly index: string
  readonly config: string
  readonly checkpoint: string
  readonly abort: string
  readonly lock: string
  readonly queueEnds: string
  readonly consumerOffsets: string
  readonly topics: string
  readonly storeSizes: string
  readonly delayOffsets: string
  readonly haRole: string
  readonly compaction: string
  readonly shareSocket: string
  readonly arrivals: string
  readonly indexMark: string

  constructor(readonly root: string) {
    this.commitLog = join(root, COMMITLOG_DIR)
    this.consumeQueues = join(root, CONSUME_QUEUE_DIR)
    this.index = join(root, INDEX_DIR)
    this.config = join(root, CONFIG_DIR)
    this.checkpoint = join(root, CHECKPOINT_FILE)
    this.abort = join(root, ABORT_FILE)
    this.lock = join(root, LOCK_FILE)
    this.queueEnds = join(root, QUEUE_ENDS_FILE)
    this.consumerOffsets = join(this.config, CONSUMER_OFFSET_FILE)
    this.topics = join(this.config, TOPICS_FILE)
    this.storeSizes = join(this.config, STORE_SIZES_FILE)
    this.delayOffsets = join(this.config, DELAY_OFFSET_FILE)
    this.haRole = join(this.config, HA_ROLE_FILE)
    this.compaction = join(root, COMPACTION_DIR)
    this.shareSocket = join(root, SHARE_SOCKET_FILE)
    this.arrivals = join(root, ARRIVALS_FILE)
    this.indexMark = join(root, INDEX_MARK_FILE)
  }

  /**
   * Makes the folders a writer's puts write into, where missing (the index's with `withIndex`); the
   * caller syncs the root. A file in the place of one (or any failure) is an error naming it.
   */
  makeWriterFolders(withIndex: boolean): void {
    for (const dir of withIndex ? [this.commitLog, this.consumeQueues, this.index] : [this.commitLog, this.consumeQueues]) {
      try {
        fs.mkdirSync(dir, { recursive: true })
      } catch (cause) {
        throw ioError(`cannot make the store's folder ${dir}`, cause)
      }
    }
  }

  /** The folder of one topic's queues. */
  consumeQueueTopic(topic: string): string {
    return join(this.consumeQueues, topic)
  }

  /** The folder of one consume queue's segments. */
  consumeQueue(topic: string, queueId: number): string {
    return join(this.consumeQueues, topic, String(queueId))
  }
}
