// `mqstore/metrics`: a Prometheus exporter over store.stats(), for prom-client (an optional peer
// dependency: only programs that import this module need it). Every metric is a collector that
// reads stats() when the registry is scraped; nothing runs between scrapes. Names follow
// Prometheus's conventions (base units: bytes and seconds, counters end in _total); docs/api.md
// lists each with the stats() field it comes from.
import { Counter, Gauge, Histogram, register as globalRegistry, type MetricType, type Registry } from 'prom-client'

import { RunningFlag, type RunningFlagName } from './store/running-flags.js'
import { LATENCY_BUCKETS_MS, LATENCY_LABELS } from './store/store-stats.js'
import type { MessageStoreStats } from './store/types.js'

/** What the exporter reads: a MessageStore, or anything with the same two members. */
export interface StatsSource {
  stats(): MessageStoreStats
  readonly isClosed: boolean
}

export interface StoreMetricsOptions {
  /** The registry to register in; prom-client's default `register` when absent. */
  register?: Registry
  /** Prefix of every metric name; 'mqstore_' by default. */
  prefix?: string
  /**
   * Labels on every sample of this store, e.g. `{ store: 'orders' }`. Several stores can share a
   * registry and prefix when each has its own labels (the same label names for all of them).
   */
  labels?: Record<string, string>
}

/** What collectStoreMetrics returns: `remove()` stops exporting the store (idempotent). */
export interface StoreMetrics {
  remove(): void
}

type Labels = Record<string, string>
type Sample = [labels: Labels, value: number]
type Read = (stats: MessageStoreStats) => Sample[]

interface Definition {
  name: string
  help: string
  type: 'counter' | 'gauge'
  labelNames: string[]
  read: Read
}

const WINDOWS = ['10s', '60s', '600s'] as const
const FLAG_NAMES = Object.keys(RunningFlag) as RunningFlagName[]
const HA_ROLES = ['ASYNC_MASTER', 'SYNC_MASTER', 'SLAVE'] as const

/** A sample without labels. */
const one = (value: number): Sample[] => [[{}, value]]
const bit = (value: boolean): number => (value ? 1 : 0)

