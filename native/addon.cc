// mqstore's native layer: handles and system calls, no policy.
//
// JavaScript sees one MapHandle per mapped file. Its `buffer` is the only ArrayBuffer over the
// mapped bytes; JavaScript slices Buffer views out of it. Everything the store decides (what to
// map, when to flush, when to close) is decided in TypeScript; this file only performs the calls
// and keeps the memory valid for as long as any JavaScript view can reach it.

#include <napi.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "errno-name.h"
#include "copy-crc.h"
#include "crc.h"
#include "mapping.h"

namespace mqnative {

namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// An Error shaped like Node's own system errors: message "CODE: description, syscall",
// with `code`, `errno` (negative, as libuv reports it) and `syscall`.
Napi::Error ErrnoError(Napi::Env env, int err, const char* syscall, const char* detail = nullptr) {
  std::string message = std::string(ErrnoName(err)) + ": " + strerror(err) + ", " + syscall;
  if (detail != nullptr) message += std::string(" (") + detail + ")";
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, ErrnoName(err)));
  error.Set("errno", Napi::Number::New(env, -err));
  error.Set("syscall", Napi::String::New(env, syscall));
  return error;
}

// Reads a non-negative integer argument that must be exact in a double.
bool ReadSize(const Napi::CallbackInfo& info, size_t index, const char* name, uint64_t* out) {
  Napi::Env env = info.Env();
  if (info.Length() <= index || !info[index].IsNumber()) {
    Napi::TypeError::New(env, std::string(name) + " must be a number").ThrowAsJavaScriptException();
    return false;
  }
  double value = info[index].As<Napi::Number>().DoubleValue();
  if (!(value >= 0) || value > 9007199254740991.0 || value != static_cast<double>(static_cast<uint64_t>(value))) {
    Napi::RangeError::New(env, std::string(name) + " must be a non-negative safe integer")
        .ThrowAsJavaScriptException();
    return false;
  }
  *out = static_cast<uint64_t>(value);
  return true;
}

bool ReadFd(const Napi::CallbackInfo& info, int* fd) {
  uint64_t value = 0;
  if (!ReadSize(info, 0, "fd", &value)) return false;
  if (value > 0x7fffffff) {
    Napi::RangeError::New(info.Env(), "fd out of range").ThrowAsJavaScriptException();
    return false;
  }
  *fd = static_cast<int>(value);
  return true;
}

}  // namespace

struct AddonData {
  Napi::FunctionReference map_handle_ctor;
  std::mutex mu;
  std::vector<std::weak_ptr<Mapping>> live;

  void Track(const std::shared_ptr<Mapping>& mapping) {
    std::lock_guard<std::mutex> lock(mu);
    // Drop forgotten entries whenever the list doubles, so it stays proportional to live maps.
    if (live.size() >= 64 && (live.size() & (live.size() - 1)) == 0) {
      std::vector<std::weak_ptr<Mapping>> kept;
      for (auto& weak : live) {
        if (!weak.expired()) kept.push_back(weak);
      }
      live.swap(kept);
    }
    live.push_back(mapping);
  }

  // Environment teardown (process or worker exit): no JavaScript runs any more, so unmapping
  // cannot strand a view. Work still in flight unmaps when it ends.
  void CloseAll() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& weak : live) {
      if (auto mapping = weak.lock()) mapping->Close();
    }
    live.clear();
  }
};

#if defined(__linux__)
// Linux 5.14 added these; glibc headers older than 2.35 (the release containers) lack them.
// Values from the kernel's uapi mman-common.h.
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#endif

namespace {

// Reads one byte a page of [start, start + length).
void TouchPages(const char* start, size_t length) {
  const size_t page = PageSize();
  volatile char sink = 0;
  for (size_t at = 0; at < length; at += page) sink ^= start[at];
  (void)sink;
}

// Faults the pages of [start, start + length) of a mapping in (for writing when `writable`);
// returns 0 or the errno that stopped it. For the libuv pool: it may wait for the disk.
//
// A populate faults each page in through the file's read path, which reads around the page as
// the mapping's advice says: by default up to the device's read-ahead (8 MiB on some disks), in
// large batches. For a file that will be written through (a commit log) that is cheaper than
// page by page; for a new file that is mostly holes it is megabytes of zeros past the range. With
// `whole` (the mapping [base, base + size) of a file just made), the populate runs under
// random-access advice on the whole mapping (a part would split it in several), which then gets
// its normal advice back.
int WarmPages(char* start, size_t length, bool writable, char* base = nullptr, size_t whole = 0) {
#if defined(__linux__)
  int advice = writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
  const bool exact = base != nullptr && madvise(base, whole, MADV_RANDOM) == 0;
  int rc;
  do {
    rc = madvise(start, length, advice);
  } while (rc != 0 && errno == EINTR);
  const int populate_errno = errno;
  if (exact) madvise(base, whole, MADV_NORMAL);
  errno = populate_errno;
  if (rc == 0) {
    // Populating maps the pages but, in virtual machines, the first access to each page from any
    // CPU can still trap to the hypervisor (about 1.5 us a page measured), which would then land
    // on the writer. Reading one byte per page here takes that trap on this pool thread. A read
    // cannot race the writer: it changes nothing.
    TouchPages(start, length);
    return 0;
  }
  // Only EINVAL (a kernel before 5.14) means "touch instead". EFAULT or EHWPOISON mean a page
  // cannot be faulted in (beyond the end of the file, memory failure): touching it would raise
  // SIGBUS on this pool thread and kill the process.
  if (errno != EINVAL) return errno;
#elif defined(MADV_WILLNEED)
  (void)base;
  (void)whole;
  (void)writable;
  madvise(start, length, MADV_WILLNEED);
#else
  (void)base;
  (void)whole;
  (void)writable;
#endif
  TouchPages(start, length);
  return 0;
}

}  // namespace

