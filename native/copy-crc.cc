#include "copy-crc.h"

#include <cstdint>
#include <cstring>

#include "crc.h"

namespace mqnative {

namespace {

constexpr size_t kArgs = 6;
constexpr size_t kCacheLine = 64;
// Positions are exact integers in a double below 2^53.
constexpr double kMaxPosition = 9007199254740991.0;

struct View {
  uint8_t* data = nullptr;
  size_t length = 0;  // in elements
};

// The typed array at args[index] when it has `type`; false (and a TypeError thrown) otherwise.
bool TypedArrayArg(napi_env env, napi_value value, napi_typedarray_type type, const char* message, View* out) {
  napi_typedarray_type actual;
  void* data = nullptr;
  size_t length = 0;
  // napi_get_typedarray_info answers napi_invalid_arg (throwing nothing) for anything else.
  if (napi_get_typedarray_info(env, value, &actual, &length, &data, nullptr, nullptr) != napi_ok || actual != type) {
    napi_throw_type_error(env, nullptr, message);
    return false;
  }
  // A detached or empty array reports no data: nothing may be read from it.
  out->data = static_cast<uint8_t*>(data);
  out->length = data == nullptr ? 0 : length;
  return true;
}

bool IsPosition(double value) {
  return value >= 0 && value <= kMaxPosition && value == static_cast<double>(static_cast<uint64_t>(value));
}

}  // namespace

napi_value CopyCrcRanges(napi_env env, napi_callback_info info) {
  size_t argc = kArgs;
  napi_value args[kArgs];
  if (napi_get_cb_info(env, info, &argc, args, nullptr, nullptr) != napi_ok) return nullptr;
  if (argc < kArgs) {
    napi_throw_type_error(env, nullptr, "copyCrcRanges takes 6 arguments");
    return nullptr;
  }
  View src, ranges, dst, offsets, crcs;
  if (!TypedArrayArg(env, args[0], napi_uint8_array, "src must be a Uint8Array", &src) ||
      !TypedArrayArg(env, args[1], napi_float64_array, "ranges must be a Float64Array", &ranges) ||
      !TypedArrayArg(env, args[3], napi_uint8_array, "dst must be a Uint8Array", &dst) ||
      !TypedArrayArg(env, args[4], napi_float64_array, "dstOffsets must be a Float64Array", &offsets)) {
    return nullptr;
  }
  napi_valuetype crc_type;
  if (napi_typeof(env, args[5], &crc_type) != napi_ok) return nullptr;
  const bool want_crc = crc_type != napi_null && crc_type != napi_undefined;
  if (want_crc && !TypedArrayArg(env, args[5], napi_int32_array, "crcOut must be an Int32Array or null", &crcs)) {
    return nullptr;
  }
  double count_value = 0;
  if (napi_get_value_double(env, args[2], &count_value) != napi_ok) {
    napi_throw_type_error(env, nullptr, "count must be a number");
    return nullptr;
  }
  if (!IsPosition(count_value) || count_value * 2 > static_cast<double>(ranges.length) ||
      count_value > static_cast<double>(offsets.length) || (want_crc && count_value > static_cast<double>(crcs.length))) {
    napi_throw_range_error(env, nullptr, "count does not fit the arrays");
    return nullptr;
  }
  const size_t count = static_cast<size_t>(count_value);
  const auto* pairs = reinterpret_cast<const double*>(ranges.data);
  const auto* at = reinterpret_cast<const double*>(offsets.data);
  // Check every range before writing anything, so a bad call changes nothing.
  for (size_t k = 0; k < count; k++) {
    const double start = pairs[2 * k];
    const double length = pairs[2 * k + 1];
    const double to = at[k];
    if (!IsPosition(start) || !IsPosition(length) || !IsPosition(to) || start + length > static_cast<double>(src.length) ||
        to + length > static_cast<double>(dst.length)) {
      napi_throw_range_error(env, nullptr, "a range is outside src or dst");
      return nullptr;
    }
    const uint8_t* from_at = src.data + static_cast<size_t>(start);
    const uint8_t* to_at = dst.data + static_cast<size_t>(to);
    const size_t n = static_cast<size_t>(length);
    if (n > 0 && from_at < to_at + n && to_at < from_at + n) {
      napi_throw_range_error(env, nullptr, "a destination overlaps its source");
      return nullptr;
    }
  }
  auto* out = reinterpret_cast<int32_t*>(crcs.data);
  if (want_crc) EnsureCrcReady();
  // Ask for every source line first: ranges scattered over a file then miss the cache together
  // rather than one after another.
  for (size_t k = 0; k < count; k++) {
    const uint8_t* from_at = src.data + static_cast<size_t>(pairs[2 * k]);
    const size_t n = static_cast<size_t>(pairs[2 * k + 1]);
    for (size_t line = 0; line < n; line += kCacheLine) __builtin_prefetch(from_at + line);
  }
  for (size_t k = 0; k < count; k++) {
    const uint8_t* from_at = src.data + static_cast<size_t>(pairs[2 * k]);
    uint8_t* to_at = dst.data + static_cast<size_t>(at[k]);
    const size_t n = static_cast<size_t>(pairs[2 * k + 1]);
    if (want_crc) {
      out[k] = static_cast<int32_t>(CopyCrc32(from_at, to_at, n) & 0x7fffffffu);
    } else if (n > 0) {
      memcpy(to_at, from_at, n);
    }
  }
  return nullptr;
}

napi_value PrefetchRanges(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  if (napi_get_cb_info(env, info, &argc, args, nullptr, nullptr) != napi_ok) return nullptr;
  if (argc < 3) {
    napi_throw_type_error(env, nullptr, "prefetchRanges takes 3 arguments");
    return nullptr;
  }
  View src, ranges;
  if (!TypedArrayArg(env, args[0], napi_uint8_array, "src must be a Uint8Array", &src) ||
      !TypedArrayArg(env, args[1], napi_float64_array, "ranges must be a Float64Array", &ranges)) {
    return nullptr;
  }
  double count_value = 0;
  if (napi_get_value_double(env, args[2], &count_value) != napi_ok) {
    napi_throw_type_error(env, nullptr, "count must be a number");
    return nullptr;
  }
  if (!IsPosition(count_value) || count_value * 2 > static_cast<double>(ranges.length)) {
    napi_throw_range_error(env, nullptr, "count does not fit the arrays");
    return nullptr;
  }
  const size_t count = static_cast<size_t>(count_value);
  const auto* pairs = reinterpret_cast<const double*>(ranges.data);
  // A hint only: ranges outside src are skipped, never touched.
  for (size_t k = 0; k < count; k++) {
    const double start = pairs[2 * k];
    const double length = pairs[2 * k + 1];
    if (!IsPosition(start) || !IsPosition(length) || start + length > static_cast<double>(src.length)) continue;
    const uint8_t* from_at = src.data + static_cast<size_t>(start);
    const size_t n = static_cast<size_t>(length);
    for (size_t line = 0; line < n; line += kCacheLine) __builtin_prefetch(from_at + line);
    if (n > 0) __builtin_prefetch(from_at + n - 1);
  }
  return nullptr;
}

}  // namespace mqnative