/** The counters and gauges, in the order of the groups of stats() in docs/api.md. */
const DEFINITIONS: Definition[] = [
  // Counters.
  counter('put_messages_total', 'Messages stored since open.', [], (s) => one(s.putMessageTimesTotal)),
  counter('put_bytes_total', 'Bytes of the records stored since open.', [], (s) => one(s.putMessageSizeTotal)),
  counter('put_failures_total', 'Messages whose put was refused or failed since open.', [], (s) => one(s.putMessageFailedTimes)),
  counter('get_requests_total', 'getMessage calls since open, by whether they found messages.', ['result'], (s) => [
    [{ result: 'found' }, s.getMessageTimesTotalFound],
    [{ result: 'miss' }, s.getMessageTimesTotalMiss],
  ]),
  counter('get_messages_total', 'Messages returned by getMessage since open.', [], (s) => one(s.getMessageTransferedMsgCount)),
  // Rates.
  gauge('put_rate', 'Messages stored per second over the window.', ['window'], (s) => WINDOWS.map((w) => [{ window: w }, s.putTps[w]])),
  gauge('get_requests_rate', 'getMessage calls per second over the window, by result.', ['window', 'result'], (s) =>
    WINDOWS.flatMap((w): Sample[] => [
      [{ window: w, result: 'found' }, s.getFoundTps[w]],
      [{ window: w, result: 'miss' }, s.getMissTps[w]],
    ]),
  ),
  gauge('get_messages_rate', 'Messages returned by getMessage per second over the window.', ['window'], (s) =>
    WINDOWS.map((w) => [{ window: w }, s.getTransferedTps[w]]),
  ),
  // Latency maxima (the histograms are below).
  gauge('put_latency_max_seconds', 'Longest put since open.', [], (s) => one(s.putMessageEntireTimeMax / 1000)),
  gauge('get_latency_max_seconds', 'Longest getMessage since open.', [], (s) => one(s.getMessageEntireTimeMax / 1000)),
  // Commit log.
  gauge('commitlog_offset_bytes', 'Commit-log offsets: min (oldest kept), max (end), flushed.', ['position'], (s) => [
    [{ position: 'min' }, s.commitLogMinOffset],
    [{ position: 'max' }, s.commitLogMaxOffset],
    [{ position: 'flushed' }, s.commitLogFlushedOffset],
  ]),
  gauge('consume_queues', 'Consume queues (topic and queue id pairs).', [], (s) => one(s.consumeQueueCount)),
  gauge('index_files', 'Index files.', [], (s) => one(s.indexFileCount)),
  // Dispatch and flush.
  gauge('dispatch_behind_bytes', 'Commit-log bytes not yet in the consume queues and the index.', [], (s) => one(s.dispatchBehindBytes)),
  gauge('dispatch_stuck', '1 while dispatch is stopped at a record it cannot index (puts are refused).', [], (s) =>
    one(bit(s.dispatchStuck)),
  ),
  counter('dispatch_skipped_bytes_total', 'Damaged commit-log bytes dispatch skipped since open.', [], (s) => one(s.dispatchSkippedBytes)),
  gauge('flush_behind_bytes', 'Commit-log bytes in the files but not yet flushed to disk.', [], (s) => one(s.flushBehindBytes)),
  gauge('commit_behind_bytes', 'Bytes in write buffers not yet committed to the files (transient store pool).', [], (s) =>
    one(s.commitBehindBytes),
  ),
  counter('group_commits_total', 'SYNC_FLUSH group commits since open.', [], (s) => one(s.groupCommitTimesTotal)),
  counter('group_commit_requests_total', 'Waiting puts answered by group commits since open.', [], (s) => one(s.groupCommitRequestsTotal)),
  counter('group_commit_seconds_total', 'Time of the group commits, from the write of their records to the end of their sync.', [], (s) =>
    one(s.groupCommitMicrosTotal / 1e6),
  ),
  gauge('group_commit_max_seconds', 'Longest group commit since open.', [], (s) => one(s.groupCommitMicrosMax / 1e6)),
  // Recovery and repairs.
  gauge('last_exit_clean', '1 when the previous close was clean, 0 after a crash.', [], (s) => one(bit(s.lastExitOK))),
  gauge('recovery_scanned_bytes', 'Commit-log bytes scanned by the recovery at open.', [], (s) => one(s.recovery?.scannedBytes ?? 0)),
  counter('repairs_total', 'Repairs made at open and while running (listed in stats().repairs).', [], (s) => one(s.repairs.length)),
  // Disk usage and running flags.
  gauge('disk_used_ratio', 'Used fraction of the partition holding the commit log or the consume queues.', ['role', 'path'], (s) =>
    readableDisks(s).map((d) => [{ role: d.role, path: d.path }, d.usedRatio]),
  ),
  gauge('disk_total_bytes', 'Size of the partition.', ['role', 'path'], (s) =>
    readableDisks(s).map((d) => [{ role: d.role, path: d.path }, d.totalBytes]),
  ),
  gauge('disk_available_bytes', 'Bytes available on the partition.', ['role', 'path'], (s) =>
    readableDisks(s).map((d) => [{ role: d.role, path: d.path }, d.availableBytes]),
  ),
  gauge('running_flags', "RocketMQ's RunningFlags bits (0: nothing blocks reads or writes).", [], (s) => one(s.runningFlags.value)),
  gauge('running_flag', '1 while the flag is set.', ['flag'], (s) =>
    FLAG_NAMES.map((flag) => [{ flag }, bit((s.runningFlags.value & RunningFlag[flag]) !== 0)]),
  ),
  // Cleanup.
  counter('cleanup_deleted_files_total', 'Files deleted by retention since open, by kind.', ['kind'], (s) => [
    [{ kind: 'commitLog' }, s.cleanup.filesDeleted.commitLog],
    [{ kind: 'consumeQueue' }, s.cleanup.filesDeleted.consumeQueue],
    [{ kind: 'index' }, s.cleanup.filesDeleted.index],
  ]),
  counter('cleanup_deleted_bytes_total', 'Bytes of the files deleted by retention since open.', [], (s) => one(s.cleanup.bytesDeleted)),
  gauge('cleanup_manual_passes_left', 'Passes left of the last executeDeleteFilesManually().', [], (s) => one(s.cleanup.manualPassesLeft)),
  gauge('cleanup_last_pass_timestamp_seconds', 'When the last cleanup pass ran (0: none yet).', [], (s) =>
    one((s.cleanup.lastPass?.at ?? 0) / 1000),
  ),
  // Shared writes (0 without shareWrites).
  gauge('connected_producers', 'Producers in other processes connected to this writer (shareWrites).', [], (s) =>
    one(s.sharing?.connectedProducers ?? 0),
  ),
  counter('forwarded_puts_total', 'Messages producers in other processes forwarded to this writer since open.', [], (s) =>
    one(s.sharing?.forwardedPuts ?? 0),
  ),
  // Compaction: the cleaner's measurements (stats().compaction) are added here with compaction.
  gauge('schedule_pending', 'Delayed messages not yet delivered, by delay level.', ['level'], (s) =>
    s.schedule.levels.map((l) => [{ level: String(l.level) }, l.pending]),
  ),
  counter('schedule_delivered_total', 'Delayed messages delivered to their real topic since open.', [], (s) => one(s.schedule.delivered)),
  gauge('schedule_lag_seconds', 'How long the oldest due delayed message not yet delivered has been due.', [], (s) =>
    one(s.schedule.lagMs / 1000),
  ),
  counter('schedule_lost_to_retention_total', 'Pending delayed messages whose record retention deleted since open.', [], (s) =>
    one(s.schedule.lostToRetention),
  ),
  gauge('timer_pending', 'Timed messages (deliverAt / delayMs) not yet delivered.', [], (s) => one(s.timer.pending)),
  counter('timer_delivered_total', 'Timed messages delivered to their real topic since open.', [], (s) => one(s.timer.delivered)),
  gauge('timer_lag_seconds', 'How long the earliest due timer slot not yet delivered has been due.', [], (s) => one(s.timer.lagMs / 1000)),
  // Replication (stats().ha).
  gauge('ha_role', 'The replication role: 1 for the brokerRole the store runs as, 0 for the others.', ['role'], (s) =>
    HA_ROLES.map((role) => [{ role }, bit(s.ha.role === role)]),
  ),
  gauge('ha_connected_slaves', 'Slaves connected to this master.', [], (s) => one(s.ha.connections.length)),
  gauge('ha_slave_lag_bytes', "On a master, per slave: the master's end minus the offset the slave last acknowledged.", ['peer'], (s) =>
    s.ha.connections.filter((c) => c.lagBytes >= 0).map((c): Sample => [{ peer: c.peer }, c.lagBytes]),
  ),
  gauge('ha_master_lag_bytes', "On a slave: the master's end, as its last frame told, minus the slave's end.", [], (s) =>
    s.ha.slave === null || s.ha.slave.lagBytes < 0 ? [] : one(s.ha.slave.lagBytes),
  ),
  gauge('ha_master_connected', 'On a slave: 1 while connected to its master.', [], (s) =>
    s.ha.slave === null ? [] : one(bit(s.ha.slave.connected)),
  ),
  counter('ha_reconnects_total', "A slave's reconnections to its master since open.", [], (s) => one(s.ha.reconnects)),
]

