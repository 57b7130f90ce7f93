// Package deps pins, by blank import, the upstream packages the integration tests drive, so that
// `go mod tidy` in this module keeps them (and their replace-pinned versions) in go.sum.
package deps

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/stretchr/testify/require"
	_ "k8s.io/kubernetes/pkg/fieldpath"
	_ "k8s.io/kubernetes/pkg/volume/util"
	_ "kubevirt.io/kubevirt/pkg/cloud-init"
	_ "kubevirt.io/kubevirt/pkg/hooks"
	_ "kubevirt.io/kubevirt/pkg/network/cache"
	_ "kubevirt.io/kubevirt/pkg/network/setup"
	_ "kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	_ "kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/converter"
	_ "libvirt.org/go/libvirtxml"
)
