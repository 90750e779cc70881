// Type tests of the published declarations for logging and metrics: the `logger` option's two
// forms, and `mqstore/metrics` taking a MessageStore and a prom-client registry.
import { Registry } from 'prom-client'
import { MessageStore, type LevelLogger, type Logger, type LogLevel, type MessageStoreStats, type OpenOptions } from 'mqstore'
import { collectStoreMetrics, type StoreMetrics, type StoreMetricsOptions } from 'mqstore/metrics'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
function assertType<T extends true>(): T | undefined {
  return undefined
}

export async function observabilityTypeTests(pinoLike: LevelLogger): Promise<void> {
  // Both forms of logger; console fits the object form.
  const fn: OpenOptions = { logger: (level: LogLevel, message: string) => void [level, message] }
  const object: OpenOptions = { logger: pinoLike }
  const viaConsole: OpenOptions = { logger: console }
  assertType<Equal<LogLevel, 'debug' | 'info' | 'warn' | 'error'>>()
  // @ts-expect-error a logger needs every level method
  const partial: Logger = { info: (message: string) => void message }
  // @ts-expect-error the function form takes a level and a message
  const wrong: OpenOptions = { logger: (level: number) => void level }
  void [fn, object, viaConsole, partial, wrong]

  const store = await MessageStore.open('./data', object)
  const options: StoreMetricsOptions = { register: new Registry(), prefix: 'orders_', labels: { store: 'orders' } }
  const exported: StoreMetrics = collectStoreMetrics(store, options)
  exported.remove()
  // @ts-expect-error labels are strings
  collectStoreMetrics(store, { labels: { store: 1 } })
  // @ts-expect-error the exporter reads a store, not its stats
  collectStoreMetrics(store.stats())

  const stats: MessageStoreStats = store.stats()
  assertType<Equal<typeof stats.flushBehindBytes, number>>()
  assertType<Equal<typeof stats.commitBehindBytes, number>>()
  assertType<Equal<typeof stats.dispatchStuck, boolean>>()
  assertType<Equal<typeof stats.getMessageDistributeTime, Record<string, number>>>()
  await store.close()
}
