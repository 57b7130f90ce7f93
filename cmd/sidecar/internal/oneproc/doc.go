// Package oneproc runs the sidecar on one P (GOMAXPROCS=1) unless the environment sets GOMAXPROCS.
// It does so in its own init, which runs before the inits of every other module the binary links (yaml,
// hpack, protowire): Go orders independent package inits by import path (Go 1.21), and this module's
// path sorts before theirs (test/integration checks the order in the built binary).
// Set later, in main, the second P had already taken memory during those inits, and idle RSS was
// 0.5 MiB higher in 3 of 5 starts (test/bench). Imported for that side effect by cmd/sidecar only.
package oneproc
