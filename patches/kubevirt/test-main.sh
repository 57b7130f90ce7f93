#!/usr/bin/env bash
# The patch series on KubeVirt trees the Go module proxy does not serve: KubeVirt main (main/, rebased on a
# pinned commit) and open pull requests the series must compose with (pr18753/: the series on #18753's head,
# which fixes CVE-2026-13318 in the same netstat code as 0001). Outside CI (CI has no git clone of KubeVirt, and
# test.sh already proves the released series); run it by hand when main or a tracked pull request moves:
#
#   patches/kubevirt/test-main.sh [TARGET...]     (default: main pr18753; about 25 min warm, 60+ cold, 2 cores)
#
# Needs a git clone of kubevirt/kubevirt holding each target's commit (tree.sh kubevirt_git_dir, KUBEVIRT_GIT_DIR),
# Go, and libvirt-dev (virt-launcher and its packages use cgo), as test.sh does; run as root (KubeVirt's cache
# specs chown to the user qemu, which it creates). Each TARGET directory has a BASE file: `commit <sha>`,
# `ref <where it came from>`, `steps <step...>`; the steps are those of steps.sh plus the ones below. The work
# directory keeps one path across runs (SRIOV_UDN_KUBEVIRT_WORK), so Go's build cache, which keys the tree's
# packages by their directory, is warm on the next run.
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(main pr18753)
work=${SRIOV_UDN_KUBEVIRT_WORK:-${TMPDIR:-/tmp}/sriov-udn-kubevirt-main}
exec 9>"$work.lock"
flock -n 9 || { echo "another test-main.sh uses $work" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod
git_id=(-c user.name=ci -c user.email=ci@localhost)
summary=()

# kubevirt_test_pkgs, kubevirt_replug_pkgs, kubevirt_launcher_pkgs, kubevirt_hotplug_pkgs, kubevirt_git_tree,
# kubevirt_git_tree_modfile
# shellcheck source=tree.sh
. "$here/tree.sh"
# shellcheck source=steps.sh
. "$here/steps.sh"

# base_field TARGET FIELD prints FIELD of TARGET/BASE.
base_field() { awk -v f="$2" '$1 == f { $1 = ""; sub(/^ /, ""); print }' "$here/$1/BASE"; }

# step_apply makes $tree: the target's commit from the git clone, the series applied with git am.
step_apply() {
  local commit
  commit=$(base_field "$v" commit)
  echo "== KubeVirt $v: $commit ($(base_field "$v" ref)), apply patches/kubevirt/$v"
  kubevirt_git_tree "$commit" "$tree"
  cd "$tree"
  echo "   base: $(git log -1 --format='%h %cs %s')"
  git "${git_id[@]}" am -q "$here/$v"/*.patch
  echo "   applied: $(git log --reverse --format=%s "HEAD~$(n_patches)..HEAD" | paste -sd'|')"
  tree_modfile "$tree"
}

tree_modfile() { kubevirt_git_tree_modfile "$1"; }

# step_build_virt_launcher: virt-launcher holds patch 0004 (hotplug.go) and the hook path (cgo: libvirt-dev).
step_build_virt_launcher() {
  echo "== KubeVirt $v: go build ${kubevirt_launcher_pkgs[*]} (patched)"
  local start=$SECONDS
  go build -o "$work/virt-launcher-$v" "${kubevirt_launcher_pkgs[@]}"
  echo "   built virt-launcher: $(stat -c %s "$work/virt-launcher-$v") bytes in $((SECONDS - start)) s"
  summary+=("$v cmd/virt-launcher: built (libnbd stub)")
}

# step_hotplug (patch 0004): KubeVirt's suite of pkg/virt-launcher/virtwrap/pci on the patched tree, all green,
# and testdata/hotplug (DisableHotplugOnOccupiedRootPorts on libvirt 11.3's read-back of our VFs' domain); then
# 0004's own spec and the read-back's SR-IOV test against the code before 0004 must fail (they assert what
# #17605 breaks), and the read-back as libvirt 11.3 returns it must match no port either way.
step_hotplug() {
  echo "== KubeVirt $v: patch 0004 (SR-IOV root ports stay hotpluggable): KubeVirt's own suite"
  local p out file=pkg/virt-launcher/virtwrap/pci/hotplug.go c
  cd "$tree"
  for p in "${kubevirt_hotplug_pkgs[@]}"; do
    out=$(go test -count=1 -v "$p" -ginkgo.no-color 2>&1) || { echo "$out" | tail -60; echo "FAIL: $p on patched $v"; return 1; }
    echo "   $p: $(pass_count "$out")"
    summary+=("$v $p: $(pass_count "$out")")
  done
  cp "$here"/testdata/hotplug/* pkg/virt-launcher/virtwrap/pci/
  out=$(go test -count=1 -v -tags sriovudn_hotplug -run '^TestLibvirtReadBack' ./pkg/virt-launcher/virtwrap/pci/ 2>&1) ||
    { echo "$out" | tail -30; echo "FAIL: libvirt 11.3 read-back on patched $v"; return 1; }
  echo "$out" | grep -aE 'ports turned off|no pcie-root-port turned off' | sed 's/^ */   patched: /'
  summary+=("$v libvirt 11.3 read-back (0004): $(pass_count "$out")")
  c=$(git log -1 --format=%H -- "$file")
  case "$(git log -1 --format=%s "$c")" in
    *"SR-IOV host devices hotpluggable"*) ;;
    *) echo "the last commit touching $file is not patch 0004: $(git log -1 --oneline "$c")"; return 1 ;;
  esac
  git show "$c~1:$file" > "$file"
  out=$(go test -count=1 -v ./pkg/virt-launcher/virtwrap/pci/ -ginkgo.no-color -ginkgo.focus 'SR-IOV host devices' 2>&1 || true)
  if ! grep -qE '^Ran 1 of [0-9]+ Specs' <<<"$out" || ! grep -qE '0 Passed \| 1 Failed' <<<"$out"; then
    git checkout -q "$file"; echo "$out" | tail -30; echo "0004's spec did not fail on the code before 0004"; return 1
  fi
  echo "   0004's spec on the code before 0004 (hotplug=\"off\" on every PCI hostdev's port): red, as intended"
  out=$(go test -count=1 -v -tags sriovudn_hotplug -run '^TestLibvirtReadBack' ./pkg/virt-launcher/virtwrap/pci/ 2>&1 || true)
  git checkout -q "$file"
  rm -f pkg/virt-launcher/virtwrap/pci/readback_test.go pkg/virt-launcher/virtwrap/pci/libvirt-11.3-readback.xml
  if ! grep -qE -- '--- PASS: TestLibvirtReadBack_AsLibvirt113ReturnsIt_NoPortMatches' <<<"$out" ||
    ! grep -qE -- '--- FAIL: TestLibvirtReadBack_PortsKeyedByTheirBus_SRIOVPortsStayHotpluggable' <<<"$out"; then
    echo "$out" | tail -30; echo "the read-back tests on the code before 0004 did not pass (no busNr) and fail (ports by bus) as intended"; return 1
  fi
  echo "$out" | grep -aE 'its root port has hotplug off' | sed 's/^ */   before 0004: /'
  summary+=("$v before 0004: its spec red (1 of 1 failed); read-back keyed by bus: SR-IOV ports off (red); as libvirt 11.3 returns it: no port off")
}

build_sidecar
ensure_qemu_user
for v in "${targets[@]}"; do
  [ -f "$here/$v/BASE" ] || { echo "no $here/$v/BASE"; exit 2; }
  tree="$work/kubevirt-$v"
  read -ra steps <<<"$(base_field "$v" steps)"
  run_steps "${steps[@]}"
done
echo "== KubeVirt patch series (git trees): summary"
printf '   %s\n' "${summary[@]}"
echo "== KubeVirt patch series (git trees): OK (${targets[*]})"
