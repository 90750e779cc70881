// Write buffers for the commit log (transientStorePoolEnable): appends land in an off-mapping
// buffer and are committed to the file with positional writes, so the writer never takes a page
// fault on the mapping. Readers only ever see committed bytes (through the mapping).
//
// RocketMQ mlocks each buffer; JavaScript heap memory cannot be locked, so these buffers are plain
// allocations that the pool keeps for the life of the store.
import { Buffer } from 'node:buffer'

export class TransientStorePool {
  readonly poolSize: number
  readonly fileSize: number
  private readonly available: Buffer[] = []
  private destroyed = false

  constructor(poolSize: number, fileSize: number) {
    if (!Number.isInteger(poolSize) || poolSize < 1) throw new RangeError('transientStorePoolSize must be >= 1')
    this.poolSize = poolSize
    this.fileSize = fileSize
    for (let i = 0; i < poolSize; i++) this.available.push(Buffer.allocUnsafeSlow(fileSize))
  }

  /** A buffer for a new file, or null when all are lent out (the file then works without one). */
  borrowBuffer(): Buffer | null {
    if (this.destroyed) return null
    return this.available.shift() ?? null
  }

  returnBuffer(buffer: Buffer): void {
    if (this.destroyed || buffer.length !== this.fileSize) return
    if (this.available.length < this.poolSize) this.available.push(buffer)
  }

  availableBufferNums(): number {
    return this.available.length
  }

  destroy(): void {
    this.destroyed = true
    this.available.length = 0
  }
}