/** Labels of the metrics themselves ('le' is the histograms'): a store's labels must differ. */
const METRIC_LABEL_NAMES = new Set(['le', ...DEFINITIONS.flatMap((d) => d.labelNames)])

function counter(name: string, help: string, labelNames: string[], read: Read): Definition {
  return { name, help, type: 'counter', labelNames, read }
}

function gauge(name: string, help: string, labelNames: string[], read: Read): Definition {
  return { name, help, type: 'gauge', labelNames, read }
}

function readableDisks(stats: MessageStoreStats): MessageStoreStats['diskUsage'] {
  // A path that could not be read has usedRatio -1 and no figures worth a sample.
  return stats.diskUsage.filter((d) => d.usedRatio >= 0)
}

/**
 * Histogram bounds (seconds). Elapsed times are counted in whole (truncated) ms, so RocketMQ's
 * bucket '0~10ms' (1 to 9 ms) holds times under 10 ms: its exclusive bounds serve as `le` bounds.
 */
const LATENCY_BOUNDS_S = LATENCY_BUCKETS_MS.map((ms) => ms / 1000)

interface Attached {
  source: StatsSource
  labels: Labels
}

/** Stores exported through one registry and prefix, and the metrics that read them. */
interface Group {
  attached: Attached[]
  labelNames: string[]
  metricNames: string[]
  /** stats() of each store for the scrape under way: read once, dropped after the scrape's tick. */
  snapshot: Map<Attached, MessageStoreStats | null> | null
}