class MapHandle;

// Async work on the libuv pool that holds an in-flight count on the mapping from the moment it is
// created until it has run, was cancelled, or could not be queued: whichever way it ends, the count
// is dropped exactly once, so a closed mapping is always unmapped in the end.
class MappingWork : public Napi::AsyncWorker {
 public:
  // kDrop: madvise(MADV_DONTNEED) of the range, then (with a descriptor) the start of its
  // write-back. kEvict: the range written back and waited for, unmapped, and its clean pages
  // dropped from the page cache (with a descriptor; Linux). Warm-ups, drops and evictions are
  // hints, cancelled by close; a sync is not.
  enum class Kind { kSync, kWarm, kDrop, kEvict };

  // The caller has taken the in-flight count (Mapping::BeginWork); from the end of this
  // constructor the work owns it, and `fd` (a duplicate, or -1) too.
  MappingWork(Napi::Env env, std::shared_ptr<Mapping> mapping, Kind kind, size_t offset, size_t length, int fd = -1)
      : Napi::AsyncWorker(env),
        mapping_(std::move(mapping)),
        kind_(kind),
        offset_(offset),
        length_(length),
        fd_(fd),
        deferred_(Napi::Promise::Deferred::New(env)) {}

  // Runs on the JS thread after completion, after a cancel, or when Queue() threw.
  ~MappingWork() override {
    EndWorkOnce();
    if (fd_ >= 0) close(fd_);
  }

  Napi::Promise Promise() { return deferred_.Promise(); }
  Kind kind() const { return kind_; }
  bool hint() const { return kind_ != Kind::kSync; }

  void SetOwner(MapHandle* owner) { owner_ = owner; }
  // kSync: once the msync has succeeded, write `bytes` at `position` of the work's descriptor.
  void SetWriteAfter(std::vector<uint8_t> bytes, uint64_t position) {
    after_ = std::move(bytes);
    after_at_ = position;
  }
  // The handle was finalized before this work completed.
  void Orphan() { owner_ = nullptr; }

  // Cancels the work if the pool has not started it; the in-flight count drops at once.
  bool TryCancel(napi_env env) {
    if (napi_cancel_async_work(env, *this) != napi_ok) return false;
    EndWorkOnce();
    return true;
  }

  void OnWorkComplete(Napi::Env env, napi_status status) override;

