#!/usr/bin/env bash
# Applies each KubeVirt patch series to the KubeVirt source from the Go module cache, builds
# cmd/virt-handler from the patched tree, runs KubeVirt's own tests of the packages the patches
# touch (pkg/network/setup) and of its direct neighbours they use (pkg/network/cache, multus,
# namescheme, pkg/safepath), then two differential checks:
#  - KubeVirt's *stock* netstat specs run against the patched code must fail exactly where the series
#    changes behaviour on purpose (<version>/expected-stock-failures.txt);
#  - testdata/difftest runs stock and patched NetStat on cache entries written by the built sidecar
#    (render), each scenario stating what stock does and what patched does (flap, late entry, forgery).
# Usage: patches/kubevirt/test.sh [VERSION...]   (default: every patches/kubevirt/v* directory)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then
  for d in "$here"/v*/; do versions+=("$(basename "$d")"); done
fi
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod
pkgs=(./pkg/network/setup/ ./pkg/network/cache/ ./pkg/network/multus/ ./pkg/network/namescheme/ ./pkg/safepath/)
git_id=(-c user.name=ci -c user.email=ci@localhost)
repo=$(cd "$here/../.." && pwd)
echo "== build the sidecar (for the differential test)"
(cd "$repo" && CGO_ENABLED=0 go build -o "$work/sriov-udn-binding" ./cmd/sidecar)
export SRIOV_UDN_SIDECAR="$work/sriov-udn-binding"

# test_replug runs, in the patched tree of KubeVirt $1 (the current directory), KubeVirt's own suites of the
# packages patch 0003 touches (VF re-plug of a binding plugin with the hostdev-replug migration method):
# pkg/network/vmispec, virt-launcher's SR-IOV hostdev package and virt-handler, whose vm_hostdevreplug_test.go
# drives hotplugSriovInterfaces on the target after a migration and on the source after a failed one. Every
# stock spec of those packages must stay green: 0003 changes nothing for bindings without the method or for
# core SR-IOV. virt-handler imports pkg/controller, which on v1.9.0 needs modules the Go module proxy here
# refuses: .ci/third-party adds its fallback to this throwaway go.mod when (and only when) that is so.
test_replug() {
  local v=$1 p out
  echo "== KubeVirt $v: patch 0003 (hostdev-replug): KubeVirt's own suites"
  if grep -q 'kubevirt.io/virt-template-api v0.2.0' go.mod; then "$repo/.ci/third-party" apply go.mod; fi
  for p in ./pkg/network/vmispec/ ./pkg/virt-launcher/virtwrap/device/hostdevice/sriov/ ./pkg/virt-handler/; do
    out=$(go test -count=1 -v "$p" -ginkgo.no-color 2>&1) || { echo "$out" | tail -60; echo "FAIL: $p on patched $v"; exit 1; }
    echo "   $p: $(echo "$out" | grep -aE '^Ran [0-9]+ of [0-9]+ Specs' | head -1) $(echo "$out" | grep -aoE '[0-9]+ Passed' | head -1)"
  done
  out=$(go test -count=1 -v ./pkg/virt-handler/ -ginkgo.no-color -ginkgo.focus 'hostdev-replug' 2>&1) || { echo "$out" | tail -40; exit 1; }
  echo "$out" | grep -aE '^Ran [0-9]+ of [0-9]+ Specs' | sed 's/^/   virt-handler, hostdev-replug specs: /'
}

