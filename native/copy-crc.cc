#include "copy-crc.h"

#include <cstdint>
#include <cstring>

#include "crc.h"
#include "typed-args.h"

namespace mqnative {

namespace {

constexpr size_t kCacheLine = 64;
// Positions are exact integers in a double below 2^53.
constexpr double kMaxPosition = 9007199254740991.0;

// Through int64_t (exact below 2^53), whose conversion is one instruction on x86-64, where
// uint64_t's takes a branch and several: this check runs four times per record of a read.
bool IsPosition(double value) {
  return value >= 0 && value <= kMaxPosition && value == static_cast<double>(static_cast<int64_t>(value));
}

}  // namespace

napi_value SplitCopyCrc(napi_env env, napi_callback_info info) {
  constexpr size_t kSplitArgs = 8;
  // A table row: start, length, inner start, inner length.
  constexpr size_t kSplitRow = 4;
  size_t argc = kSplitArgs;
  napi_value args[kSplitArgs];
  if (napi_get_cb_info(env, info, &argc, args, nullptr, nullptr) != napi_ok) return nullptr;
  if (argc < kSplitArgs) {
    napi_throw_type_error(env, nullptr, "splitCopyCrc takes 8 arguments");
    return nullptr;
  }
  View src, table, outer, inner, crcs;
  if (!TypedArrayArg(env, args[0], napi_uint8_array, "src must be a Uint8Array", &src) ||
      !TypedArrayArg(env, args[1], napi_float64_array, "table must be a Float64Array", &table) ||
      !TypedArrayArg(env, args[3], napi_uint8_array, "outer must be a Uint8Array", &outer)) {
    return nullptr;
  }
  // A null inner: the inner ranges stay where they are (a zero-copy read serves them in place).
  napi_valuetype inner_type, crc_type;
  if (napi_typeof(env, args[5], &inner_type) != napi_ok || napi_typeof(env, args[7], &crc_type) != napi_ok) return nullptr;
  const bool copy_inner = inner_type != napi_null;
  if (copy_inner && !TypedArrayArg(env, args[5], napi_uint8_array, "inner must be a Uint8Array or null", &inner)) return nullptr;
  const bool want_crc = crc_type != napi_null && crc_type != napi_undefined;
  if (want_crc && !copy_inner) {
    napi_throw_type_error(env, nullptr, "crcOut must be null when inner is null");
    return nullptr;
  }
  if (want_crc && !TypedArrayArg(env, args[7], napi_int32_array, "crcOut must be an Int32Array or null", &crcs)) return nullptr;
  double count_value = 0, outer_at_value = 0, inner_at_value = 0;
  if (!NumberArg(env, args[2], "count must be a number", &count_value) ||
      !NumberArg(env, args[4], "outerAt must be a number", &outer_at_value) ||
      !NumberArg(env, args[6], "innerAt must be a number", &inner_at_value)) {
    return nullptr;
  }
  if (!IsPosition(count_value) || count_value * kSplitRow > static_cast<double>(table.length) ||
      (want_crc && count_value > static_cast<double>(crcs.length)) || !IsPosition(outer_at_value) || !IsPosition(inner_at_value)) {
    napi_throw_range_error(env, nullptr, "count or a start does not fit the arrays");
    return nullptr;
  }
  const size_t count = static_cast<size_t>(count_value);
  const auto* rows = reinterpret_cast<const double*>(table.data);
  // Every row is checked, and the totals, before anything is written. Once checked, entries are
  // exact integers and each range lies in src, so the copy pass casts them as is.
  double outer_end = outer_at_value;
  double inner_end = inner_at_value;
  const double src_length = static_cast<double>(src.length);
  for (size_t k = 0; k < count; k++) {
    const double* row = rows + kSplitRow * k;
    const double start = row[0], length = row[1], inner_start = row[2], inner_length = row[3];
    if (!IsPosition(start) || !IsPosition(length) || !IsPosition(inner_start) || !IsPosition(inner_length) ||
        start + length > src_length || inner_start < start || inner_start + inner_length > start + length) {
      napi_throw_range_error(env, nullptr, "a range lies outside src, or its inner range outside it");
      return nullptr;
    }
    outer_end += length - inner_length;
    if (copy_inner) inner_end += inner_length;
  }
  if (outer_end > static_cast<double>(outer.length) || (copy_inner && inner_end > static_cast<double>(inner.length))) {
    napi_throw_range_error(env, nullptr, "the ranges do not fit their destinations");
    return nullptr;
  }
  // The destinations must not overlap src where it is read (a view of the same memory).
  const auto overlaps = [&](const uint8_t* to, double from_at, double to_end) {
    return to_end > from_at && to + static_cast<size_t>(from_at) < src.data + src.length && src.data < to + static_cast<size_t>(to_end);
  };
  if (overlaps(outer.data, outer_at_value, outer_end) || (copy_inner && overlaps(inner.data, inner_at_value, inner_end))) {
    napi_throw_range_error(env, nullptr, "a destination overlaps src");
    return nullptr;
  }
  // Ask for every source line first: ranges scattered over a file then miss the cache together.
  for (size_t k = 0; k < count; k++) {
    const double* row = rows + kSplitRow * k;
    const uint8_t* from = src.data + static_cast<size_t>(row[0]);
    const size_t length = static_cast<size_t>(row[1]);
    for (size_t line = 0; line < length; line += kCacheLine) __builtin_prefetch(from + line);
  }
  if (want_crc) EnsureCrcReady();
  auto* out = reinterpret_cast<int32_t*>(crcs.data);
  uint8_t* outer_to = outer.data + static_cast<size_t>(outer_at_value);
  uint8_t* inner_to = copy_inner ? inner.data + static_cast<size_t>(inner_at_value) : nullptr;
  for (size_t k = 0; k < count; k++) {
    const double* row = rows + kSplitRow * k;
    const uint8_t* from = src.data + static_cast<size_t>(row[0]);
    const uint8_t* inner_from = src.data + static_cast<size_t>(row[2]);
    const size_t inner_length = static_cast<size_t>(row[3]);
    const size_t head = static_cast<size_t>(inner_from - from);
    const size_t tail = static_cast<size_t>(row[1]) - head - inner_length;
    if (head > 0) memcpy(outer_to, from, head);
    // The inner bytes are checked as they are copied: the bytes checked are the bytes served.
    if (want_crc) {
      out[k] = static_cast<int32_t>(CopyCrc32(inner_from, inner_to, inner_length) & 0x7fffffffu);
    } else if (copy_inner && inner_length > 0) {
      memcpy(inner_to, inner_from, inner_length);
    }
    if (tail > 0) memcpy(outer_to + head, inner_from + inner_length, tail);
    outer_to += head + tail;
    if (copy_inner) inner_to += inner_length;
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
