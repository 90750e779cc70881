#include "mapping.h"

#include <sys/mman.h>

namespace mqnative {

Mapping::~Mapping() {
  std::lock_guard<std::mutex> lock(mu);
  // The last owner is gone: no buffer can point here any more.
  aliased = false;
  UnmapLocked();
}

bool Mapping::BeginWork() {
  std::lock_guard<std::mutex> lock(mu);
  if (closing || unmapped) return false;
  inflight += 1;
  return true;
}

void Mapping::EndWork() {
  std::lock_guard<std::mutex> lock(mu);
  inflight -= 1;
  if (closing && inflight == 0) UnmapLocked();
}

void Mapping::Close(bool alias) {
  std::lock_guard<std::mutex> lock(mu);
  closing = true;
  if (alias) aliased = true;
  if (inflight == 0) UnmapLocked();
}

void Mapping::UnmapLocked() {
  if (unmapped) return;
  if (aliased) {
    // MAP_FIXED swaps the pages in one step: no instant where the range is unmapped. If it fails
    // (out of memory), the file mapping stays until the last owner lets go, which is still safe.
    if (!replaced && addr != nullptr && length > 0) {
      void* anon = mmap(addr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      replaced = anon != MAP_FAILED;
    }
    return;
  }
  unmapped = true;
  if (addr != nullptr && length > 0) munmap(addr, length);
  addr = nullptr;
}

}  // namespace mqnative
