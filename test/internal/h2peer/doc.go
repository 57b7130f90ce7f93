// Package h2peer is a raw HTTP/2 peer on the sidecar's unix socket: it writes whatever a test says, legal or
// not, and reads what the server answers. test/hostile's attacks and test/faults' stalled and silent clients
// use it.
package h2peer
