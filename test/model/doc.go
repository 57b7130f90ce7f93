// Package model tests pkg/model against KubeVirt's own code: its naming (pkg/network/namescheme), so the
// hashed pod interface names are KubeVirt's, and its network-info generator
// (pkg/network/downwardapi), so every field a KubeVirt version writes reaches the model. It holds tests only.
package model