const groups = new WeakMap<Registry, Map<string, Group>>()

/**
 * Exports `store`'s stats() through prom-client: counters and gauges for puts and gets (totals,
 * rates, latency histograms and maxima), the commit log, dispatch and flush lags, repairs, disk
 * usage, running flags, cleanup and replication. A closed store exports `<prefix>open 0` and its figures at close;
 * call remove() to stop exporting it.
 */
export function collectStoreMetrics(store: StatsSource, options: StoreMetricsOptions = {}): StoreMetrics {
  if (store === null || typeof store !== 'object' || typeof store.stats !== 'function') {
    throw new TypeError('collectStoreMetrics needs a MessageStore')
  }
  const registry = options.register ?? globalRegistry
  const prefix = options.prefix ?? 'mqstore_'
  if (typeof prefix !== 'string' || !/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(prefix))
    throw new TypeError(`prefix ${JSON.stringify(prefix)} is not a metric name prefix`)
  const labels = { ...(options.labels ?? {}) }
  for (const [name, value] of Object.entries(labels)) {
    if (typeof value !== 'string') throw new TypeError(`label ${name} must be a string`)
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(name) || name.startsWith('__')) throw new TypeError(`${JSON.stringify(name)} is not a label name`)
    if (METRIC_LABEL_NAMES.has(name)) throw new TypeError(`label ${name} is one the metrics use themselves`)
  }
  let byPrefix = groups.get(registry)
  if (byPrefix === undefined) groups.set(registry, (byPrefix = new Map()))
  let group = byPrefix.get(prefix)
  // registry.clear() drops the metrics behind our back: start the group afresh.
  if (group !== undefined && registry.getSingleMetric(`${prefix}open`) === undefined) group = undefined
  const labelNames = Object.keys(labels).sort()
  if (group === undefined) {
    group = createGroup(registry, prefix, labelNames)
    byPrefix.set(prefix, group)
  } else if (group.labelNames.join() !== labelNames.join()) {
    throw new TypeError(`stores exported under ${prefix} need the same label names (${group.labelNames.join(', ') || 'none'})`)
  }
  // Two stores with the same label values would give the registry duplicate series.
  const key = JSON.stringify(labelNames.map((name) => labels[name]))
  if (group.attached.some((a) => JSON.stringify(labelNames.map((name) => a.labels[name])) === key)) {
    throw new TypeError(`a store is already exported under ${prefix} with labels ${JSON.stringify(labels)}`)
  }
  const attached: Attached = { source: store, labels }
  group.attached.push(attached)
  const owner = group
  return {
    remove() {
      const at = owner.attached.indexOf(attached)
      if (at < 0) return
      owner.attached.splice(at, 1)
      // A group replaced after registry.clear() no longer owns the names.
      if (owner.attached.length > 0 || byPrefix.get(prefix) !== owner) return
      for (const name of owner.metricNames) registry.removeSingleMetric(name)
      byPrefix.delete(prefix)
    },
  }
}

function createGroup(registry: Registry, prefix: string, storeLabelNames: string[]): Group {
  const group: Group = { attached: [], labelNames: storeLabelNames, metricNames: [], snapshot: null }
  const registers = [registry]
  const add = (name: string) => group.metricNames.push(name)

  add(`${prefix}open`)
  new Gauge({
    name: `${prefix}open`,
    help: '1 while the store is open, 0 once closed.',
    labelNames: storeLabelNames,
    registers,
    collect() {
      this.reset()
      for (const a of group.attached) this.set(a.labels, bit(!a.source.isClosed))
    },
  })
  for (const definition of DEFINITIONS) {
    const name = `${prefix}${definition.name}`
    const labelNames = [...storeLabelNames, ...definition.labelNames]
    add(name)
    if (definition.type === 'counter') {
      new Counter({
        name,
        help: definition.help,
        labelNames,
        registers,
        collect() {
          this.reset()
          forEachSample(group, definition.read, (sampleLabels, value) => this.inc(sampleLabels, value))
        },
      })
    } else {
      new Gauge({
        name,
        help: definition.help,
        labelNames,
        registers,
        collect() {
          this.reset()
          forEachSample(group, definition.read, (sampleLabels, value) => this.set(sampleLabels, value))
        },
      })
    }
  }
  for (const op of ['put', 'get'] as const) {
    const name = `${prefix}${op}_latency_seconds`
    add(name)
    new LatencyHistogram(name, op, group, registers)
  }
  return group
}

