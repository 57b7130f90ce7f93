#!/usr/bin/env bash
# Applies each KubeVirt patch series to the KubeVirt source from the Go module cache, builds
# cmd/virt-handler from the patched tree, runs KubeVirt's own tests of the packages the patches
# touch (pkg/network/setup) and of its direct neighbours they use (pkg/network/cache, multus,
# namescheme, pkg/safepath), then two differential checks:
#  - KubeVirt's *stock* netstat specs run against the patched code must fail exactly where the series
#    changes behaviour on purpose (<version>/expected-stock-failures.txt);
#  - testdata/difftest runs stock NetStat (stock reader, stock path) and patched NetStat on cache entries
#    written by the built sidecar (render), each scenario stating what stock does and what patched does.
# Each release runs the steps named in `steps`, in order, in its own patched tree; a step is a shell
# function `step_<name>` in steps.sh, shared with test-main.sh (add one by defining it and appending its
# name). Pass counts are printed per package and release, and again in a summary at the end.
# Usage: patches/kubevirt/test.sh [VERSION...]   (default: every patches/kubevirt/v* directory)
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then
  for d in "$here"/v*/; do versions+=("$(basename "$d")"); done
fi
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod
git_id=(-c user.name=ci -c user.email=ci@localhost)

# kubevirt_test_pkgs, kubevirt_replug_pkgs, kubevirt_tree_copy, kubevirt_tree_modfile
# shellcheck source=tree.sh
. "$here/tree.sh"
# The steps run for each release, in this order.
steps=(apply build_virt_handler kubevirt_tests stock_specs difftest replug nichotplug)
summary=()

# The steps and their helpers (pass_count, ensure_qemu_user, build_sidecar, run_steps), shared with test-main.sh.
# shellcheck source=steps.sh
. "$here/steps.sh"

# step_apply makes $tree: KubeVirt $v's module zip, the series applied, its staging replaces mapped.
step_apply() {
  echo "== KubeVirt $v: apply patches/kubevirt/$v"
  kubevirt_tree_copy "$v" "$tree"
  cd "$tree"
  git init -q && git add -A && git "${git_id[@]}" commit -qm "kubevirt $v (module zip)"
  git "${git_id[@]}" am -q "$here/$v"/*.patch
  echo "   applied: $(git log --reverse --format=%s "HEAD~$(n_patches)..HEAD" | paste -sd'|')"
  kubevirt_tree_modfile "$tree" "$v"
}

tree_modfile() { kubevirt_tree_modfile "$1" "$v"; }

build_sidecar
ensure_qemu_user
for v in "${versions[@]}"; do
  tree="$work/kubevirt-$v"
  run_steps "${steps[@]}"
done
echo "== KubeVirt patch series: summary"
printf '   %s\n' "${summary[@]}"
echo "== KubeVirt patch series: OK (${versions[*]})"
