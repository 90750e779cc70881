// Shared by the timer tests: the engine's timer service, and a store opened with a fake clock.
import type { MessageStore } from '../../lib/store/message-store.js'
import type { StoreEngine } from '../../lib/store/store-engine.js'
import type { TimerService } from '../../lib/store/timer/timer-service.js'

export { FakeClock, readAll, SMALL, waitFor } from '../schedule/helpers.js'

export function timerOf(store: MessageStore): TimerService {
  return (store as unknown as { e: StoreEngine }).e.schedule.timer
}
