# shellcheck shell=bash
# Sourced by patches/kubevirt/test.sh and .ci/shared-versions: how a KubeVirt release's source tree is set up
# to build here, and which of its packages the patch series builds and tests. Both scripts need the same answer
# (shared-versions checks that test/ compiles the modules those packages load at the versions this tree does),
# so it is written once. Defines functions and arrays only; it runs nothing.

# KubeVirt's own test packages run on each patched tree: the packages the series touches (pkg/network/setup)
# and the direct neighbours they use.
kubevirt_test_pkgs=(./pkg/network/setup/ ./pkg/network/cache/ ./pkg/network/multus/ ./pkg/network/namescheme/ ./pkg/safepath/)
# The suites of the packages patch 0003 (hostdev-replug) touches.
kubevirt_replug_pkgs=(./pkg/network/vmispec/ ./pkg/virt-launcher/virtwrap/device/hostdevice/sriov/ ./pkg/virt-handler/)
# Everything test.sh builds or tests in a tree.
kubevirt_tree_pkgs=(./cmd/virt-handler "${kubevirt_test_pkgs[@]}" "${kubevirt_replug_pkgs[@]}")

# kubevirt_src V prints the directory of kubevirt.io/kubevirt@V in the module cache, downloading it first.
kubevirt_src() {
  GOFLAGS= go mod download -json "kubevirt.io/kubevirt@$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'
}

# kubevirt_tree_copy V DEST copies KubeVirt V's source to DEST, writable.
kubevirt_tree_copy() {
  local src
  src=$(kubevirt_src "$1")
  [ -n "$src" ] || { echo "kubevirt_tree_copy: no module cache directory for kubevirt.io/kubevirt@$1" >&2; return 1; }
  cp -r "$src" "$2" && chmod -R u+w "$2"
}

# kubevirt_tree_modfile DIR V maps the staging replaces of the KubeVirt V tree in DIR (the module zip has no
# staging/src, only BUILD files) to the published modules of the same version (DESIGN.md section 6), and adds
# the third_party fallback (.ci/third-party, which says in its output when it is used) where the release
# requires the kubevirt.io/virt-template-* version that ../shared/third_party holds (v0.2.0, v1.9.0's; v1.8.4
# requires v0.1.7, which the proxy serves) and the proxy refuses it. Needs $repo, the project's root.
kubevirt_tree_modfile() {
  (cd "$1" && go mod edit -replace "kubevirt.io/api=kubevirt.io/api@$2" -replace "kubevirt.io/client-go=kubevirt.io/client-go@$2")
  if [ "$(awk '$1 == "kubevirt.io/virt-template-api" {print $2}' "$1/go.mod")" = v0.2.0 ]; then
    "$repo/.ci/third-party" apply "$1/go.mod"
  fi
}
