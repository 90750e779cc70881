#include "copy-crc.h"

#include <cstdint>
#include <cstring>

#include "crc.h"
#include "typed-args.h"

namespace mqnative {

namespace {

constexpr size_t kArgs = 6;
constexpr size_t kCacheLine = 64;
// A table row: whole start, length, offset in `whole`; part start, length, offset in `part`.
constexpr size_t kRow = 6;
// Positions are exact integers in a double below 2^53.
constexpr double kMaxPosition = 9007199254740991.0;

// Through int64_t (exact below 2^53), whose conversion is one instruction on x86-64, where
// uint64_t's takes a branch and several: this check runs a dozen times per record of a read.
bool IsPosition(double value) {
  return value >= 0 && value <= kMaxPosition && value == static_cast<double>(static_cast<int64_t>(value));
}


// One copy of src[start, start + length) to `to` at `at`, checked before any is made.
struct Copy {
  const uint8_t* from;
  uint8_t* to;
  size_t length;
};

// Reads entry fields [first, first + 3) of a table row as a copy into `target`; false when a
// position is not a non-negative integer, the range lies outside src or target, or the two overlap.
bool CopyOf(const double* row, const View& src, const View& target, Copy* out) {
  const double start = row[0];
  const double length = row[1];
  const double at = row[2];
  if (!IsPosition(start) || !IsPosition(length) || !IsPosition(at) || start + length > static_cast<double>(src.length) ||
      at + length > static_cast<double>(target.length)) {
    return false;
  }
  out->from = src.data + static_cast<size_t>(start);
  out->to = target.data + static_cast<size_t>(at);
  out->length = static_cast<size_t>(length);
  return out->length == 0 || out->from >= out->to + out->length || out->to >= out->from + out->length;
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
  View src, table, whole, part, crcs;
  if (!TypedArrayArg(env, args[0], napi_uint8_array, "src must be a Uint8Array", &src) ||
      !TypedArrayArg(env, args[1], napi_float64_array, "table must be a Float64Array", &table) ||
      !TypedArrayArg(env, args[4], napi_uint8_array, "part must be a Uint8Array", &part)) {
    return nullptr;
  }
  napi_valuetype whole_type, crc_type;
  if (napi_typeof(env, args[3], &whole_type) != napi_ok || napi_typeof(env, args[5], &crc_type) != napi_ok) return nullptr;
  const bool want_whole = whole_type != napi_null && whole_type != napi_undefined;
  const bool want_crc = crc_type != napi_null && crc_type != napi_undefined;
  if ((want_whole && !TypedArrayArg(env, args[3], napi_uint8_array, "whole must be a Uint8Array or null", &whole)) ||
      (want_crc && !TypedArrayArg(env, args[5], napi_int32_array, "crcOut must be an Int32Array or null", &crcs))) {
    return nullptr;
  }
  double count_value = 0;
  if (!NumberArg(env, args[2], "count must be a number", &count_value)) return nullptr;
  if (!IsPosition(count_value) || count_value * kRow > static_cast<double>(table.length) ||
      (want_crc && count_value > static_cast<double>(crcs.length))) {
    napi_throw_range_error(env, nullptr, "count does not fit the arrays");
    return nullptr;
  }
  const size_t count = static_cast<size_t>(count_value);
  const auto* rows = reinterpret_cast<const double*>(table.data);
  // Check every range before writing anything, so a bad call changes nothing. Once checked, a
  // row's entries are exact integers inside their buffers, so the passes below cast them as is.
  for (size_t k = 0; k < count; k++) {
    Copy copy;
    if ((want_whole && !CopyOf(rows + kRow * k, src, whole, &copy)) || !CopyOf(rows + kRow * k + 3, src, part, &copy)) {
      napi_throw_range_error(env, nullptr, "a range is outside src or its destination, or overlaps it");
      return nullptr;
    }
  }
  // Ask for every source line first: ranges scattered over a file then miss the cache together
  // rather than one after another.
  for (size_t k = 0; k < count; k++) {
    const double* row = rows + kRow * k;
    for (size_t range = want_whole ? 0 : 3; range < kRow; range += 3) {
      const uint8_t* from = src.data + static_cast<size_t>(row[range]);
      const size_t length = static_cast<size_t>(row[range + 1]);
      for (size_t line = 0; line < length; line += kCacheLine) __builtin_prefetch(from + line);
    }
  }
  auto* out = reinterpret_cast<int32_t*>(crcs.data);
  if (want_crc) EnsureCrcReady();
  for (size_t k = 0; k < count; k++) {
    const double* row = rows + kRow * k;
    if (want_whole) {
      const size_t length = static_cast<size_t>(row[1]);
      if (length > 0) memcpy(whole.data + static_cast<size_t>(row[2]), src.data + static_cast<size_t>(row[0]), length);
    }
    // The part comes from src, lines the whole copy just read: the bytes checked are the bytes
    // copied, in the same pass over them.
    const uint8_t* from = src.data + static_cast<size_t>(row[3]);
    uint8_t* to = part.data + static_cast<size_t>(row[5]);
    const size_t length = static_cast<size_t>(row[4]);
    if (want_crc) {
      out[k] = static_cast<int32_t>(CopyCrc32(from, to, length) & 0x7fffffffu);
    } else if (length > 0) {
      memcpy(to, from, length);
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
  if (!NumberArg(env, args[2], "count must be a number", &count_value)) return nullptr;
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
