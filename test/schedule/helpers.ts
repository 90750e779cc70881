// Shared by the schedule tests: a store with a clock the test moves, and the engine's schedule service.
import type { MessageStore, MessageExt, OpenOptions } from '../../lib/store/message-store.js'
import type { ScheduleService } from '../../lib/store/schedule/schedule-service.js'
import type { StoreEngine } from '../../lib/store/store-engine.js'

export { waitFor } from '../helpers/wait.js'

export const SMALL: OpenOptions = {
  mappedFileSizeCommitLog: 64 * 1024,
  mappedFileSizeConsumeQueue: 20 * 200,
  maxHashSlotNum: 64,
  maxIndexNum: 256,
}

/** A clock the test sets; starts at the real time. */
export class FakeClock {
  at = Date.now()
  readonly clock = { now: (): number => this.at }
}

export function scheduleOf(store: MessageStore): ScheduleService {
  return (store as unknown as { e: StoreEngine }).e.schedule
}

/** Every message of one queue, from its min offset. */
export function readAll(store: MessageStore, topic: string, queueId: number): MessageExt[] {
  const out: MessageExt[] = []
  let offset = store.getMinOffsetInQueue(topic, queueId)
  for (;;) {
    const r = store.getMessage('inspect', topic, queueId, offset, 32)
    if (r.status !== 'FOUND') return out
    out.push(...r.messages)
    offset = r.nextBeginOffset
  }
}
