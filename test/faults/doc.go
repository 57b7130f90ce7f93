// Package faults is the fault-injection suite of issues #15 and #30: each test plants one hostile or faulty
// condition (a client that never speaks, a FIFO or a symlink in the cache, a second instance, an
// unreadable pod-info dir, a huge cache entry, vanishing data, malformed input; a request past the
// receive limit, mangled user data, marker mentions, the user's drop-in, an ambiguous pod NIC) around the BUILT
// binary, drives it with a gRPC client on its own socket (no hook Manager, so no shared hook root),
// and asserts the hardened behaviour. It must never need more than the test's own temp dirs.
package faults
