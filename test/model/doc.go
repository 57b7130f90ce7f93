// Package model tests pkg/model against KubeVirt's own naming code (pkg/network/namescheme): the
// hashed pod interface names must be KubeVirt's. It holds tests only.
package model
