// Command sriov-udn-binding is the KubeVirt network binding plugin sidecar for SR-IOV VFs on
// OVN-Kubernetes User Defined Networks. It owns only flags, wiring and signals (serve), and the
// `render` debugging subcommand (flags and printing); the work lives in pkg/, reached through
// pkg/pipeline, pkg/hooks and pkg/binding only, with pkg/model's and pkg/downwardapi's values handed to
// them (imports_test.go). It must never do a package's work itself. KubeVirt runs it as hook-sidecar-N
// in each virt-launcher pod that uses the binding.
package main
