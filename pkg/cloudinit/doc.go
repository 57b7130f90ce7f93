// Package cloudinit renders the guest network config for bound interfaces (NoCloud network-config v1/v2,
// ConfigDrive network_data.json, the cloudbase-init script for Windows), merges it into the user's
// NetworkData (theirs wins per NIC, nothing of theirs is lost) and round-trips KubeVirt's CloudInitData
// JSON (split without copies, object.go). The user's data is checked before our parts join it: our parts
// by their MIME headers, the user's own drop-in, gzip and U+FFFD (userchecks.go). What each DataSource
// means is one table (formats.go). It must never build YAML/JSON from strings,
// emit forms cloud-init 22.4.2 mis-renders, or panic on input. Encoding: JSON (valid YAML, every string
// quoted) for what we render (jsonwrite.go); go.yaml.in/yaml/v3 nodes with double-quoted strings when
// merging into the user's YAML, to keep it as PyYAML reads it (yaml.go). Called by pkg/pipeline only. It
// runs the steps once per PreCloudInitIso: DecodeInput, WithPodNIC, Input.Plan, Input.ParseNetworkData,
// Input.Merge (Apply runs them in one call).
package cloudinit
