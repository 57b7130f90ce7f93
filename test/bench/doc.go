// Package bench measures the sidecar's footprint beside a peer (KubeVirt's passt binding sidecar):
// start to socket ready, RSS, idle CPU and context switches from /proc, hook latency through
// KubeVirt's hook Manager, kubelet swap -> waiting hook, and in-process render time.
// It reports figures and never judges them against thresholds. Called by cmd/sidecarbench (make bench).
package bench
