// Package oneproc runs the sidecar on one P (GOMAXPROCS=1) unless the environment sets GOMAXPROCS.
// It does so in its init, which Go's init order runs before gRPC's and protobuf's: set later (in
// main), the second P has already taken memory during those inits, and idle RSS was 0.5 MiB higher
// in half the starts (test/bench). Imported for that side effect by cmd/sidecar only.
package oneproc