for v in "${versions[@]}"; do
  echo "== KubeVirt $v: apply patches/kubevirt/$v"
  src=$(go mod download -json "kubevirt.io/kubevirt@$v" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  tree="$work/kubevirt-$v"
  cp -r "$src" "$tree" && chmod -R u+w "$tree"
  cd "$tree"
  git init -q && git add -A && git "${git_id[@]}" commit -qm "kubevirt $v (module zip)"
  git "${git_id[@]}" am -q "$here/$v"/*.patch
  echo "   applied: $(git log --reverse --format=%s "HEAD~$(ls "$here/$v"/*.patch | wc -l)..HEAD" | paste -sd'|')"
  # The module zip has no staging/src (only BUILD files): map the staging replaces to the published
  # modules of the same version (DESIGN.md section 6).
  go mod edit -replace "kubevirt.io/api=kubevirt.io/api@$v" -replace "kubevirt.io/client-go=kubevirt.io/client-go@$v"

  echo "== KubeVirt $v: go build ./cmd/virt-handler (patched)"
  if out=$(go build -o "$work/virt-handler-$v" ./cmd/virt-handler 2>&1); then
    ls -l "$work/virt-handler-$v" | awk '{print "   built virt-handler:", $5, "bytes"}'
  elif echo "$out" | grep -q 'kubevirt.io/virt-template-[a-z-]*@v[0-9.]*: reading .*: 403 Forbidden'; then
    # v1.9.0 requires kubevirt.io/virt-template-{api,client-go}@v0.2.0, which the Go module proxy does not
    # serve (403 "not available"; the kubevirt.io vanity host is not reachable from CI either). Build every
    # package of cmd/virt-handler's dependency graph that does not need them: it includes the patched
    # pkg/network/setup and everything it imports.
    buildable=$(go list -e -deps -f '{{if and (not .Error) (not .DepsErrors) (not .Standard)}}{{.ImportPath}}{{end}}' ./cmd/virt-handler | grep '^kubevirt.io/kubevirt/')
    blocked=$(go list -e -deps -f '{{if or .Error .DepsErrors}}{{.ImportPath}}{{end}}' ./cmd/virt-handler | grep -c '^kubevirt.io/kubevirt/' || true)
    echo "   NOT BUILT: cmd/virt-handler $v: kubevirt.io/virt-template-{api,client-go} are not served by the Go module proxy (403);"
    echo "   building instead the $(echo "$buildable" | wc -l) packages of its graph that do not need them ($blocked need them), pkg/network/setup among them"
    echo "$buildable" | grep -qx 'kubevirt.io/kubevirt/pkg/network/setup'
    # shellcheck disable=SC2086
    go build $buildable
  else
    echo "$out"; exit 1
  fi

  echo "== KubeVirt $v: KubeVirt's own tests (patched tree)"
  for p in "${pkgs[@]}"; do
    out=$(go test -count=1 -v "$p" -ginkgo.no-color 2>&1) || { echo "$out" | tail -60; echo "FAIL: $p on patched $v"; exit 1; }
    echo "   $p: $(echo "$out" | grep -aE '^Ran [0-9]+ of [0-9]+ Specs' | head -1) $(echo "$out" | grep -aoE '[0-9]+ Passed' | head -1)"
  done

  echo "== KubeVirt $v: stock netstat specs against the patched code (red only where intended)"
  git show "HEAD~$(ls "$here/$v"/*.patch | wc -l):pkg/network/setup/netstat_test.go" > pkg/network/setup/netstat_test.go
  out=$(go test -count=1 -v ./pkg/network/setup/ -ginkgo.no-color 2>&1 || true)
  got=$(echo "$out" | sed -n 's/^  \[FAIL\] \(.*\)$/\1/p' | sed 's/ *$//' | sort -u)
  want=$(grep -v '^#' "$here/$v/expected-stock-failures.txt" | sort -u)
  echo "   $(echo "$out" | grep -aE '^Ran [0-9]+ of [0-9]+ Specs' | head -1); specs red on the patched code: $(echo "$got" | grep -c .)"
  if [ "$got" != "$want" ]; then
    echo "stock specs failing on patched $v differ from $v/expected-stock-failures.txt:"; diff <(echo "$want") <(echo "$got") || true; exit 1
  fi
  echo "   failing stock specs are exactly the $(echo "$want" | wc -l) intended ones"
  git checkout -q pkg/network/setup/netstat_test.go

  echo "== KubeVirt $v: differential test, built sidecar's entries, stock vs patched NetStat"
  git worktree add -q "$work/stock-$v" "HEAD~$(ls "$here/$v"/*.patch | wc -l)"
  (cd "$work/stock-$v" && go mod edit -replace "kubevirt.io/api=kubevirt.io/api@$v" -replace "kubevirt.io/client-go=kubevirt.io/client-go@$v")
  for flavor in stock patched; do
    dir="$tree"; [ "$flavor" = stock ] && dir="$work/stock-$v"
    cp "$here"/testdata/difftest/*.go "$dir/pkg/network/setup/"
    out=$(cd "$dir" && go test -count=1 -tags "sriovudn_$flavor" -run '^TestSidecarDiff$' -v ./pkg/network/setup/ 2>&1) || { echo "$out" | tail -40; echo "FAIL: differential test, $flavor $v"; exit 1; }
    echo "$out" | grep -aE 'NetStat reported|--- PASS: TestSidecarDiff ' | sed "s/^ */   $flavor: /"
  done
  cd "$tree" && test_replug "$v"
  cd "$here"
done
echo "== KubeVirt patch series: OK (${versions[*]})"
