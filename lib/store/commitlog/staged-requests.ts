// SYNC_FLUSH's staged records wait in the write stage (mapped/write-stage.ts) until a group commit
// writes them into the file; their dispatch requests, made by the put from what it knew, wait here
// with them and are dispatched after that write. The request objects are then filled in again for
// the next records staged: one object per record in flight, not one per put.
import type { DispatchRequest } from './dispatch-request.js'

/** Request objects kept for reuse at most (a group commit holds about one per waiting producer). */
const MAX_SPARE_REQUESTS = 1024

export class StagedRequests {
  /** Requests of the staged records in log order, with the blank each append wrote before its record (or -1). */
  private requests: DispatchRequest[] = []
  private blanks: number[] = []
  /** The two arrays take() handed over last, emptied, for the next records staged. */
  private idleRequests: DispatchRequest[] | null = null
  private idleBlanks: number[] | null = null
  /** Requests take() has seen dispatched. */
  private readonly spare: DispatchRequest[] = []

  /** Keeps a staged record's dispatch request until take(), after its commit. */
  add(request: DispatchRequest, blankOffset: number): void {
    this.requests.push(request)
    this.blanks.push(blankOffset)
  }

  /** Forgets the requests kept (their records were cut or go through the dispatcher's pass). */
  drop(): void {
    this.requests = []
    this.blanks = []
  }

  /**
   * Hands over the requests kept so far (with their blanks). `handle` must keep nothing of them
   * once it returns (dispatch does not): they are filled in again for the next records staged.
   */
  take(handle: (requests: DispatchRequest[], blanks: number[]) => void): void {
    const requests = this.requests
    const blanks = this.blanks
    if (requests.length === 0) return
    this.requests = this.idleRequests ?? []
    this.blanks = this.idleBlanks ?? []
    this.idleRequests = null
    this.idleBlanks = null
    handle(requests, blanks)
    const spare = this.spare
    for (let i = 0; i < requests.length && spare.length < MAX_SPARE_REQUESTS; i++) {
      const request = requests[i]
      // The message's strings are not kept alive while the object waits.
      request.keys = undefined
      request.uniqKey = undefined
      spare.push(request)
    }
    requests.length = 0
    blanks.length = 0
    this.idleRequests = requests
    this.idleBlanks = blanks
  }

  /** A request object dispatch is done with, to fill in for a record to stage; null when there is none. */
  spareRequest(): DispatchRequest | null {
    return this.spare.pop() ?? null
  }
}
