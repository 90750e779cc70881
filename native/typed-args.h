// Typed-array and number arguments of the plain Node-API functions (those called once per put or per read,
// where node-addon-api's wrappers cost more than the work): one napi_get_typedarray_info each.
#pragma once

#include <node_api.h>

#include <cstddef>
#include <cstdint>

namespace mqnative {

struct View {
  uint8_t* data = nullptr;
  size_t length = 0;  // in elements
};

// The typed array `value` when it has `type`; false (and a TypeError with `message` thrown) otherwise.
inline bool TypedArrayArg(napi_env env, napi_value value, napi_typedarray_type type, const char* message, View* out) {
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

// The number `value`; false (and a TypeError with `message` thrown) for anything else.
inline bool NumberArg(napi_env env, napi_value value, const char* message, double* out) {
  if (napi_get_value_double(env, value, out) != napi_ok) {
    napi_throw_type_error(env, nullptr, message);
    return false;
  }
  return true;
}

}  // namespace mqnative
