package main

import (
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// FuzzRender feeds arbitrary pod and VMI documents (JSON or YAML) through render's decoding and the
// whole pure pipeline: an error or output, never a panic.
func FuzzRender(f *testing.F) {
	f.Add(samplePod, sampleVMI)
	f.Add([]byte("kind: Pod\nmetadata:\n  annotations:\n    k8s.ovn.org/pod-networks: '{\"a/b\":{}}'\n"), []byte("spec: {domain: {devices: {interfaces: [{name: x, binding: {name: sriov-udn}}]}}, networks: [{name: x, multus: {networkName: b}}]}"))
	f.Add([]byte("{"), []byte("- 1\n- 2"))
	f.Fuzz(func(t *testing.T, podRaw, vmiRaw []byte) {
		v, err := decodeVMI(vmiRaw)
		if err != nil {
			return
		}
		snap, err := snapshotFromPod(podRaw)
		if err != nil {
			return
		}
		_ = render(v, snap, model.Options{BindingName: "sriov-udn"})
	})
}
