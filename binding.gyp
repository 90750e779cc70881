{
  "targets": [
    {
      "target_name": "mqstore",
      "sources": ["native/addon.cc", "native/copy-crc.cc", "native/crc.cc", "native/errno-name.cc", "native/mapping.cc"],
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"],
      # NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS: a call that fails while its environment is torn down
      # (a worker terminated, or the process exiting, in the middle of it) throws a C++ error that
      # node-addon-api can no longer turn into a JavaScript one; without this it rethrows it and the
      # process aborts. Nobody is left to catch it: it is dropped.
      "defines": ["NAPI_VERSION=8", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "xcode_settings": {
        "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
        "MACOSX_DEPLOYMENT_TARGET": "10.15",
        "GCC_ENABLE_CPP_EXCEPTIONS": "YES"
      }
    }
  ]
}