 protected:
  void Execute() override {
    char* base = static_cast<char*>(mapping_->addr);
    if (length_ > 0) {
      if (kind_ == Kind::kSync) {
        if (msync(base + offset_, length_, MS_SYNC) != 0) {
          err_ = errno;
          syscall_ = "msync";
        } else if (fd_ >= 0) {
          WriteAfter();
        }
      } else if (kind_ == Kind::kDrop) {
        Drop(base + offset_);
      } else if (kind_ == Kind::kEvict) {
        Evict(base + offset_);
      } else {
        err_ = WarmPages(base + offset_, length_, mapping_->writable);
        if (err_ != 0) syscall_ = "madvise";
      }
    }
    if (kind_ == Kind::kSync && fd_ >= 0) {
      close(fd_);
      fd_ = -1;
    }
    EndWorkOnce();
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_ != 0) {
      deferred_.Reject(ErrnoError(env, err_, syscall_).Value());
    } else {
      deferred_.Resolve(env.Undefined());
    }
  }

  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

 private:
  // Execute() on the pool thread, or the JS thread once the pool can no longer run this work: the
  // two never race (a successful cancel means Execute will not run; completion is ordered after it).
  void EndWorkOnce() {
    if (ended_) return;
    ended_ = true;
    mapping_->EndWork();
  }

  // A hint both ways: mlocked pages refuse the drop (EINVAL) and the write-back goes ahead; a
  // write-back that cannot start changes nothing, and the next sync reports real errors.
  void Drop(char* start) {
#if defined(__linux__)
    madvise(start, length_, MADV_DONTNEED);
    if (fd_ >= 0) {
      int rc;
      do {
        rc = sync_file_range(fd_, static_cast<off_t>(offset_), static_cast<off_t>(length_), SYNC_FILE_RANGE_WRITE);
      } while (rc != 0 && errno == EINTR);
      // Closed here, not by the destructor: after a burst that never yields, completions wait for
      // the event loop, and a close each would then land on the JS thread all at once.
      close(fd_);
      fd_ = -1;
    }
#else
    (void)start;
#endif
  }

  // A hint: a page the writer dirties meanwhile, or one still mapped, stays in the page cache (the
  // kernel drops only clean, unmapped pages), so nothing written is lost, only not dropped.
  void Evict(char* start) {
#if defined(__linux__)
    if (fd_ < 0) return;
    const off_t at = static_cast<off_t>(offset_), length = static_cast<off_t>(length_);
    int rc;
    do {
      rc = sync_file_range(fd_, at, length, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    } while (rc != 0 && errno == EINTR);
    madvise(start, length_, MADV_DONTNEED);
    posix_fadvise(fd_, at, length, POSIX_FADV_DONTNEED);
    close(fd_);
    fd_ = -1;
#else
    (void)start;
#endif
  }

  // The write that follows a sync (see SetWriteAfter): all of it, or the errno that stopped it.
  void WriteAfter() {
    size_t done = 0;
    while (done < after_.size()) {
      ssize_t n = pwrite(fd_, after_.data() + done, after_.size() - done, static_cast<off_t>(after_at_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        err_ = n < 0 ? errno : EIO;
        syscall_ = "pwrite";
        return;
      }
      done += static_cast<size_t>(n);
    }
  }

  std::shared_ptr<Mapping> mapping_;
  Kind kind_;
  size_t offset_;
  size_t length_;
  int fd_;
  std::vector<uint8_t> after_;
  uint64_t after_at_ = 0;
  int err_ = 0;
  const char* syscall_ = "";
  bool ended_ = false;
  MapHandle* owner_ = nullptr;
  Napi::Promise::Deferred deferred_;
};

class MapHandle : public Napi::ObjectWrap<MapHandle> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "MapHandle",
                       {
                           InstanceAccessor<&MapHandle::GetBuffer>("buffer"),
                           InstanceAccessor<&MapHandle::GetLength>("length"),
                           InstanceAccessor<&MapHandle::GetClosed>("closed"),
                           InstanceAccessor<&MapHandle::GetWritable>("writable"),
                           InstanceMethod<&MapHandle::Sync>("sync"),
                           InstanceMethod<&MapHandle::SyncAsync>("syncAsync"),
                           InstanceMethod<&MapHandle::WarmAsync>("warmAsync"),
                           InstanceMethod<&MapHandle::DropAsync>("dropAsync"),
                           InstanceMethod<&MapHandle::EvictAsync>("evictAsync"),
                           InstanceMethod<&MapHandle::Advise>("advise"),
                           InstanceMethod<&MapHandle::Lock>("lock"),
                           InstanceMethod<&MapHandle::Unlock>("unlock"),
                           InstanceMethod<&MapHandle::Close>("close"),
                           InstanceMethod<&MapHandle::Expose>("expose"),
                       });
  }

  explicit MapHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<MapHandle>(info) {
    // Only map() constructs handles; it passes the mapping through an External.
    if (info.Length() != 1 || !info[0].IsExternal()) {
      Napi::TypeError::New(info.Env(), "MapHandle is created by map()").ThrowAsJavaScriptException();
      return;
    }
    auto* source = info[0].As<Napi::External<std::shared_ptr<Mapping>>>().Data();
    mapping_ = *source;
    // The buffer covers [0, exposed): NewMapHandle sets it (the whole mapping unless told less).
    size_t exposed = mapping_->length;
    if (mapping_->exposed_first > 0 && mapping_->exposed_first < exposed) exposed = mapping_->exposed_first;
    buffer_ = Napi::Persistent(NewBuffer(info.Env(), exposed));
    exposed_ = exposed;
  }

  ~MapHandle() override {
    for (MappingWork* work : queued_) work->Orphan();
  }

  void Forget(MappingWork* work) {
    for (size_t i = 0; i < queued_.size(); i++) {
      if (queued_[i] == work) {
        queued_[i] = queued_.back();
        queued_.pop_back();
        return;
      }
    }
  }

 private:
  bool CheckOpen(Napi::Env env) {
    if (closed_) {
      Napi::Error error = Napi::Error::New(env, "the mapping is closed");
      error.Set("code", Napi::String::New(env, "ERR_MAPPING_CLOSED"));
      error.ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  // Reads (offset, length) at args 0 and 1, checks them against the mapping, and widens the start
  // down to a page boundary, as msync, madvise and mlock require.
  bool ReadRange(const Napi::CallbackInfo& info, size_t* start, size_t* length) {
    uint64_t offset = 0;
    uint64_t size = 0;
    if (!ReadSize(info, 0, "offset", &offset) || !ReadSize(info, 1, "length", &size)) return false;
    if (offset > mapping_->length || size > mapping_->length - offset) {
      Napi::RangeError::New(info.Env(), "range is outside the mapping").ThrowAsJavaScriptException();
      return false;
    }
    const size_t page = PageSize();
    size_t aligned = static_cast<size_t>(offset) & ~(page - 1);
    *start = aligned;
    *length = static_cast<size_t>(offset + size) - aligned;
    if (size == 0) *length = 0;
    return true;
  }

  // An ArrayBuffer over [0, length) of the mapping; it keeps the Mapping record alive, not the pages.
  Napi::ArrayBuffer NewBuffer(Napi::Env env, size_t length) {
    auto* hint = new std::shared_ptr<Mapping>(mapping_);
    return Napi::ArrayBuffer::New(
        env, mapping_->addr, length, [](Napi::Env, void*, std::shared_ptr<Mapping>* owner) { delete owner; }, hint);
  }

  // expose(length): the buffer over at least [0, length) of the mapping. V8 counts every
  // ArrayBuffer's length as memory it should collect for, so a big file whose writer uses a small
  // prefix is exposed in steps; the earlier buffers stay valid, and close detaches them all.
  Napi::Value Expose(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint64_t wanted = 0;
    if (!CheckOpen(env) || !ReadSize(info, 0, "length", &wanted)) return env.Undefined();
    if (wanted > mapping_->length) {
      Napi::RangeError::New(env, "length is outside the mapping").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    if (wanted <= exposed_) return buffer_.Value();
    const size_t page = PageSize();
    size_t length = (static_cast<size_t>(wanted) + page - 1) & ~(page - 1);
    if (length > mapping_->length) length = mapping_->length;
    Napi::ArrayBuffer buffer = NewBuffer(env, length);
    older_.push_back(std::move(buffer_));
    buffer_ = Napi::Persistent(buffer);
    exposed_ = length;
    return buffer;
  }

  Napi::Value GetBuffer(const Napi::CallbackInfo& info) {
    if (closed_) return Napi::ArrayBuffer::New(info.Env(), 0);
    return buffer_.Value();
  }
  Napi::Value GetLength(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(mapping_ ? mapping_->length : 0));
  }
  Napi::Value GetClosed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), closed_); }
  Napi::Value GetWritable(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), mapping_ && mapping_->writable);
  }

  Napi::Value Sync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    size_t start = 0, length = 0;
    if (!CheckOpen(env) || !ReadRange(info, &start, &length)) return env.Undefined();
    if (length > 0 && msync(static_cast<char*>(mapping_->addr) + start, length, MS_SYNC) != 0) {
      ErrnoError(env, errno, "msync").ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  Napi::Value StartWork(const Napi::CallbackInfo& info, MappingWork::Kind kind) {
    Napi::Env env = info.Env();
    size_t start = 0, length = 0;
    if (!CheckOpen(env) || !ReadRange(info, &start, &length)) return env.Undefined();
    int fd = -1;
    std::vector<uint8_t> after;
    uint64_t after_at = 0;
    if (kind == MappingWork::Kind::kSync && info.Length() > 2 && !info[2].IsUndefined()) {
      // syncAsync(offset, length, fd, bytes, position): the write that follows a successful sync.
      if (info.Length() < 5 || !info[3].IsTypedArray() || info[3].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
        Napi::TypeError::New(env, "bytes must be a Uint8Array").ThrowAsJavaScriptException();
        return env.Undefined();
      }
      if (!ReadSize(info, 4, "position", &after_at)) return env.Undefined();
      Napi::Uint8Array bytes = info[3].As<Napi::Uint8Array>();
      // Copied now: the caller may reuse its array before the pool runs the work.
      after.assign(bytes.Data(), bytes.Data() + bytes.ElementLength());
    }
    if (kind != MappingWork::Kind::kWarm && info.Length() > 2 && !info[2].IsUndefined()) {
      uint64_t given = 0;
      if (!ReadSize(info, 2, "fd", &given)) return env.Undefined();
      if (given > 0x7fffffff) {
        Napi::RangeError::New(env, "fd out of range").ThrowAsJavaScriptException();
        return env.Undefined();
      }
      // The work's own descriptor: the caller may close its one before the pool runs the work. A
      // drop or an eviction uses it only on Linux; a sync's write after it, everywhere.
#if !defined(__linux__)
      if (kind == MappingWork::Kind::kSync)
#endif
      {
        fd = fcntl(static_cast<int>(given), F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
          ErrnoError(env, errno, "fcntl", "F_DUPFD_CLOEXEC").ThrowAsJavaScriptException();
          return env.Undefined();
        }
      }
    }
    if (!mapping_->BeginWork()) {
      if (fd >= 0) close(fd);
      CheckOpen(env);
      return env.Undefined();
    }
    MappingWork* work = nullptr;
    try {
      work = new MappingWork(env, mapping_, kind, start, length, fd);
      work->SetWriteAfter(std::move(after), after_at);
    } catch (...) {
      mapping_->EndWork();
      if (fd >= 0) close(fd);
      throw;
    }
    Napi::Promise promise = work->Promise();
    try {
      work->Queue();
    } catch (...) {
      delete work;  // its destructor drops the in-flight count
      throw;
    }
    work->SetOwner(this);
    queued_.push_back(work);
    return promise;
  }

  Napi::Value SyncAsync(const Napi::CallbackInfo& info) { return StartWork(info, MappingWork::Kind::kSync); }
  Napi::Value WarmAsync(const Napi::CallbackInfo& info) { return StartWork(info, MappingWork::Kind::kWarm); }
  Napi::Value DropAsync(const Napi::CallbackInfo& info) { return StartWork(info, MappingWork::Kind::kDrop); }
  Napi::Value EvictAsync(const Napi::CallbackInfo& info) { return StartWork(info, MappingWork::Kind::kEvict); }

  Napi::Value Advise(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    size_t start = 0, length = 0;
    if (!CheckOpen(env) || !ReadRange(info, &start, &length)) return env.Undefined();
    if (info.Length() < 3 || !info[2].IsString()) {
      Napi::TypeError::New(env, "advice must be a string").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    std::string name = info[2].As<Napi::String>().Utf8Value();
    int advice;
    if (name == "normal") advice = MADV_NORMAL;
    else if (name == "random") advice = MADV_RANDOM;
    else if (name == "sequential") advice = MADV_SEQUENTIAL;
    else if (name == "willneed") advice = MADV_WILLNEED;
    else if (name == "dontneed") advice = MADV_DONTNEED;
    else if (name == "hugepage" || name == "nohugepage") {
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
      advice = name == "hugepage" ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
#else
      return env.Undefined();  // No transparent huge pages here (macOS): nothing to advise.
#endif
    } else {
      Napi::RangeError::New(env, "unknown advice: " + name).ThrowAsJavaScriptException();
      return env.Undefined();
    }
    if (length > 0 && madvise(static_cast<char*>(mapping_->addr) + start, length, advice) != 0) {
      ErrnoError(env, errno, "madvise").ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  Napi::Value Lock(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    size_t start = 0, length = 0;
    if (!CheckOpen(env) || !ReadRange(info, &start, &length)) return env.Undefined();
    if (length > 0 && mlock(static_cast<char*>(mapping_->addr) + start, length) != 0) {
      ErrnoError(env, errno, "mlock").ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  Napi::Value Unlock(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    size_t start = 0, length = 0;
    if (!CheckOpen(env) || !ReadRange(info, &start, &length)) return env.Undefined();
    if (length > 0 && munlock(static_cast<char*>(mapping_->addr) + start, length) != 0) {
      ErrnoError(env, errno, "munlock").ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  // Idempotent. Detaches the ArrayBuffer (every view becomes empty), then unmaps, or leaves the
  // unmap to the last in-flight async work.
  Napi::Value Close(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (closed_) return env.Undefined();
    closed_ = true;
    bool aliased = false;
    older_.push_back(std::move(buffer_));
    for (Napi::Reference<Napi::ArrayBuffer>& held : older_) {
      if (held.IsEmpty()) continue;
      Napi::ArrayBuffer buffer = held.Value();
      // Detached before close: transferred, so another ArrayBuffer may own the memory now.
      if (buffer.IsDetached()) aliased = true;
      else buffer.Detach();
      held.Reset();
    }
    older_.clear();
    // A warm-up or drop the pool has not started would hold the mapping until a pool thread frees
    // up (behind slow disk I/O, possibly long): cancel it, so the unmap below can happen now. A
    // requested sync still runs: close never drops a flush someone asked for.
    for (MappingWork* work : queued_) {
      if (work->hint()) work->TryCancel(env);
    }
    mapping_->Close(aliased);
    return env.Undefined();
  }

  std::shared_ptr<Mapping> mapping_;
  // The widest buffer given out, over [0, exposed_); older_: the narrower ones before it.
  Napi::Reference<Napi::ArrayBuffer> buffer_;
  size_t exposed_ = 0;
  std::vector<Napi::Reference<Napi::ArrayBuffer>> older_;
  bool closed_ = false;
  // Work queued by this handle that has not completed (JS thread only).
  std::vector<MappingWork*> queued_;
};

void MappingWork::OnWorkComplete(Napi::Env env, napi_status status) {
  if (owner_ != nullptr) owner_->Forget(this);
  // Work that completes while its environment is torn down (a worker or the process exiting)
  // cannot settle its promise: the Node-API calls fail and node-addon-api throws, which would
  // reach std::terminate from this C callback. Nobody can await the promise any more: drop it.
  try {
    if (status == napi_cancelled) {
      EndWorkOnce();
      Napi::HandleScope scope(env);
      Napi::Error error = Napi::Error::New(env, "the mapping was closed before the work ran");
      error.Set("code", Napi::String::New(env, "ERR_MAPPING_CLOSED"));
      deferred_.Reject(error.Value());
    }
    // Settles the promise unless cancelled, then deletes this.
    Napi::AsyncWorker::OnWorkComplete(env, status);
  } catch (const Napi::Error&) {
    EndWorkOnce();
  }
}

namespace {

// The optional `expose` argument at `index` of a mapping `length` bytes long: (0, length], rounded
// up to a page; `out` keeps its value when the argument is absent.
bool ReadExpose(const Napi::CallbackInfo& info, size_t index, uint64_t length, uint64_t* out) {
  if (info.Length() <= index || info[index].IsUndefined()) return true;
  uint64_t expose = 0;
  if (!ReadSize(info, index, "expose", &expose)) return false;
  if (expose == 0 || expose > length) {
    Napi::RangeError::New(info.Env(), "expose must be positive and at most the length").ThrowAsJavaScriptException();
    return false;
  }
  const uint64_t page = PageSize();
  expose = (expose + page - 1) / page * page;
  *out = expose < length ? expose : length;
  return true;
}

// The MapHandle that owns the mapping [addr, addr + length) from now on (it unmaps it, also when
// making the handle throws).
Napi::Value NewMapHandle(Napi::Env env, void* addr, size_t length, bool writable, size_t exposed = 0) {
  std::shared_ptr<Mapping> mapping(new Mapping());
  mapping->addr = addr;
  mapping->length = length;
  mapping->writable = writable;
  mapping->exposed_first = exposed;

  AddonData* data = env.GetInstanceData<AddonData>();
  data->Track(mapping);
  Napi::External<std::shared_ptr<Mapping>> external = Napi::External<std::shared_ptr<Mapping>>::New(env, &mapping);
  return data->map_handle_ctor.New({external});
}

// map(fd, length, writable[, expose]): MAP_SHARED over [0, length) of fd. A read-only map is
// MAP_PRIVATE with write permission, so a stray JavaScript write changes a private copy instead of
// faulting; it never reaches the file. The handle's buffer covers [0, expose) rounded up to a
// page (the whole mapping by default; MapHandle.expose widens it).
Napi::Value Map(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = -1;
  uint64_t length = 0;
  if (!ReadFd(info, &fd) || !ReadSize(info, 1, "length", &length)) return env.Undefined();
  if (info.Length() < 3 || !info[2].IsBoolean()) {
    Napi::TypeError::New(env, "writable must be a boolean").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  bool writable = info[2].As<Napi::Boolean>().Value();
  if (length == 0) {
    Napi::RangeError::New(env, "length must be positive").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  uint64_t expose = length;
  if (!ReadExpose(info, 3, length, &expose)) return env.Undefined();
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ErrnoError(env, errno, "fstat").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  // Mapping past the end of the file would turn a later access into SIGBUS.
  if (static_cast<uint64_t>(st.st_size) < length) {
    ErrnoError(env, EINVAL, "mmap", "file is shorter than the requested mapping").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int flags = writable ? MAP_SHARED : MAP_PRIVATE;
  void* addr = mmap(nullptr, static_cast<size_t>(length), PROT_READ | PROT_WRITE, flags, fd, 0);
  if (addr == MAP_FAILED) {
    ErrnoError(env, errno, "mmap").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return NewMapHandle(env, addr, static_cast<size_t>(length), writable, static_cast<size_t>(expose));
}

#if defined(__APPLE__)
// Writes zeros into every hole of [from, to) of fd (SEEK_HOLE / SEEK_DATA); returns 0 or an errno.
// Where the file system cannot report holes (EINVAL), every block is treated as data.
int FillHoles(int fd, off_t from, off_t to) {
  static const char zeros[65536] = {0};
  off_t pos = from;
  while (pos < to) {
    off_t hole = lseek(fd, pos, SEEK_HOLE);
    if (hole < 0) return errno == EINVAL || errno == ENXIO ? 0 : errno;
    if (hole >= to) return 0;
    off_t data = lseek(fd, hole, SEEK_DATA);
    if (data < 0) {
      if (errno != ENXIO) return errno;
      data = to;  // a hole up to the end of the file
    }
    if (data > to) data = to;
    for (off_t at = hole; at < data;) {
      size_t chunk = static_cast<size_t>(data - at < static_cast<off_t>(sizeof zeros) ? data - at : sizeof zeros);
      ssize_t wrote = pwrite(fd, zeros, chunk, at);
      if (wrote < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      at += wrote;
    }
    pos = data;
  }
  return 0;
}
#endif

// Reserves disk blocks for [offset, offset + length) of fd so a later page fault cannot hit a full
// disk; returns 0 or the errno, with the failing call in *syscall. Safe on a file that already holds
// data: only unreserved space (holes, or past the end) changes. Runs on any thread.
int AllocateRange(int fd, uint64_t offset, uint64_t length, const char** syscall) {
  if (length == 0) return 0;
#if defined(__APPLE__)
  const off_t end = static_cast<off_t>(offset + length);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *syscall = "fstat";
    return errno;
  }
  // F_PREALLOCATE only reserves space past the file's physical end; it cannot fill the holes of a
  // sparse file (a copy, a restore). Those are filled with written zeros; data is never touched.
  const off_t existing = st.st_size < end ? st.st_size : end;
  int err = FillHoles(fd, static_cast<off_t>(offset), existing);
  if (err != 0) {
    *syscall = "pwrite";
    return err;
  }
  if (st.st_size < end) {
    // fst_length counts from the physical end: reserve what the file does not have yet.
    const off_t physical = static_cast<off_t>(st.st_blocks) * 512;
    if (physical < end) {
      fstore_t store = {F_ALLOCATECONTIG | F_ALLOCATEALL, F_PEOFPOSMODE, 0, end - physical, 0};
      if (fcntl(fd, F_PREALLOCATE, &store) == -1) {
        store.fst_flags = F_ALLOCATEALL;
        if (fcntl(fd, F_PREALLOCATE, &store) == -1) {
          *syscall = "fcntl(F_PREALLOCATE)";
          return errno;
        }
      }
    }
    if (ftruncate(fd, end) != 0) {
      *syscall = "ftruncate";
      return errno;
    }
  }
  return 0;
#else
  *syscall = "posix_fallocate";
  return posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(length));
#endif
}

// allocate(fd, offset, length): AllocateRange on the calling thread; throws its errno.
Napi::Value Allocate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = -1;
  uint64_t offset = 0, length = 0;
  if (!ReadFd(info, &fd) || !ReadSize(info, 1, "offset", &offset) || !ReadSize(info, 2, "length", &length)) {
    return env.Undefined();
  }
  const char* syscall = "";
  int err = AllocateRange(fd, offset, length, &syscall);
  if (err != 0) ErrnoError(env, err, syscall, strcmp(syscall, "pwrite") == 0 ? "filling a hole" : nullptr).ThrowAsJavaScriptException();
  return env.Undefined();
}

// A new file made, sized, reserved, mapped and faulted in on the libuv pool: the five to seven
// system calls of a new segment, each of which may wait for the file system's journal, as one
// piece of work. Whatever fails, the file is removed and nothing stays mapped or open.
class CreateMapWork : public Napi::AsyncWorker {
 public:
  CreateMapWork(Napi::Env env, std::string path, size_t size, size_t reserve, size_t warm, size_t expose, bool random)
      : Napi::AsyncWorker(env),
        path_(std::move(path)),
        size_(size),
        reserve_(reserve < size ? reserve : size),
        warm_(warm < size ? warm : size),
        expose_(expose),
        random_(random),
        deferred_(Napi::Promise::Deferred::New(env)) {}

  // A mapping never handed to a handle (the environment went away first) is unmapped here.
  ~CreateMapWork() override {
    if (addr_ != nullptr) munmap(addr_, size_);
  }

  Napi::Promise Promise() { return deferred_.Promise(); }

  // As MappingWork's: completing while the environment is torn down (a worker or the process
  // exiting), settling the promise throws, and nobody could await it any more. A mapping not
  // handed to a handle by then is unmapped by the destructor.
  void OnWorkComplete(Napi::Env env, napi_status status) override {
    try {
      Napi::AsyncWorker::OnWorkComplete(env, status);
    } catch (const Napi::Error&) {
    }
  }

 protected:
  void Execute() override {
    int fd;
    do {
      fd = open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      Fail(errno, "open");
      return;
    }
    int err = 0;
    // A file reserved in part gets its full length first; one reserved whole gets it from the
    // reservation (posix_fallocate extends it).
    if (reserve_ < size_ && ftruncate(fd, static_cast<off_t>(size_)) != 0) {
      err = errno;
      syscall_ = "ftruncate";
    }
    if (err == 0) err = AllocateRange(fd, 0, reserve_, &syscall_);
    if (err == 0) {
      void* addr = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (addr == MAP_FAILED) {
        err = errno;
        syscall_ = "mmap";
      } else {
        addr_ = addr;
        // Only the reserved prefix is faulted in: populating a hole would allocate its blocks
        // behind the reservation's back. A warm-up is a hint: its failure fails nothing.
        if (warm_ > 0) WarmPages(static_cast<char*>(addr), warm_ < reserve_ ? warm_ : reserve_, true, static_cast<char*>(addr), size_);
        // The mapping's own advice, given here rather than by the caller on the JS thread: madvise
        // changing a mapping's flags waits for the address space's lock, which the pool's
        // populates hold. A hint: refused, it changes nothing.
        if (random_) madvise(addr, size_, MADV_RANDOM);
      }
    }
    close(fd);
    if (err != 0) {
      unlink(path_.c_str());
      Fail(err, syscall_);
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_ != 0) {
      deferred_.Reject(ErrnoError(env, err_, syscall_).Value());
      return;
    }
    void* addr = addr_;
    addr_ = nullptr;  // the handle owns it from here, also if making it throws
    deferred_.Resolve(NewMapHandle(env, addr, size_, true, expose_));
  }

  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

 private:
  void Fail(int err, const char* syscall) {
    err_ = err;
    syscall_ = syscall;
  }

  std::string path_;
  size_t size_;
  size_t reserve_;
  size_t warm_;
  size_t expose_;
  bool random_;
  void* addr_ = nullptr;
  int err_ = 0;
  const char* syscall_ = "";
  Napi::Promise::Deferred deferred_;
};

// createMapped(path, size, reserve, warm[, expose[, advice]]): a promise of the MapHandle
// (writable, MAP_SHARED) of a file created at `path` (which must not exist) of `size` bytes with
// [0, reserve) reserved on disk and [0, min(warm, reserve)) faulted in; the file's directory entry
// is not synced. The handle's buffer covers [0, expose) rounded up to a page (the whole file by
// default; expose() widens it). `advice` 'random' leaves the mapping advised random-access
// (default 'normal'). Rejects with the errno of the call that failed, the file removed.
Napi::Value CreateMapped(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::TypeError::New(env, "path must be a string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  uint64_t size = 0, reserve = 0, warm = 0;
  if (!ReadSize(info, 1, "size", &size) || !ReadSize(info, 2, "reserve", &reserve) || !ReadSize(info, 3, "warm", &warm)) {
    return env.Undefined();
  }
  if (size == 0) {
    Napi::RangeError::New(env, "size must be positive").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  uint64_t expose = size;
  if (!ReadExpose(info, 4, size, &expose)) return env.Undefined();
  bool random = false;
  if (info.Length() > 5 && !info[5].IsUndefined()) {
    const std::string advice = info[5].IsString() ? info[5].As<Napi::String>().Utf8Value() : std::string();
    if (advice != "normal" && advice != "random") {
      Napi::TypeError::New(env, "advice must be 'normal' or 'random'").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    random = advice == "random";
  }
  auto* work = new CreateMapWork(env, info[0].As<Napi::String>().Utf8Value(), static_cast<size_t>(size),
                                 static_cast<size_t>(reserve), static_cast<size_t>(warm), static_cast<size_t>(expose), random);
  Napi::Promise promise = work->Promise();
  try {
    work->Queue();
  } catch (...) {
    delete work;
    throw;
  }
  return promise;
}

#if defined(__linux__)
// sync_file_range(SYNC_FILE_RANGE_WRITE) on the libuv pool: submitting the I/O of a MiB costs the
// caller most of a millisecond. It works on its own duplicate of the descriptor, closed when done.
class WriteBackWork : public Napi::AsyncWorker {
 public:
  WriteBackWork(Napi::Env env, int fd, off_t offset, off_t length)
      : Napi::AsyncWorker(env, "mqstore.writeBack"), fd_(fd), offset_(offset), length_(length) {}
  ~WriteBackWork() override {
    if (fd_ >= 0) close(fd_);
  }

 protected:
  void Execute() override {
    int rc;
    do {
      rc = sync_file_range(fd_, offset_, length_, SYNC_FILE_RANGE_WRITE);
    } while (rc != 0 && errno == EINTR);
    // A hint: a write-back that fails changes nothing, and the next sync reports the error. The
    // descriptor is closed on the pool (see MappingWork::Drop).
    close(fd_);
    fd_ = -1;
  }
  void OnOK() override {}
  void OnError(const Napi::Error&) override {}

 private:
  int fd_;
  off_t offset_;
  off_t length_;
};
#endif

// The (fd, offset, length) of writeBack and writeBackNow; false (with a JS exception) when bad.
bool ReadFileRange(const Napi::CallbackInfo& info, int* fd, uint64_t* offset, uint64_t* length) {
  return ReadFd(info, fd) && ReadSize(info, 1, "offset", offset) && ReadSize(info, 2, "length", length);
}

// Starts write-back of the dirty pages of [offset, offset + length) on the libuv pool and returns
// at once, without making them durable (no cache flush, no metadata): a later msync or fdatasync
// then finds them written. Linux only (sync_file_range); elsewhere it does nothing, returns false.
Napi::Value WriteBack(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = -1;
  uint64_t offset = 0, length = 0;
  if (!ReadFileRange(info, &fd, &offset, &length)) return env.Undefined();
#if defined(__linux__)
  if (length == 0) return Napi::Boolean::New(env, true);
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    ErrnoError(env, errno, "fcntl", "F_DUPFD_CLOEXEC").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto* work = new WriteBackWork(env, own, static_cast<off_t>(offset), static_cast<off_t>(length));
  work->Queue();
  return Napi::Boolean::New(env, true);
#else
  (void)fd;
  (void)offset;
  (void)length;
  return Napi::Boolean::New(env, false);
#endif
}

// writeBack on the calling thread, for a few pages (a group commit's): submitting them costs less
// than the trip to the pool, and a sync that follows on the pool finds them under way. Returns
// false where there is no sync_file_range (macOS) or when it failed (a hint: the sync reports).
Napi::Value WriteBackNow(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = -1;
  uint64_t offset = 0, length = 0;
  if (!ReadFileRange(info, &fd, &offset, &length)) return env.Undefined();
#if defined(__linux__)
  if (length == 0) return Napi::Boolean::New(env, true);
  int rc;
  do {
    rc = sync_file_range(fd, static_cast<off_t>(offset), static_cast<off_t>(length), SYNC_FILE_RANGE_WRITE);
  } while (rc != 0 && errno == EINTR);
  return Napi::Boolean::New(env, rc == 0);
#else
  (void)fd;
  (void)offset;
  (void)length;
  return Napi::Boolean::New(env, false);
#endif
}

// A write lock on the whole file through fcntl: what Java's FileChannel.tryLock takes, so a
// RocketMQ broker and mqstore exclude each other. On Linux it is an open-file-description lock
// (F_OFD_SETLK, 3.15+): owned by this descriptor like flock, so closing some other descriptor of
// the same file in this process does not drop it, yet it conflicts with a broker's classic POSIX
// lock. Elsewhere (macOS) it is a classic POSIX lock, owned by the process.
#if defined(__linux__) && !defined(F_OFD_SETLK)
#define F_OFD_SETLK 37  // uapi fcntl.h; glibc headers before 2.20 lack it
#endif

int RecordLock(int fd, short type) {
  struct flock lock;
  memset(&lock, 0, sizeof lock);
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 0;  // to the end of the file, however long it grows
  int rc;
#if defined(__linux__)
  do {
    rc = fcntl(fd, F_OFD_SETLK, &lock);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0 || errno != EINVAL) return rc == 0 ? 0 : errno;
  // A kernel before 3.15: classic POSIX lock.
  lock.l_pid = 0;
#endif
  do {
    rc = fcntl(fd, F_SETLK, &lock);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

// lockFile(fd): exclusive, non-blocking flock, then the fcntl write lock above. Throws EAGAIN /
// EWOULDBLOCK (flock) or EAGAIN / EACCES (fcntl) when another holder has either; takes neither
// then.
Napi::Value LockFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = -1;
  if (!ReadFd(info, &fd)) return env.Undefined();
  int rc;
  do {
    rc = flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    ErrnoError(env, errno, "flock").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int err = RecordLock(fd, F_WRLCK);
  if (err != 0) {
    flock(fd, LOCK_UN);
    ErrnoError(env, err, "fcntl", "F_SETLK").ThrowAsJavaScriptException();
  }
  return env.Undefined();
}

// unlockFile(fd): drops both locks.
Napi::Value UnlockFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = -1;
  if (!ReadFd(info, &fd)) return env.Undefined();
  int err = RecordLock(fd, F_UNLCK);
  if (flock(fd, LOCK_UN) != 0) {
    ErrnoError(env, errno, "flock").ThrowAsJavaScriptException();
  } else if (err != 0) {
    ErrnoError(env, err, "fcntl", "F_UNLCK").ThrowAsJavaScriptException();
  }
  return env.Undefined();
}

// errnoName(errno): the code the addon's errors carry for that errno (positive or negative).
Napi::Value ErrnoNameOf(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(env, "errno must be a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int err = info[0].As<Napi::Number>().Int32Value();
  return Napi::String::New(env, ErrnoName(err < 0 ? -err : err));
}

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* data = new AddonData();
  data->map_handle_ctor = Napi::Persistent(MapHandle::Init(env));
  env.SetInstanceData<AddonData>(data);
  env.AddCleanupHook([data]() { data->CloseAll(); });

  exports.Set("map", Napi::Function::New(env, Map, "map"));
  exports.Set("allocate", Napi::Function::New(env, Allocate, "allocate"));
  exports.Set("createMapped", Napi::Function::New(env, CreateMapped, "createMapped"));
  exports.Set("writeBack", Napi::Function::New(env, WriteBack, "writeBack"));
  exports.Set("writeBackNow", Napi::Function::New(env, WriteBackNow, "writeBackNow"));
  exports.Set("lockFile", Napi::Function::New(env, LockFile, "lockFile"));
  exports.Set("unlockFile", Napi::Function::New(env, UnlockFile, "unlockFile"));
  exports.Set("errnoName", Napi::Function::New(env, ErrnoNameOf, "errnoName"));
  napi_value crc_ranges;
  NAPI_THROW_IF_FAILED(env, napi_create_function(env, "crc32Ranges", NAPI_AUTO_LENGTH, Crc32Ranges, nullptr, &crc_ranges),
                       exports);
  exports.Set("crc32Ranges", Napi::Value(env, crc_ranges));
  exports.Set("crc32Each", Napi::Function::New(env, Crc32Each, "crc32Each"));
  // A plain Node-API function (no wrapper): it runs once per read, often for one record.
  napi_value split_copy;
  NAPI_THROW_IF_FAILED(env, napi_create_function(env, "splitCopyCrc", NAPI_AUTO_LENGTH, SplitCopyCrc, nullptr, &split_copy),
                       exports);
  exports.Set("splitCopyCrc", Napi::Value(env, split_copy));
  napi_value prefetch;
  NAPI_THROW_IF_FAILED(env, napi_create_function(env, "prefetchRanges", NAPI_AUTO_LENGTH, PrefetchRanges, nullptr, &prefetch),
                       exports);
  exports.Set("prefetchRanges", Napi::Value(env, prefetch));
  exports.Set("pageSize", Napi::Number::New(env, static_cast<double>(PageSize())));
  exports.Set("platform", Napi::String::New(env,
#if defined(__APPLE__)
                                            "darwin"
#else
                                            "linux"
#endif
                                            ));
  return exports;
}

}  // namespace mqnative

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return mqnative::Init(env, exports); }

NODE_API_MODULE(mqstore, InitModule)
