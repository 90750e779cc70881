// The package's public API: what a program is written against. Everything else (mapped files,
// queues, index classes, the raw native binding) is in `mqstore/internals`, which may change in
// any release.
//
// The typings name Node's Buffer: TypeScript users need @types/node (a peer dependency).
/// <reference types="node" preserve="true" />
export { MessageStore, MessageStoreReader, PutMessageResult } from './store/message-store.js'
export type { ReadOnlyOpenOptions, ReaderStats } from './store/message-store.js'
export type {
  CleanerStats,
  CleanupPolicy,
  CompactionOptions,
  CompactReport,
  CommitOptions,
  ConsumeOptions,
  GetMessageResult,
  GetMessageStatus,
  HostAddress,
  LogLevel,
  Message,
  MessageExt,
  MessageFilter,
  MessageStoreStats,
  NackOptions,
  OpenOptions,
  PutMessageStatus,
  QueryMessageResult,
  RecoveryDamage,
  RecoveryOutcome,
  Repair,
  RetryGroupStats,
  RetryStats,
  ScheduleLevelStats,
  ScheduleStats,
  Subscription,
  TopicConfig,
  TopicInfo,
  TopicSubscription,
  TopicConfigInput,
  PassResult,
  ConnectOptions,
  SharingStats,
} from './store/types.js'
export type { HaClosedConnection, HaConnectionStats, HaSlaveStats, HaStats, TimerStats } from './store/types.js'
export type { HaSlaveStatus } from './store/ha/ha-stats.js'
export type { BrokerRole, HaOptions } from './store/ha/ha-options.js'
export type { SetBrokerRoleOptions } from './store/ha/ha-role-change.js'
export { Producer } from './store/sharing/producer-client.js'
export { ERROR_CODES, MQStoreError } from './errors.js'
export type { ErrorCode } from './errors.js'
export { EMBEDDED_DEFAULTS, ROCKETMQ_SIZES } from './store/config.js'
export type { FlushDiskType, MessageStoreConfig, MessageStoreOptions } from './store/config.js'
export type { StoreStats } from './store/store-stats.js'
export type { CleanupStats } from './store/cleanup/cleanup-service.js'
export type { DiskReading } from './store/cleanup/disk-policy.js'
export type { RunningFlagState } from './store/running-flags.js'
export { verifyStore } from './cli/verify/index.js'
export type { VerifyOptions, VerifyReport } from './cli/verify/index.js'
export type { LevelLogger, LogFunction, Logger } from './store/types.js'
