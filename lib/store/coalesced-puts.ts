// Single durable puts made in one turn of the event loop, appended as one batch.
//
// With SYNC_FLUSH each put waits for a group commit, and its records are staged: no reader sees
// them before the commit writes them (commitlog/write-stage.ts). Producers that each await their
// own put therefore all put again in the same turn, right after the commit that answered them,
// and each put paid the whole put path for one message (its arrays, its pass over the slices,
// its wait and its promise), several times what a message costs in a batch. Puts made in one
// turn are gathered and appended together in a microtask, in the order they were made: they meet
// the same group commit they would have met one by one, and nothing reads them in between. Every
// other put path appends what is gathered first, so no put overtakes an earlier one; close and a
// role change do their work after an await, so the microtask has appended them before.
import type { PutMessageResult } from './commitlog/commit-log.js'
import { checkMessageShape } from './message-validation.js'
import type { Message } from './types.js'

type Resolve = (result: PutMessageResult) => void
type Reject = (error: unknown) => void

/** The batch whose promise is being made: its executor runs inside `add`, without a closure per put. */
let opening: CoalescedPuts | null = null

function adoptSettlers(resolve: Resolve, reject: Reject): void {
  const puts = opening as CoalescedPuts
  puts.resolves.push(resolve)
  puts.rejects.push(reject)
}

export class CoalescedPuts {
  private messages: Message[] = []
  /** Each gathered put's settlers, in the order of `messages`. */
  resolves: Resolve[] = []
  rejects: Reject[] = []
  private scheduled = false

  /**
   * `putBatch`: the store's put of many messages, one result each in their order; `putAlone`: its
   * put of one message, at once (which first puts what is gathered).
   */
  constructor(
    private readonly putBatch: (messages: Message[]) => Promise<PutMessageResult[]>,
    private readonly putAlone: (message: Message) => Promise<PutMessageResult>,
  ) {}

  /**
   * Gathers `message` for this turn's batch. A value that is no message (or whose properties cannot
   * be read) is refused at once, alone, so that it cannot fail the others' batch; a message that
   * does not wait for the flush (`WAIT: 'false'`) goes alone, at once.
   */
  add(message: Message): Promise<PutMessageResult> {
    let alone: boolean
    try {
      checkMessageShape(message)
      alone = message.properties?.WAIT === 'false'
    } catch (error) {
      return Promise.reject(error)
    }
    if (alone) return this.putAlone(message)
    this.messages.push(message)
    opening = this
    const answer = new Promise<PutMessageResult>(adoptSettlers)
    opening = null
    if (!this.scheduled) {
      this.scheduled = true
      queueMicrotask(this.flush)
    }
    return answer
  }

  /** Puts what is gathered now, as one batch (nothing when nothing is). */
  readonly flush = (): void => {
    this.scheduled = false
    const count = this.messages.length
    if (count === 0) return
    const { messages, resolves, rejects } = this
    this.messages = []
    this.resolves = []
    this.rejects = []
    this.putBatch(messages).then(
      (results) => {
        for (let i = 0; i < count; i++) resolves[i](results[i])
      },
      (error: unknown) => {
        for (let i = 0; i < count; i++) rejects[i](error)
      },
    )
  }
}
