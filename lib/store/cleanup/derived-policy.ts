// Which consume-queue and index files follow the commit log out (§11.3, §3.5, §4.7). Pure: the
// files' last commit-log offsets and the commit log's min offset go in, the files to delete come out.

/** What the policy needs to know of one consume-queue file. */
export interface ConsumeQueueFileInfo {
  name: string
  startOffset: number
  sizeBytes: number
  /** Commit-log offset of the file's last unit; null when that unit is not written. */
  lastUnitPhyOffset: number | null
  available: boolean
}

export interface ConsumeQueueFilesInfo {
  topic: string
  queueId: number
  /** Oldest first. */
  files: readonly ConsumeQueueFileInfo[]
}

export interface IndexFileInfo {
  name: string
  sizeBytes: number
  /** Commit-log offset of the last message indexed in the file. */
  endPhyOffset: number
}

export interface ConsumeQueueDeletion {
  topic: string
  queueId: number
  files: ConsumeQueueFileInfo[]
}

export interface DerivedPlan {
  minPhyOffset: number
  /** Queues with files to delete (queues with none are left out). */
  consumeQueues: ConsumeQueueDeletion[]
  indexFiles: IndexFileInfo[]
  bytes: number
}

/**
 * A queue loses its leading files (never the last) whose last unit points below the commit log's
 * min offset; a file whose last unit is not written stops the walk unless an earlier pass already
 * shut it down.
 */
export function planConsumeQueueFiles(queue: ConsumeQueueFilesInfo, minPhyOffset: number): ConsumeQueueFileInfo[] {
  const doomed: ConsumeQueueFileInfo[] = []
  for (const file of queue.files.slice(0, -1)) {
    const below = file.lastUnitPhyOffset !== null ? file.lastUnitPhyOffset < minPhyOffset : !file.available
    if (!below) break
    doomed.push(file)
  }
  return doomed
}

/** Index files, oldest first and never the newest, whose last indexed offset is below the minimum. */
export function planIndexFiles(files: readonly IndexFileInfo[], minPhyOffset: number): IndexFileInfo[] {
  const doomed: IndexFileInfo[] = []
  for (const file of files.slice(0, -1)) {
    if (file.endPhyOffset >= minPhyOffset) break
    doomed.push(file)
  }
  return doomed
}

export function planDerivedCleanup(
  queues: Iterable<ConsumeQueueFilesInfo>,
  indexFiles: readonly IndexFileInfo[],
  minPhyOffset: number,
): DerivedPlan {
  const plan: DerivedPlan = { minPhyOffset, consumeQueues: [], indexFiles: [], bytes: 0 }
  if (minPhyOffset <= 0) return plan
  for (const queue of queues) {
    const files = planConsumeQueueFiles(queue, minPhyOffset)
    if (files.length === 0) continue
    plan.consumeQueues.push({ topic: queue.topic, queueId: queue.queueId, files })
    for (const file of files) plan.bytes += file.sizeBytes
  }
  plan.indexFiles = planIndexFiles(indexFiles, minPhyOffset)
  for (const file of plan.indexFiles) plan.bytes += file.sizeBytes
  return plan
}

export function describeDerivedPlan(plan: DerivedPlan): string[] {
  const lines: string[] = []
  for (const queue of plan.consumeQueues) {
    for (const file of queue.files) {
      lines.push(`consume queue ${queue.topic}/${queue.queueId}: delete ${file.name} (last unit below ${plan.minPhyOffset})`)
    }
  }
  for (const file of plan.indexFiles) {
    lines.push(`index: delete ${file.name} (last entry at ${file.endPhyOffset} < ${plan.minPhyOffset})`)
  }
  return lines
}
