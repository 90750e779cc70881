// A memory mapping of a file and the reference counts that decide when it may be unmapped.
//
// Ownership: a Mapping is shared (std::shared_ptr) by
//   - the JavaScript handle object (MapHandle),
//   - the external ArrayBuffer over the mapped bytes (released by its finalizer),
//   - every piece of async work queued on the libuv pool (msync, warm-up).
// The memory is unmapped exactly once: by an explicit close() once no async work is in flight, by
// the last async work to finish after such a close, by the environment cleanup hook, or when the
// last owner lets go. Explicit close detaches the ArrayBuffer first, so no JavaScript view can
// reach the memory after munmap. When the ArrayBuffer was already detached by someone else
// (ArrayBuffer.prototype.transfer, a transfer list), another ArrayBuffer may own the same memory
// and cannot be detached from here: close then replaces the range with anonymous memory, so that
// buffer reads zeros and its writes reach no file, and the munmap waits for the last owner.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>

namespace mqnative {

struct Mapping {
  void* addr = nullptr;
  size_t length = 0;
  bool writable = false;
  size_t exposed_first = 0;  // the first buffer's length (0: the whole mapping)

  std::mutex mu;
  bool closing = false;   // close() was called: no new work may start
  bool unmapped = false;  // munmap has run
  bool aliased = false;   // an ArrayBuffer we cannot detach may still point at the range
  bool replaced = false;  // the range is anonymous memory now
  int inflight = 0;       // async work queued or running

  ~Mapping();

  // Starts a piece of async work; false when the mapping is closing.
  bool BeginWork();
  // Ends a piece of async work; unmaps when a close is waiting for it.
  void EndWork();
  // Marks the mapping closing and unmaps it now, or leaves that to the last in-flight work.
  // With `aliased`, the range is replaced by anonymous memory instead and unmapped by ~Mapping.
  void Close(bool aliased = false);

 private:
  void UnmapLocked();
};

}  // namespace mqnative
