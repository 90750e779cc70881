export { native } from './native.js'
export type { MapHandle, NativeBinding, Advice } from './native.js'
export { MQStoreError } from './errors.js'
export type { ErrorCode } from './errors.js'
export { formatOffsetName, parseOffsetName } from './store/mapped/segment-name.js'
export { MappedFile, SelectMappedBufferResult, OS_PAGE_SIZE } from './store/mapped/mapped-file.js'
export type { AppendCallback, AppendOutcome, MappedFileOptions } from './store/mapped/mapped-file.js'
export { MappedFileQueue, DELETE_FILES_BATCH_MAX } from './store/mapped/mapped-file-queue.js'
export type { MappedFileQueueOptions } from './store/mapped/mapped-file-queue.js'
export { TransientStorePool } from './store/mapped/transient-store-pool.js'
export { MessageStore, PutMessageResult } from './store/message-store.js'
export type {
  ConsumeOptions,
  GetMessageResult,
  GetMessageStatus,
  Message,
  MessageExt,
  MessageFilter,
  OpenOptions,
  PutMessageStatus,
  QueryMessageResult,
  Subscription,
} from './store/message-store.js'
export { resolveConfig, EMBEDDED_DEFAULTS, ROCKETMQ_SIZES } from './store/config.js'
export type { MessageStoreConfig, MessageStoreOptions, FlushDiskType } from './store/config.js'
export type { StoreStats } from './store/store-stats.js'
export { ConsumeQueue, CQ_STORE_UNIT_SIZE } from './store/queue/consume-queue.js'
export type { CommitLogView } from './store/queue/consume-queue.js'
export { IndexService, MAX_MSGS_NUM_BATCH } from './store/index/index-service.js'
export type { IndexServiceOptions, IndexDispatch, QueryOffsetResult } from './store/index/index-service.js'
export { IndexFile, indexFileSize } from './store/index/index-file.js'
