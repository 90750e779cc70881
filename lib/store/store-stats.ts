// StoreStatsService's figures: cumulative counters sampled once a second (601 samples, ten minutes),
// from which put and get rates over 10 s, 60 s and 600 s are derived, plus latency maxima and a
// put-latency histogram with RocketMQ's buckets.

/** Upper bounds (ms, exclusive) of the put latency buckets; the last bucket is "10 s or more". */
const PUT_LATENCY_BUCKETS_MS = [1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10_000]
const PUT_LATENCY_LABELS = ['<=0ms', '0~10ms', '10~50ms', '50~100ms', '100~200ms', '200~500ms', '500ms~1s',
  '1~2s', '2~3s', '3~4s', '4~5s', '5~10s', '10s~']
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
  getMessageEntireTimeMax: number
  putMessageDistributeTime: Record<string, number>
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
  getMessageEntireTimeMax = 0
  getMessageTimesTotalFound = 0
  getMessageTimesTotalMiss = 0
  getMessageTransferedMsgCount = 0
  private readonly putLatency = new Array<number>(PUT_LATENCY_LABELS.length).fill(0)
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
    let bucket = 0
    if (elapsedMs > 0) {
      bucket = PUT_LATENCY_BUCKETS_MS.findIndex((bound, i) => i > 0 && elapsedMs < bound)
      if (bucket < 0) bucket = PUT_LATENCY_LABELS.length - 1
    }
    this.putLatency[bucket] += messages
  }

  recordGet(found: number, elapsedMs: number): void {
    if (found > 0) {
      this.getMessageTimesTotalFound += 1
      this.getMessageTransferedMsgCount += found
    } else {
      this.getMessageTimesTotalMiss += 1
    }
    if (elapsedMs > this.getMessageEntireTimeMax) this.getMessageEntireTimeMax = elapsedMs
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
    const distribution: Record<string, number> = {}
    PUT_LATENCY_LABELS.forEach((label, i) => (distribution[label] = this.putLatency[i]))
    return {
      bootTimestamp: this.bootTimestamp,
      runtimeMs: Date.now() - this.bootTimestamp,
      putMessageTimesTotal: this.putMessageTimesTotal,
      putMessageSizeTotal: this.putMessageSizeTotal,
      putMessageFailedTimes: this.putMessageFailedTimes,
      putMessageAverageSize:
        this.putMessageTimesTotal > 0 ? this.putMessageSizeTotal / this.putMessageTimesTotal : 0,
      putMessageEntireTimeMax: this.putMessageEntireTimeMax,
      getMessageEntireTimeMax: this.getMessageEntireTimeMax,
      putMessageDistributeTime: distribution,
      putTps: this.rates((s) => s.puts),
      getFoundTps: this.rates((s) => s.getFound),
      getMissTps: this.rates((s) => s.getMiss),
      getTotalTps: this.rates((s) => s.getFound + s.getMiss),
      getTransferedTps: this.rates((s) => s.getTransferred),
    }
  }
}
