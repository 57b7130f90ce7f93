// Package cloudinit renders the guest network config for bound interfaces (NoCloud network-config v1/v2,
// ConfigDrive network_data.json, the cloudbase-init script for Windows), merges it into the user's
// NetworkData (theirs wins per NIC, nothing of theirs is lost) and round-trips KubeVirt's CloudInitData
// JSON (decoded once by encoding/json, every field it does not change passed back). The user's data is
// checked before our parts join it: our parts by their MIME headers, the user's own drop-in, gzip and
// U+FFFD (userchecks.go). What each DataSource means is one table (formats.go). It must never build
// YAML/JSON from strings, emit forms cloud-init 22.4.2 mis-renders, or panic on input. Encoding: our
// entries are structs (nocloud.go, configdrive.go) written by encoding/json, or as go.yaml.in/yaml/v3
// nodes with double-quoted strings when merged into the user's YAML, which is kept as PyYAML reads it
// (yaml.go); network_data.json is laid out by writeNetworkData, the user's values compacted as they came
// (configdrive.go). Called by pkg/pipeline only. It runs the steps once per PreCloudInitIso:
// DecodeInput, WithPodNIC, Input.Plan, Input.ParseNetworkData, Input.Merge (Apply runs them in one call).
package cloudinit
