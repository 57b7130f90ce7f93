#!/usr/bin/env bash
# Shows that the node specs of 0002 (bindingplugincache_node_test.go: the downward API volume in another
# mount namespace, a VMI owner's forged volume, a tampered vmi.status.activePods) fail on the first version
# of the series (b10cd7e), which had no node specs. Not part of CI (make test runs them green on the current
# series); run it by hand, as root (the mount-namespace spec needs unshare -m and a tmpfs mount).
# Usage: patches/kubevirt/testdata/redgreen/run.sh [GIT-REV-OF-THE-FIRST-VERSION]   (default b10cd7e)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
series=$(cd "$here/../.." && pwd)
repo=$(cd "$series/../.." && pwd)
old=${1:-b10cd7e}
v=v1.8.4
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod
src=$(go mod download -json "kubevirt.io/kubevirt@$v" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
cp -r "$src" "$work/kubevirt" && chmod -R u+w "$work/kubevirt" && cd "$work/kubevirt"
git init -q && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm "$v"
for p in $(git -C "$repo" ls-tree --name-only "$old" "patches/kubevirt/$v/" | grep '\.patch$'); do
  git -C "$repo" show "$old:$p" > "$work/$(basename "$p")"
done
git -c user.name=ci -c user.email=ci@localhost am -q "$work"/*.patch
go mod edit -replace "kubevirt.io/api=kubevirt.io/api@$v" -replace "kubevirt.io/client-go=kubevirt.io/client-go@$v"
# The node specs and their fixtures, from the current 0002, with the first version's constructor.
git -C "$repo" show "HEAD:patches/kubevirt/$v/$(basename "$series/$v"/0002-*.patch)" > "$work/current-0002.patch"
git apply --include='pkg/network/setup/bindingplugincache_node_test.go' "$work/current-0002.patch"
cp "$here/reader_first_version_test.go" pkg/network/setup/bindingplugincache_reader_test.go
out=$(go test -count=1 ./pkg/network/setup/ -ginkgo.no-color -ginkgo.focus 'on a node' 2>&1 || true)
echo "$out" | grep -aE '^\s+\[FAIL\]|^Ran [0-9]+ of|Passed' || true
failed=$(echo "$out" | grep -acE '^\s+\[FAIL\]' || true)
if [ "$failed" != 3 ]; then echo "want the 3 node specs red on $old, got $failed"; exit 1; fi
echo "== the 3 node specs are red on the series at $old (green on the current one: make test-kubevirt-patches)"
