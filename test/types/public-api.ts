// Type tests of the published declarations: this file imports the package by its name, so it is
// checked against dist/lib/*.d.ts (what users get), by `tsc --noEmit` in `npm test`. A line under an
// expect-error directive must not compile; if it ever does, tsc fails on the unused directive.
import {
  MessageStore,
  MQStoreError,
  ERROR_CODES,
  type PutMessageResult,
  type ErrorCode,
  type GetMessageResult,
  type GetMessageStatus,
  type Message,
  type MessageExt,
  type MessageStoreStats,
  type NackOptions,
  type ScheduleStats,
  type OpenOptions,
  type PutMessageStatus,
  type QueryMessageResult,
  type Subscription,
  type TopicConfig,
  type TopicConfigInput,
  type CompactReport,
  type Producer,
  type SharingStats,
  type MessageStoreReader,
  type ReaderStats,
  type BrokerRole,
  type SetBrokerRoleOptions,
  type HaStats,
} from 'mqstore'
import type { MappedFile } from 'mqstore/internals'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
function assertType<T extends true>(): T | undefined {
  return undefined
}

export async function typeTests(): Promise<void> {
  // open() takes a directory and options, and resolves to a store.
  const options: OpenOptions = {
    flushDiskType: 'SYNC_FLUSH',
    mappedFileSizeCommitLog: 1 << 20,
    logger: (level, text) => void [level, text],
  }
  const store = await MessageStore.open('./data', options)
  assertType<Equal<typeof store, MessageStore>>()
  // @ts-expect-error flushDiskType is one of two strings
  void ({ flushDiskType: 'SOMETIMES' } satisfies OpenOptions)
  // @ts-expect-error an unknown option is a type error
  void ({ flushEveryMessage: true } satisfies OpenOptions)

  // putMessage: only topic and body are required; body is bytes or text.
  const message: Message = { topic: 'orders', body: 'hello' }
  const bytes: Message = { topic: 'orders', body: new Uint8Array([1, 2]), keys: ['a', 'b'], tags: 't', queueId: 1, properties: { a: 'b' } }
  // @ts-expect-error body is required
  void ({ topic: 'orders' } satisfies Message)
  // @ts-expect-error a body is bytes or a string, not a number
  void ({ topic: 'orders', body: 42 } satisfies Message)
  const result = await store.putMessage(message)
  assertType<Equal<typeof result, PutMessageResult>>()
  assertType<Equal<typeof result.status, PutMessageStatus>>()
  const status: PutMessageStatus = 'PUT_OK'
  // @ts-expect-error statuses are RocketMQ's names
  const wrong: PutMessageStatus = 'OK'
  void [status, wrong]
  const many = await store.putMessages([message, bytes])
  assertType<Equal<typeof many, PutMessageResult[]>>()
  assertType<Equal<typeof result.wroteOffset, number>>()
  assertType<Equal<typeof result.msgId, string>>()

  // Reads.
  const got: GetMessageResult = store.getMessage('group', 'orders', 0, 0, 32, { tags: ['t'] })
  assertType<Equal<typeof got.status, GetMessageStatus>>()
  assertType<Equal<(typeof got.messages)[number], MessageExt>>()
  const first: MessageExt | undefined = got.messages[0]
  if (first !== undefined) {
    assertType<Equal<typeof first.body, Buffer>>()
    assertType<Equal<typeof first.keys, string[]>>()
    assertType<Equal<typeof first.tags, string | undefined>>()
  }
  // Reads copy what they serve and check body CRCs by default; both are options.
  assertType<Equal<typeof got.bodyCrcFailures, number>>()
  void ({ copyMessageBody: false, checkCRCOnRead: false } satisfies OpenOptions)
  // @ts-expect-error checkCRCOnRead is a boolean
  void ({ checkCRCOnRead: 'yes' } satisfies OpenOptions)
  const found: QueryMessageResult = store.queryMessage('orders', 'a', 32, 0, Date.now())
  void found.messages.length
  assertType<Equal<typeof found.bodyCrcFailures, number>>()
  const one: MessageExt | null = store.lookMessageByOffset(0)
  void one
  // @ts-expect-error getMessage needs the group first
  store.getMessage('orders', 0, 0, 32)

  // consume(): an async iterable of MessageExt with a position and commit().
  const subscription: Subscription = store.consume({
    group: 'g',
    topic: 'orders',
    queueId: 0,
    from: 'earliest',
    signal: new AbortController().signal,
  })
  for await (const m of subscription) {
    assertType<Equal<typeof m, MessageExt>>()
    subscription.commit()
    break
  }
  assertType<Equal<typeof subscription.position, number>>()
  // @ts-expect-error from is 'committed', 'earliest', 'latest' or an offset
  store.consume({ group: 'g', topic: 'orders', queueId: 0, from: 'newest' })

  // Delayed delivery, retries and the dead-letter queue.
  const delayed: Message = { topic: 'orders', body: 'later', delayTimeLevel: 3 }
  await store.putMessage(delayed)
  const topicSub = store.consume({ group: 'g', topic: 'orders', maxReconsumeTimes: 5 })
  for await (const m of topicSub) {
    const nackOptions: NackOptions = { delayLevel: 2 }
    const sent: PutMessageResult = await topicSub.nack(m, nackOptions)
    assertType<Equal<typeof sent.status, PutMessageStatus>>()
    await topicSub.commit()
    break
  }
  // @ts-expect-error a delay level is a number
  store.putMessage({ topic: 'orders', body: 'x', delayTimeLevel: '3' })
  const schedule: ScheduleStats = store.stats().schedule
  assertType<Equal<typeof schedule.nextDueTime, number | null>>()

  // Offsets: a plain commit returns nothing; a durable one (and subscription.commit()) a promise.
  assertType<Equal<ReturnType<typeof subscription.commit>, Promise<void>>>()
  const plain = store.commitOffset('g', 'orders', 0, 1)
  assertType<Equal<typeof plain, void>>()
  const durable = store.commitOffset('g', 'orders', 0, 1, { durable: true })
  assertType<Equal<typeof durable, Promise<void>>>()
  await durable
  // @ts-expect-error durable is a boolean
  void store.commitOffset('g', 'orders', 0, 1, { durable: 'yes' })

  // Lookups by key: the time range is optional; the newest message of a key.
  const recent: QueryMessageResult = store.queryMessage('orders', 'a', 32)
  const latest: MessageExt | null = store.getLatestByKey('orders', 'a')
  void [recent, latest]
  assertType<Equal<typeof result.reason, string | undefined>>()

  // Results are read-only.
  // @ts-expect-error a put result's status is read-only
  result.status = 'PUT_OK'
  // @ts-expect-error a get result's messages are a read-only array
  got.messages.push(got.messages[0])
  // @ts-expect-error a message's fields are read-only
  if (first !== undefined) first.queueOffset = 1

  // stats() and errors.
  const stats: MessageStoreStats = store.stats()
  assertType<Equal<typeof stats.lastExitOK, boolean>>()
  assertType<Equal<typeof stats.commitLogMaxOffset, number>>()
  assertType<Equal<typeof stats.bodyCrcFailures, number>>()
  assertType<Equal<typeof stats.runningFlags.value, number>>()
  const flagReasons: string[] = stats.runningFlags.flags.map((f) => f.reason)
  void flagReasons
  // Compaction: topic settings, a pass on demand, the cleaner's measurements.
  const topicOptions: OpenOptions = {
    topics: { profiles: { cleanupPolicy: 'compact', minCompactionLagMs: 1000 } },
    compaction: { ioMaxBytesPerSecond: 1 << 20 },
  }
  void topicOptions
  // @ts-expect-error a cleanup policy is one of three strings
  void ({ cleanupPolicy: 'forever' } satisfies TopicConfigInput)
  const settings: TopicConfig = await store.setTopicConfig('profiles', { cleanupPolicy: 'compact,delete', retentionMs: 60_000 })
  assertType<Equal<typeof settings.cleanupPolicy, 'delete' | 'compact' | 'compact,delete'>>()
  const report: CompactReport = await store.compact('profiles')
  assertType<Equal<typeof report.bytesWritten, number>>()
  assertType<Equal<typeof stats.compaction.maxDirtyPercent, number>>()
  // Shared writes: a writer listens, producers in other processes connect.
  await using writer = await MessageStore.open('./data', { shareWrites: true })
  const sharing: SharingStats | null = writer.stats().sharing
  assertType<Equal<typeof stats.sharing, SharingStats | null>>()
  void sharing
  await using producer: Producer = await MessageStore.connect('./data', { timeoutMs: 1000 })
  const forwarded: PutMessageResult[] = await producer.putMessages([{ topic: 't', body: 'b' }])
  assertType<Equal<Awaited<ReturnType<typeof producer.putMessage>>, PutMessageResult>>()
  assertType<Equal<typeof producer.connected, boolean>>()
  void forwarded
  // @ts-expect-error shareWrites is a boolean
  void ({ shareWrites: 'yes' } satisfies OpenOptions)
  // Retention: a manual request returns nothing to await.
  assertType<Equal<ReturnType<typeof store.executeDeleteFilesManually>, void>>()
  try {
    await store.close()
  } catch (error) {
    if (error instanceof MQStoreError) assertType<Equal<typeof error.code, ErrorCode>>()
  }
  const code: ErrorCode = ERROR_CODES[0]
  // @ts-expect-error codes are a closed set
  const unknown: ErrorCode = 'EVERYTHING_IS_FINE'
  void [code, unknown]
  await using disposable = await MessageStore.open('./data')
  void disposable

  // A read-only opener is its own class: reads, no puts that type-check as puts.
  const reader = await MessageStore.open('./data', { readOnly: true, offsetStorePath: './reader-offsets.json' })
  assertType<Equal<typeof reader, MessageStoreReader>>()
  assertType<Equal<ReturnType<typeof reader.stats>, ReaderStats>>()
  assertType<Equal<ReturnType<typeof reader.getMessage>, GetMessageResult>>()
  const refused: Promise<never> = reader.putMessage({ topic: 't', body: 'x' })
  void refused
  // @ts-expect-error offsetStorePath belongs to readers
  void ({ offsetStorePath: './x.json' } satisfies OpenOptions)
  await reader.close()

  // Replication: the role change takes RocketMQ's role names and is awaited.
  const role: BrokerRole = 'SLAVE'
  const change: SetBrokerRoleOptions = { haMasterAddress: '127.0.0.1:10912', truncateToMaster: false }
  const changed: Promise<void> = store.setBrokerRole(role, change)
  void changed
  assertType<Equal<MessageStoreStats['ha'], HaStats>>()
  // @ts-expect-error not a broker role
  void store.setBrokerRole('LEADER')

  // Internals are a separate entry point, not on the package root.
  const mapped: typeof MappedFile | undefined = undefined
  void mapped
  // @ts-expect-error MappedFile is not exported from the package root
  // biome-ignore lint/correctness/noUnusedVariables: the type itself is the check
  type NotPublic = import('mqstore').MappedFile
}
