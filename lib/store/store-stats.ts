// StoreStatsService's figures: cumulative counters sampled once a second (601 samples, ten minutes),
// from which put and get rates over 10 s, 60 s and 600 s are derived, plus latency maxima, sums and
// put and get latency histograms with RocketMQ's buckets. docs/api.md documents each field.

/**
 * Upper bounds (ms, exclusive) of the latency buckets; the last bucket is "10 s or more". Elapsed
 * times are whole milliseconds, so the first bucket ('<=0ms') holds what took under 1 ms.
 */
export const LATENCY_BUCKETS_MS = [1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10_000]
/** RocketMQ's names of the buckets, the keys of putMessageDistributeTime; one more than the bounds. */
export const LATENCY_LABELS = [
  '<=0ms',
  '0~10ms',
  '10~50ms',
  '50~100ms',
  '100~200ms',
  '200~500ms',
  '500ms~1s',
  '1~2s',
  '2~3s',
  '3~4s',
  '4~5s',
  '5~10s',
  '10s~',
]
const SAMPLES_KEPT = 601

interface Sample {
  at: number
  puts: number
  getFound: number
  getMiss: number
  getTransferred: number
}

export interface StoreStats {
  bootTimestamp: number
  runtimeMs: number
  putMessageTimesTotal: number
  putMessageSizeTotal: number
  putMessageFailedTimes: number
  putMessageAverageSize: number
  putMessageEntireTimeMax: number
  /** Put latency (ms) summed over the messages stored. */
  putMessageEntireTimeTotal: number
  getMessageEntireTimeMax: number
  /** getMessage latency (ms) summed over the calls. */
  getMessageEntireTimeTotal: number
  getMessageTimesTotalFound: number
  getMessageTimesTotalMiss: number
  getMessageTransferedMsgCount: number
  /** Messages stored per put latency bucket (LATENCY_LABELS). */
  putMessageDistributeTime: Record<string, number>
  /** getMessage calls per latency bucket (LATENCY_LABELS). */
  getMessageDistributeTime: Record<string, number>
  /** Damaged commit-log ranges dispatch skipped since open, and their bytes. */
  dispatchSkippedRanges: number
  dispatchSkippedBytes: number
  /** SYNC_FLUSH group commits since open, and the waiting puts they answered. */
  groupCommitTimesTotal: number
  groupCommitRequestsTotal: number
  /** Their time (us) summed and the longest: from the write of a group's records to the end of its sync. */
  groupCommitMicrosTotal: number
  groupCommitMicrosMax: number
  putTps: { '10s': number; '60s': number; '600s': number }
  getFoundTps: { '10s': number; '60s': number; '600s': number }
  getMissTps: { '10s': number; '60s': number; '600s': number }
  getTotalTps: { '10s': number; '60s': number; '600s': number }
  getTransferedTps: { '10s': number; '60s': number; '600s': number }
}

export class StoreStatsService {
  readonly bootTimestamp = Date.now()
  putMessageTimesTotal = 0
  putMessageSizeTotal = 0
  putMessageFailedTimes = 0
  putMessageEntireTimeMax = 0
  putMessageEntireTimeTotal = 0
  getMessageEntireTimeMax = 0
  getMessageEntireTimeTotal = 0
  getMessageTimesTotalFound = 0
  getMessageTimesTotalMiss = 0
  getMessageTransferedMsgCount = 0
  dispatchSkippedRanges = 0
  dispatchSkippedBytes = 0
  groupCommitTimesTotal = 0
  groupCommitRequestsTotal = 0
  groupCommitMicrosTotal = 0
  groupCommitMicrosMax = 0
  private readonly putLatency = new Array<number>(LATENCY_LABELS.length).fill(0)
  private readonly getLatency = new Array<number>(LATENCY_LABELS.length).fill(0)
  private readonly samples: Sample[] = []
  private timer: NodeJS.Timeout | null = null

  start(): void {
    this.sample()
    this.timer = setInterval(() => this.sample(), 1000)
    this.timer.unref()
  }

  shutdown(): void {
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
  }

  recordPut(messages: number, bytes: number, elapsedMs: number): void {
    this.putMessageTimesTotal += messages
    this.putMessageSizeTotal += bytes
    if (elapsedMs > this.putMessageEntireTimeMax) this.putMessageEntireTimeMax = elapsedMs
    // Each message of a batch waited the whole batch's time.
    this.putMessageEntireTimeTotal += elapsedMs * messages
    this.putLatency[latencyBucket(elapsedMs)] += messages
  }

