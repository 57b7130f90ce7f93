// Package cloudinit renders the guest network config for bound interfaces (NoCloud network-config v1/v2,
// ConfigDrive network_data.json, the cloudbase-init script for Windows), merges it into the user's
// NetworkData (theirs wins per NIC, nothing of theirs is lost) and round-trips KubeVirt's CloudInitData
// JSON, every field it does not change passed back. What each DataSource means is one table (formats.go);
// the user's YAML is kept as PyYAML reads it (yaml.go). It must never build YAML/JSON from strings, emit
// forms cloud-init 22.4.2 mis-renders, or panic on input. Called by pkg/pipeline only. It runs the steps
// once per PreCloudInitIso: DecodeInput, WithPodNIC, Input.Plan, Input.ParseNetworkData, Input.Merge
// (Apply runs them in one call).
package cloudinit
