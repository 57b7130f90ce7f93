# shellcheck shell=bash
# Sourced by patches/kubevirt/test.sh (the KubeVirt releases from the Go module cache, in CI) and
# patches/kubevirt/test-main.sh (KubeVirt main and open pull requests from a git clone, outside CI): the steps
# both run on a patched tree. A step is a shell function step_<name>; each script lists the ones it runs and
# defines step_apply (how its tree is made) and tree_modfile DIR (how a tree's go.mod is made buildable here).
# The steps read the globals the scripts set: v (the series directory's name), here (patches/kubevirt), work (a
# scratch directory), tree (the patched tree), and append to summary. Defines functions only; it runs nothing.

# pass_count prints "N of M specs passed" (Ginkgo) or "N tests passed" (go test -v) from a test log.
pass_count() {
  local specs
  # `|| true`: a plain go test log has no Ginkgo line, and a failing pipeline here would fire the caller's ERR trap.
  specs=$(grep -aoE '^Ran [0-9]+ of [0-9]+ Specs|[0-9]+ Passed' <<<"$1" | head -2 | paste -sd' ' || true)
  if [ -n "$specs" ]; then
    sed -E 's/^Ran ([0-9]+) of ([0-9]+) Specs ([0-9]+) Passed$/\3 passed (\1 of \2 specs ran)/' <<<"$specs"
  else
    echo "$(grep -acE '^\s*--- PASS' <<<"$1") tests passed"
  fi
}

n_patches() { ls "$here/$v"/*.patch | wc -l; }

# ensure_qemu_user: KubeVirt's cache writer chowns what it writes to the user "qemu"
# (pkg/ephemeral-disk-utils/utils.go DefaultOwnershipManager), which KubeVirt's own test images have; a fresh
# machine has none, and patch 0002's specs write virt-handler's own cache entry ("failed to look up user qemu"
# on a fresh CI machine). Created as test/guest creates it: a system user, uid 107 when free.
ensure_qemu_user() {
  getent passwd qemu >/dev/null && return 0
  local uid=()
  getent passwd 107 >/dev/null || uid=(--uid 107)
  PATH=$PATH:/usr/sbin:/sbin useradd --system --no-create-home --user-group --shell /usr/sbin/nologin "${uid[@]}" qemu ||
    { echo "KubeVirt's tests need a user qemu, and useradd failed (run as root, as .ci/run does)"; return 1; }
  echo "== created system user qemu (KubeVirt's cache writer chowns to it)"
}

# build_sidecar builds the sidecar the differential test drives (render) into $work and exports its path.
build_sidecar() {
  echo "== build the sidecar (for the differential test)"
  (cd "$repo" && CGO_ENABLED=0 go build -o "$work/sriov-udn-binding" ./cmd/sidecar)
  export SRIOV_UDN_SIDECAR="$work/sriov-udn-binding"
}

step_build_virt_handler() {
  echo "== KubeVirt $v: go build ./cmd/virt-handler (patched)"
  local start=$SECONDS
  go build -o "$work/virt-handler-$v" ./cmd/virt-handler
  echo "   built virt-handler: $(stat -c %s "$work/virt-handler-$v") bytes in $((SECONDS - start)) s"
  summary+=("$v cmd/virt-handler: built")
}

step_kubevirt_tests() {
  echo "== KubeVirt $v: KubeVirt's own tests (patched tree)"
  local p out
  for p in "${kubevirt_test_pkgs[@]}"; do
    out=$(go test -count=1 -v "$p" -ginkgo.no-color 2>&1) || { echo "$out" | tail -60; echo "FAIL: $p on patched $v"; return 1; }
    echo "   $p: $(pass_count "$out")"
    summary+=("$v $p: $(pass_count "$out")")
  done
}

step_stock_specs() {
  echo "== KubeVirt $v: stock netstat specs against the patched code (red only where intended)"
  local out got want
  git show "HEAD~$(n_patches):pkg/network/setup/netstat_test.go" > pkg/network/setup/netstat_test.go
  out=$(go test -count=1 -v ./pkg/network/setup/ -ginkgo.no-color 2>&1 || true)
  got=$(echo "$out" | sed -n 's/^  \[FAIL\] \(.*\)$/\1/p' | sed 's/ *$//' | sort -u)
  want=$(grep -v '^#' "$here/$v/expected-stock-failures.txt" | sort -u)
  echo "   $(echo "$out" | grep -aE '^Ran [0-9]+ of [0-9]+ Specs' | head -1); specs red on the patched code: $(echo "$got" | grep -c .)"
  if [ "$got" != "$want" ]; then
    echo "stock specs failing on patched $v differ from $v/expected-stock-failures.txt:"; diff <(echo "$want") <(echo "$got") || true; return 1
  fi
  echo "   failing stock specs are exactly the $(echo "$want" | wc -l) intended ones"
  summary+=("$v stock netstat specs on patched code: exactly the $(echo "$want" | wc -l) intended failures")
  git checkout -q pkg/network/setup/netstat_test.go
}

step_difftest() {
  echo "== KubeVirt $v: differential test, built sidecar's entries, stock vs patched NetStat"
  local flavor dir out
  git worktree add -q "$work/stock-$v" "HEAD~$(n_patches)"
  tree_modfile "$work/stock-$v"
  for flavor in stock patched; do
    dir="$tree"; [ "$flavor" = stock ] && dir="$work/stock-$v"
    cp "$here"/testdata/difftest/*.go "$dir/pkg/network/setup/"
    out=$(cd "$dir" && go test -count=1 -tags "sriovudn_$flavor" -run '^TestSidecarDiff$' -v ./pkg/network/setup/ 2>&1) || { echo "$out" | tail -40; echo "FAIL: differential test, $flavor $v"; return 1; }
    echo "$out" | grep -aE 'NetStat reported|--- PASS: TestSidecarDiff ' | sed "s/^ */   $flavor: /"
    summary+=("$v difftest ($flavor NetStat): $(grep -acE '^\s*--- PASS: TestSidecarDiff/' <<<"$out") scenarios passed")
  done
}

