// Errno numbers to their symbolic names, spelled as libuv (and so Node's fs errors) spell them.
//
// The addon does not call libuv for this: a Node-API addon that links uv_err_name would fail to
// load in runtimes that implement Node-API without exporting libuv. Where an errno has aliases
// (EWOULDBLOCK, EDEADLOCK, EOPNOTSUPP on Linux) the name libuv reports comes first in the table.
#pragma once

namespace mqnative {

// The name of `err` (a positive errno), or "UNKNOWN" (libuv's name for errors it cannot map).
const char* ErrnoName(int err);

}  // namespace mqnative
