#include "mapping.h"

#include <sys/mman.h>

namespace mqnative {

Mapping::~Mapping() {
  std::lock_guard<std::mutex> lock(mu);
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

void Mapping::Close() {
  std::lock_guard<std::mutex> lock(mu);
  closing = true;
  if (inflight == 0) UnmapLocked();
}

void Mapping::UnmapLocked() {
  if (unmapped) return;
  unmapped = true;
  if (addr != nullptr && length > 0) munmap(addr, length);
  addr = nullptr;
}

}  // namespace mqnative
