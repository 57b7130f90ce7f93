// Package container builds the sidecar's image with no registry (`make image-local`: images/Containerfile,
// scratch and the binary `make build` made), inspects it, and runs it under podman and runc as KubeVirt
// runs a binding sidecar: read-only root, uid 107, no network, the kubelet-written volumes bind-mounted, the
// env virt-controller sets. KubeVirt's hook Manager drives it through the mounted socket, and its answers
// must equal the bare binary's. It never builds or pulls anything else. `make test-container` runs it (root).
package container
