// Package hostile plays a hostile HTTP/2 peer on the sidecar's socket (any process of the virt-launcher pod
// can reach it: a compromised compute container), one bounded attack per category (attacks.go), and measures
// what each costs the built binary (measure.go): its peak RSS, whether it stays up. hostile_test.go holds each
// under the documented memory limit and then serves legitimate calls through KubeVirt's hook Manager; make bench
// reports the peaks. It plays the peer with test/internal/h2peer (golang.org/x/net's HTTP/2 framer and HPACK
// encoder), the messages encoded with KubeVirt's generated types; it never needs more than a socket path and a pid.
package hostile
