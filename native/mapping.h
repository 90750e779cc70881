// A memory mapping of a file and the reference counts that decide when it may be unmapped.
//
// Ownership: a Mapping is shared (std::shared_ptr) by
//   - the JavaScript handle object (MapHandle),
//   - the external ArrayBuffer over the mapped bytes (released by its finalizer),
//   - every piece of async work queued on the libuv pool (msync, warm-up).
// The memory is unmapped exactly once: by an explicit close() once no async work is in flight, by
// the last async work to finish after such a close, by the environment cleanup hook, or when the
// last owner lets go. Explicit close detaches the ArrayBuffer first, so no JavaScript view can
// reach the memory after munmap.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>

namespace mqnative {

struct Mapping {
  void* addr = nullptr;
  size_t length = 0;
  bool writable = false;

  std::mutex mu;
  bool closing = false;   // close() was called: no new work may start
  bool unmapped = false;  // munmap has run
  int inflight = 0;       // async work queued or running

  ~Mapping();

  // Starts a piece of async work; false when the mapping is closing.
  bool BeginWork();
  // Ends a piece of async work; unmaps when a close is waiting for it.
  void EndWork();
  // Marks the mapping closing and unmaps it now, or leaves that to the last in-flight work.
  void Close();

 private:
  void UnmapLocked();
};

}  // namespace mqnative