# step_replug runs KubeVirt's own suites of the packages patch 0003 touches (VF re-plug of a binding plugin with
# the hostdev-replug migration method): pkg/network/vmispec, virt-launcher's SR-IOV hostdev package and
# virt-handler, whose vm_hostdevreplug_test.go drives hotplugSriovInterfaces on the target after a migration and
# on the source after a failed one. Every stock spec of those packages must stay green: 0003 changes nothing for
# bindings without the method or for core SR-IOV. (virt-handler imports pkg/controller: on v1.9.0 the tree's
# go.mod has the third_party fallback from kubevirt_tree_modfile where the proxy refuses it.)
step_replug() {
  echo "== KubeVirt $v: patch 0003 (hostdev-replug): KubeVirt's own suites"
  local p out
  cd "$tree"
  for p in "${kubevirt_replug_pkgs[@]}"; do
    out=$(go test -count=1 -v "$p" -ginkgo.no-color 2>&1) || { echo "$out" | tail -60; echo "FAIL: $p on patched $v"; return 1; }
    echo "   $p: $(pass_count "$out")"
    summary+=("$v $p: $(pass_count "$out")")
  done
  out=$(go test -count=1 -v ./pkg/virt-handler/ -ginkgo.no-color -ginkgo.focus 'hostdev-replug' 2>&1) || { echo "$out" | tail -40; return 1; }
  echo "   virt-handler, hostdev-replug specs: $(pass_count "$out")"
  summary+=("$v virt-handler hostdev-replug specs: $(pass_count "$out")")
}

# step_nichotplug (patch 0005): KubeVirt's suite of virt-launcher's pkg/virt-launcher/virtwrap/network on the
# patched tree, every spec green (0005's included: a binding plugin interface without a domain attachment is not
# hot-plugged, and network.Sync still hot-unplugs and updates link states beside it); then that package as it was
# before 0005, with 0005's new manager_test.go only: its network.Sync specs must fail (the dummy-domain error,
# returned before hot-unplug and link state), showing the test catches what 0005 fixes.
step_nichotplug() {
  echo "== KubeVirt $v: patch 0005 (no NIC hot-plug of a binding plugin interface without a domain attachment)"
  local p out c dir=pkg/virt-launcher/virtwrap/network start=$SECONDS n
  cd "$tree"
  for p in "${kubevirt_nichotplug_pkgs[@]}"; do
    out=$(go test -count=1 -v "$p" -ginkgo.no-color 2>&1) || { echo "$out" | tail -60; echo "FAIL: $p on patched $v"; return 1; }
    echo "   $p: $(pass_count "$out")"
    summary+=("$v $p: $(pass_count "$out")")
  done
  c=$(git log -1 --format=%H -- "$dir/manager_test.go")
  case "$(git log -1 --format=%s "$c")" in
    *"never hot-plug a binding-plugin interface"*) ;;
    *) echo "the commit adding $dir/manager_test.go is not patch 0005: $(git log -1 --oneline "$c")"; return 1 ;;
  esac
  # The package's files as before 0005; manager_test.go, new in 0005, is not in that tree and stays.
  git checkout -q "$c~1" -- "$dir"
  out=$(go test -count=1 -v "./$dir/" -ginkgo.no-color -ginkgo.focus 'binding plugin interface without a domain attachment' 2>&1 || true)
  git checkout -q HEAD -- "$dir"
  n=$(sed -nE 's/^Ran ([0-9]+) of [0-9]+ Specs.*/\1/p' <<<"$out" | head -1)
  if [ -z "$n" ] || [ "$n" -eq 0 ] || ! grep -qE "0 Passed \| $n Failed" <<<"$out" ||
    ! grep -q 'could not retrieve the api.Interface object from the dummy domain' <<<"$out"; then
    echo "$out" | tail -40; echo "0005's network.Sync specs did not all fail with the dummy-domain error on the code before 0005"; return 1
  fi
  echo "   0005's network.Sync specs on the code before 0005: red, $n of $n failed (\"could not retrieve the api.Interface object from the dummy domain\")"
  summary+=("$v before 0005: its network.Sync specs red ($n of $n failed, the dummy-domain error)")
  echo "   step took $((SECONDS - start)) s"
}

# run_steps runs the steps named in "$@" for series $v on tree $tree, each failure naming its step.
run_steps() {
  local step release_start=$SECONDS
  for step in "$@"; do
    # No `|| ...` here: it would switch off set -e inside the step.
    trap 'echo "FAIL: KubeVirt $v, step $step"' ERR
    "step_$step"
    trap - ERR
  done
  echo "== KubeVirt $v: every step passed in $((SECONDS - release_start)) s"
  cd "$here"
}
