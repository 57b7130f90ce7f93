// Package guest proves the sidecar's cloud-init output in a real guest: it runs virt-launcher's own
// pre-start path (KubeVirt's ReadCloudInitVolumeDataSource, hook Manager PreCloudInitIso against the
// built binary, GenerateLocalData ISO) and boots each cached image of the guest matrix (Debian 12 and 13,
// netplan/networkd and NetworkManager) with cloud-init on that ISO
// under qemu TCG, then asserts on what the guest itself reports. It never reaches outside the host:
// every guest NIC is a restricted qemu user-mode network. Run by `make test-guest` and .ci/run.
package guest