  /** One group commit that answered `requests` waiting puts and took `micros`. */
  recordGroupCommit(requests: number, micros: number): void {
    this.groupCommitTimesTotal += 1
    this.groupCommitRequestsTotal += requests
    this.groupCommitMicrosTotal += micros
    if (micros > this.groupCommitMicrosMax) this.groupCommitMicrosMax = micros
  }

  recordGet(found: number, elapsedMs: number): void {
    if (found > 0) {
      this.getMessageTimesTotalFound += 1
      this.getMessageTransferedMsgCount += found
    } else {
      this.getMessageTimesTotalMiss += 1
    }
    if (elapsedMs > this.getMessageEntireTimeMax) this.getMessageEntireTimeMax = elapsedMs
    this.getMessageEntireTimeTotal += elapsedMs
    this.getLatency[latencyBucket(elapsedMs)] += 1
  }

  private sample(): void {
    this.samples.push({
      at: Date.now(),
      puts: this.putMessageTimesTotal,
      getFound: this.getMessageTimesTotalFound,
      getMiss: this.getMessageTimesTotalMiss,
      getTransferred: this.getMessageTransferedMsgCount,
    })
    if (this.samples.length > SAMPLES_KEPT) this.samples.shift()
  }

  /** Rate of a counter over the last `seconds`, from the oldest sample in that window to now. */
  private rate(seconds: number, pick: (s: Sample) => number): number {
    const now: Sample = {
      at: Date.now(),
      puts: this.putMessageTimesTotal,
      getFound: this.getMessageTimesTotalFound,
      getMiss: this.getMessageTimesTotalMiss,
      getTransferred: this.getMessageTransferedMsgCount,
    }
    const from = this.samples.find((s) => now.at - s.at <= seconds * 1000) ?? now
    const elapsed = (now.at - from.at) / 1000
    return elapsed > 0 ? Math.round(((pick(now) - pick(from)) / elapsed) * 100) / 100 : 0
  }

  private rates(pick: (s: Sample) => number): { '10s': number; '60s': number; '600s': number } {
    return { '10s': this.rate(10, pick), '60s': this.rate(60, pick), '600s': this.rate(600, pick) }
  }

  snapshot(): StoreStats {
    const distribution = (counts: number[]) => Object.fromEntries(LATENCY_LABELS.map((label, i) => [label, counts[i]]))
    return {
      bootTimestamp: this.bootTimestamp,
      runtimeMs: Date.now() - this.bootTimestamp,
      putMessageTimesTotal: this.putMessageTimesTotal,
      putMessageSizeTotal: this.putMessageSizeTotal,
      putMessageFailedTimes: this.putMessageFailedTimes,
      putMessageAverageSize: this.putMessageTimesTotal > 0 ? this.putMessageSizeTotal / this.putMessageTimesTotal : 0,
      putMessageEntireTimeMax: this.putMessageEntireTimeMax,
      putMessageEntireTimeTotal: this.putMessageEntireTimeTotal,
      getMessageEntireTimeMax: this.getMessageEntireTimeMax,
      getMessageEntireTimeTotal: this.getMessageEntireTimeTotal,
      getMessageTimesTotalFound: this.getMessageTimesTotalFound,
      getMessageTimesTotalMiss: this.getMessageTimesTotalMiss,
      getMessageTransferedMsgCount: this.getMessageTransferedMsgCount,
      putMessageDistributeTime: distribution(this.putLatency),
      getMessageDistributeTime: distribution(this.getLatency),
      dispatchSkippedRanges: this.dispatchSkippedRanges,
      dispatchSkippedBytes: this.dispatchSkippedBytes,
      groupCommitTimesTotal: this.groupCommitTimesTotal,
      groupCommitRequestsTotal: this.groupCommitRequestsTotal,
      groupCommitMicrosTotal: this.groupCommitMicrosTotal,
      groupCommitMicrosMax: this.groupCommitMicrosMax,
      putTps: this.rates((s) => s.puts),
      getFoundTps: this.rates((s) => s.getFound),
      getMissTps: this.rates((s) => s.getMiss),
      getTotalTps: this.rates((s) => s.getFound + s.getMiss),
      getTransferedTps: this.rates((s) => s.getTransferred),
    }
  }
}

/** The bucket of an elapsed time in whole ms: 0 for under 1 ms, the last for 10 s or more. */
function latencyBucket(elapsedMs: number): number {
  if (elapsedMs <= 0) return 0
  // A loop, not findIndex with a closure: this runs once per put.
  for (let i = 1; i < LATENCY_BUCKETS_MS.length; i++) if (elapsedMs < LATENCY_BUCKETS_MS[i]) return i
  return LATENCY_LABELS.length - 1
}