/** stats() of every open store of the group, read once per scrape. */
function snapshots(group: Group): Map<Attached, MessageStoreStats | null> {
  if (group.snapshot !== null) return group.snapshot
  const taken = new Map<Attached, MessageStoreStats | null>()
  for (const a of group.attached) {
    let stats: MessageStoreStats | null = null
    try {
      // A closed store gives the figures it had at close: its counters do not drop to zero.
      stats = a.source.stats()
    } catch {
      // A source that cannot give figures now leaves its series out of this scrape, nothing else.
    }
    taken.set(a, stats)
  }
  group.snapshot = taken
  // A registry calls every collector in one synchronous run; the next scrape reads afresh.
  queueMicrotask(() => (group.snapshot = null))
  return taken
}

function forEachSample(group: Group, read: Read, use: (labels: Labels, value: number) => void): void {
  for (const [a, stats] of snapshots(group)) {
    if (stats === null) continue
    for (const [sampleLabels, value] of read(stats)) {
      if (Number.isFinite(value)) use({ ...a.labels, ...sampleLabels }, value)
    }
  }
}

/**
 * A Prometheus histogram whose buckets are the store's own latency buckets (stats()'s
 * putMessageDistributeTime / getMessageDistributeTime), so a scrape copies counts instead of
 * observing each put twice. prom-client's Histogram has no setter for counts: get() is replaced.
 */
class LatencyHistogram extends Histogram<string> {
  private readonly metricName: string
  private readonly helpText: string

  constructor(
    name: string,
    private readonly op: 'put' | 'get',
    private readonly group: Group,
    registers: Registry[],
  ) {
    const help = op === 'put' ? 'Put latency, per message stored.' : 'getMessage latency, per call.'
    super({ name, help, labelNames: group.labelNames, buckets: LATENCY_BOUNDS_S, registers })
    this.metricName = name
    this.helpText = help
  }

  override async get(): ReturnType<Histogram<string>['get']> {
    const name = this.metricName
    const values: Awaited<ReturnType<Histogram<string>['get']>>['values'] = []
    for (const [a, stats] of snapshots(this.group)) {
      if (stats === null) continue
      const counts = this.op === 'put' ? stats.putMessageDistributeTime : stats.getMessageDistributeTime
      const sumMs = this.op === 'put' ? stats.putMessageEntireTimeTotal : stats.getMessageEntireTimeTotal
      let cumulative = 0
      LATENCY_BOUNDS_S.forEach((bound, i) => {
        cumulative += counts[LATENCY_LABELS[i]] ?? 0
        values.push({ metricName: `${name}_bucket`, labels: { ...a.labels, le: bound }, value: cumulative })
      })
      cumulative += counts[LATENCY_LABELS[LATENCY_LABELS.length - 1]] ?? 0
      values.push({ metricName: `${name}_bucket`, labels: { ...a.labels, le: '+Inf' }, value: cumulative })
      values.push({ metricName: `${name}_sum`, labels: { ...a.labels }, value: sumMs / 1000 })
      values.push({ metricName: `${name}_count`, labels: { ...a.labels }, value: cumulative })
    }
    // prom-client declares `type` as a numeric enum but writes (and reads) the string.
    const type = 'histogram' as unknown as MetricType
    return { name, help: this.helpText, type, values, aggregator: 'sum', collect: () => {} }
  }

  /** The registry's text format asks for this one when a metric has it. */
  getForPromString(): ReturnType<Histogram<string>['get']> {
    return this.get()
  }
}
