# shellcheck shell=bash
# Sourced by patches/kubevirt/test.sh and .ci/kubevirt-modfiles (check): how a KubeVirt release's source tree is set up
# to build here, and which of its packages the patch series builds and tests. Both scripts need the same answer
# (the check makes sure that test/ compiles the modules those packages load at the versions this tree does),
# so it is written once. Defines functions and arrays only; it runs nothing.

# KubeVirt's own test packages run on each patched tree: the packages the series touches (pkg/network/setup)
# and the direct neighbours they use.
kubevirt_test_pkgs=(./pkg/network/setup/ ./pkg/network/cache/ ./pkg/network/multus/ ./pkg/network/namescheme/ ./pkg/safepath/)
# The suites of the packages patch 0003 (hostdev-replug) touches.
kubevirt_replug_pkgs=(./pkg/network/vmispec/ ./pkg/virt-launcher/virtwrap/device/hostdevice/sriov/ ./pkg/virt-handler/)
# The suite of the package patch 0005 touches (virt-launcher's NIC hot-plug; cgo: libvirt-dev).
kubevirt_nichotplug_pkgs=(./pkg/virt-launcher/virtwrap/network/)
# Everything test.sh builds or tests in a tree.
kubevirt_tree_pkgs=(./cmd/virt-handler "${kubevirt_test_pkgs[@]}" "${kubevirt_replug_pkgs[@]}" "${kubevirt_nichotplug_pkgs[@]}")

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

# KubeVirt main and open pull requests (patches/kubevirt/test-main.sh, outside CI): the Go module proxy serves no
# such tree, so it comes from a git clone of kubevirt/kubevirt with the pull request refs (the fetch tool's bare
# directory here; elsewhere `git clone --bare https://github.com/kubevirt/kubevirt` and
# `git fetch origin '+refs/pull/*/head:refs/pull/*/head'`). KUBEVIRT_GIT_DIR overrides where it is.
kubevirt_git_dir=${KUBEVIRT_GIT_DIR:-/work/.mirror/kubevirt+kubevirt/repo}
# What test-main.sh builds besides virt-handler, and the suite of the package patch 0004 touches.
kubevirt_launcher_pkgs=(./cmd/virt-launcher)
kubevirt_hotplug_pkgs=(./pkg/virt-launcher/virtwrap/pci/)

# kubevirt_git_tree COMMIT DEST checks COMMIT of $kubevirt_git_dir out at DEST (a clone sharing its objects).
kubevirt_git_tree() {
  git -C "$kubevirt_git_dir" cat-file -e "$1^{commit}" 2>/dev/null ||
    { echo "kubevirt_git_tree: $kubevirt_git_dir has no commit $1 (fetch kubevirt/kubevirt again, or set KUBEVIRT_GIT_DIR)" >&2; return 1; }
  git clone -q --shared --no-checkout "$kubevirt_git_dir" "$2" && git -C "$2" checkout -q --detach "$1"
}

# kubevirt_git_tree_modfile DIR makes the go.mod of a git tree in DIR buildable here: its staging replaces are
# directories of the tree itself, but the Go module proxy refuses kubevirt.io/virt-template-{api,client-go}
# v0.2.0 (.ci/third-party, which says when its fallback is used) and libguestfs.org/libnbd (virt-launcher's NBD
# client): the stub in main/libnbd-stub takes its place, and the log says so.
kubevirt_git_tree_modfile() {
  if [ "$(awk '$1 == "kubevirt.io/virt-template-api" {print $2}' "$1/go.mod")" = v0.2.0 ]; then
    "$repo/.ci/third-party" apply "$1/go.mod"
  fi
  if grep -q '^[[:space:]]*libguestfs.org/libnbd ' "$1/go.mod"; then
    (cd "$1" && go mod edit -replace "libguestfs.org/libnbd=$here/main/libnbd-stub")
    echo "== libnbd: STUB in use (patches/kubevirt/main/libnbd-stub: the Go module proxy refuses libguestfs.org/libnbd; virt-launcher builds without an NBD client)"
  fi
}
