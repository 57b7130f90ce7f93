# sriov-udn-binding: KubeVirt network binding plugin sidecar for SR-IOV VFs on OVN-K UDNs.
# `make help` lists the targets.

SHELL        := /bin/bash
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN          ?= bin/sriov-udn-binding
IMAGE        ?= ghcr.io/sriov-udn-binding/sriov-udn-binding:$(VERSION)
E2E_IMAGE    ?= sriov-udn-binding:e2e
# The image `make image-local` builds with no registry, and the podman it uses (test/container passes its own
# storage root and runtime here).
LOCAL_IMAGE  ?= localhost/sriov-udn-binding:$(VERSION)
PODMAN       ?= podman
CONTAINER_TOOL ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || echo docker)
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# golangci-lint v2.15.0 builds with Go 1.26; `go run pkg@version` caches the built tool after the first run.
GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
# actionlint checks .github/workflows (the release workflow); built from the Go module proxy like the two above.
ACTIONLINT   := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
LDFLAGS      := -s -w -X main.version=$(VERSION)
# grpc-go's own build tag that leaves out golang.org/x/net/trace (and with it html/template, whose reflection
# keeps every exported method linked): the binary 12.3 -> 9.0 MB, PSS with 4 copies idle 4.5 -> 3.9 MiB, idle
# private memory unchanged (docs/footprint.md). The sidecar never sets grpc.EnableTracing.
BUILDTAGS    := grpcnotrace
# Defined here only: images/Containerfile and test/internal/harness build through `make build`.
# Go modules that hold Go code: the sidecar and the tests (test/: every suite, the manifests and control plane ones
# and test/plugin included). The tools-only Kubernetes modules and the libnbd stub hold none.
MODULES      := . test
# KubeVirt versions the tests run against: test/go.mod pins the first, each other one has go.kubevirt-<V>.mod/.sum
# beside it, derived by .ci/kubevirt-modfiles (`make modfiles` writes them, `make modfiles-check` fails when stale).
KUBEVIRT_EXTRA    := v1.9.0
KUBEVIRT_VERSIONS  = $(shell .ci/kubevirt-modfiles base) $(KUBEVIRT_EXTRA)

# for_kubevirt runs, in test/, the shell command $(3) once per KubeVirt version, with v (the version), mf (its
# -modfile flag, empty for test/go.mod) and pkgs (the packages matching $(1), less those matching the regexp
# $(2), that build with it) set, and KUBEVIRT_VERSION exported; $(4) names the step in the log.
# Every version runs even when an earlier one failed; the step fails at the end if any did.
define for_kubevirt
	@set -euo pipefail; cd test; failed=""; for v in $(KUBEVIRT_VERSIONS); do \
	  mf=$$(../.ci/kubevirt-modfiles flag $$v); pkgs=$$(../.ci/kubevirt-modfiles packages $$v '$(1)' '$(2)'); \
	  echo "== KubeVirt $$v ($${mf:-go.mod}): $(4): $$(echo $$pkgs | wc -w) packages"; \
	  if [ -z "$$pkgs" ]; then echo "== KubeVirt $$v: $(4): nothing to run (left out above)"; continue; fi; \
	  export KUBEVIRT_VERSION=$$v; \
	  if $(3); then echo "== KubeVirt $$v: $(4): passed"; else echo "== KubeVirt $$v: $(4): FAILED"; failed="$$failed $$v"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "== $(4) failed on KubeVirt$$failed"; exit 1; fi
endef

.PHONY: help build build-floor check-build test-cluster cluster-up cluster-down check test test-unit tidy-check generate generate-check test-integration test-manifests test-plugin test-guest test-vfio test-netconvert test-libvirt test-kubevirt-patches test-docs test-release release test-vet-matrix modfiles modfiles-check demo bench bench-largest bench-micro lint fuzz image image-local test-container e2e clean

help: ## list targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## static sidecar binary at $(BIN) (the image and the test harness build through this target)
	CGO_ENABLED=0 go build -trimpath -tags '$(BUILDTAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sidecar

# make bench's floor: the design card's libraries alone (test/bench/floor: grpc-go serving KubeVirt's hook types
# with handlers that do nothing), built as $(BIN) is, with the root module's versions: an overlay places its
# source at cmd/bench-floor, which does not exist in the tree.
FLOOR_BIN    ?= bin/bench-floor
build-floor: ## make bench's memory floor (the design card's libraries alone) at $(FLOOR_BIN)
	@set -euo pipefail; ov=$$(mktemp); trap 'rm -f $$ov' EXIT; \
	  printf '{"Replace":{"%s":"%s"}}' '$(CURDIR)/cmd/bench-floor/main.go' '$(CURDIR)/test/bench/floor/main.go' > $$ov; \
	  CGO_ENABLED=0 go build -overlay $$ov -trimpath -tags '$(BUILDTAGS)' -ldflags '$(LDFLAGS)' -o $(FLOOR_BIN) ./cmd/bench-floor

check-build: ## fail unless $(BIN) is static, serves grpc-go with KubeVirt's own hook packages (and links no Kubernetes API types), and is stamped with $(VERSION) (reads, never runs it)
	go version -m $(BIN) | grep -q 'CGO_ENABLED=0'
	go version -m $(BIN) | grep -qE '^\s+dep\s+google\.golang\.org/grpc\s' || { echo "$(BIN) does not link google.golang.org/grpc"; exit 1; }
	go version -m $(BIN) | grep -qE '^\s+dep\s+kubevirt\.io/kubevirt\s' || { echo "$(BIN) does not link kubevirt.io/kubevirt"; exit 1; }
	@for p in info v1alpha2 v1alpha3; do grep -qaF "kubevirt.io/kubevirt/pkg/hooks/$$p." $(BIN) || { echo "$(BIN) does not link kubevirt.io/kubevirt/pkg/hooks/$$p"; exit 1; }; done
	! go version -m $(BIN) | grep -E '^\s+dep\s+(kubevirt\.io/api|k8s\.io/)'
	grep -qaF -- '$(VERSION)' $(BIN)

# make test runs two lanes after test-integration (.ci/beside); either failing fails make test after both have
# run, and every suite of a lane runs even if one before it failed. The guest lane: the guest boots (TCG: one qemu
# thread per guest), libvirt's checks on the domains test-integration and test-guest recorded, then
# test-controlplane's Kubernetes 1.36.3 (its own build: no compile shared with 1.34.2) with a kubectl of its own
# (the main lane may be running bin/kubectl); its log is printed whole when it ends. The main lane starts with the
# cluster, whose tests mostly wait (VMs, restarts, outages) beside the guest boots; the compiling suites after it
# fill the cores the guest lane's tail leaves.
test: ## every test: unit, integration (KubeVirt hook Manager, kubelet AtomicWriter, cloud-init), guest boot, libvirt's checks
	go vet ./...
	go test -race -count=1 ./...
	$(MAKE) test-netconvert
	$(MAKE) modfiles-check
	$(MAKE) test-vet-matrix
	rm -rf $(DOMAIN_RECORD_DIR)
	SRIOV_UDN_DOMAIN_RECORD_DIR=$(DOMAIN_RECORD_DIR) $(MAKE) test-integration
	.ci/beside bin/test-guest.log 'rc=0; SRIOV_UDN_DOMAIN_RECORD_DIR=$(DOMAIN_RECORD_DIR) $(MAKE) --no-print-directory test-guest || rc=$$?; SRIOV_UDN_DOMAIN_RECORD_DIR=$(DOMAIN_RECORD_DIR) $(MAKE) --no-print-directory test-libvirt || rc=$$?; $(MAKE) --no-print-directory test-controlplane KUBE_VERSIONS=1.36.3 KUBECTL=$(CURDIR)/bin/kubectl-beside || rc=$$?; exit $$rc' \
	  'rc=0; for t in test-manifests test-cluster test-kubevirt-patches "test-controlplane KUBE_VERSIONS=1.34.2" test-docs test-plugin test-container test-release; do $(MAKE) --no-print-directory $$t || rc=$$?; done; exit $$rc'

test-unit: ## unit tests of the sidecar module only, under the race detector
	go test -race -count=1 ./...

check: lint test-unit ## make lint, then the sidecar module's unit tests under -race; no root, qemu or network. Not quick when cold: lint builds both linters and vets every test module (about 30 min on 2 cores); make test-unit is the quick loop

test-integration: ## the test/ module without the guest boot, the container, libvirt's checks and the suites of their own targets (manifests, control plane, plugin), once per KubeVirt version (KUBEVIRT_VERSIONS)
	$(call for_kubevirt,./...,/(guest|container|libvirt|manifests|controlplane|plugin)$$,go test $$mf -count=1 $$pkgs,go test)

# Where test-integration and test-guest leave each domain the sidecar returned through KubeVirt's hook Manager
# (test/internal/harness RecordDomain) for test-libvirt; `make test` empties it first.
DOMAIN_RECORD_DIR ?= $(CURDIR)/bin/recorded-domains

# The registry-free single-node cluster (test/cluster): Kubernetes v1.34.2 built from test/cluster/kubernetes and
# KubeVirt v1.8.4 from the module cache (both cached under /var/cache/sriov-udn-binding/cluster), etcd, containerd,
# libvirt and qemu from trixie roots, the node in namespaces of this host; torn down after the tests, then the host
# is checked for anything it left. Needs root (without it the suite skips, saying so). `make test` runs it last in
# the lane beside the guest boots: its Kubernetes build mostly links (test-controlplane compiled it with the same
# command line), its patched virt-handler reuses test-kubevirt-patches' compile, and its VMs boot under TCG like test-guest's.
test-cluster: ## the registry-free single-node Kubernetes cluster of test/cluster (node in namespaces, no registry); needs root
	cd test && SRIOV_UDN_CLUSTER=1 go test -count=1 -v -timeout 60m ./cluster/

# cluster-up brings test/cluster's cluster up (its node, KubeVirt, our binding registered) and leaves it running
# in a process of its own, whose files are under CLUSTER_STATE; cluster-down stops it, takes the node down and
# fails when the host holds anything the node left. CLUSTER_KUBEVIRT=patched runs virt-handler and virt-launcher
# built with patches/kubevirt. Root only.
CLUSTER_STATE    ?= $(CURDIR)/bin/cluster
CLUSTER_KUBEVIRT ?= stock
cluster-up: ## bring test/cluster's cluster up and keep it (CLUSTER_KUBEVIRT=stock|patched); prints KUBECONFIG=; needs root
	@set -eu; st=$(CLUSTER_STATE); mkdir -p $$st; \
	if [ -e $$st/pid ] && kill -0 "$$(cat $$st/pid)" 2>/dev/null; then echo "cluster-up: a cluster is up (pid $$(cat $$st/pid)): make cluster-down first"; exit 1; fi; \
	rm -f $$st/pid $$st/kubeconfig $$st/exit; \
	(cd test && go test -c -o $$st/cluster.test ./cluster/); \
	(cd test/cluster && SRIOV_UDN_CLUSTER=1 SRIOV_UDN_CLUSTER_UP=$$st CLUSTER_KUBEVIRT=$(CLUSTER_KUBEVIRT) exec setsid $$st/cluster.test) >$$st/log 2>&1 </dev/null & echo $$! >$$st/pid; \
	echo "cluster-up: building and starting (pid $$(cat $$st/pid), log $$st/log); cold, the builds take about 15 min"; \
	while [ ! -e $$st/kubeconfig ]; do \
	  if ! kill -0 "$$(cat $$st/pid)" 2>/dev/null; then echo "cluster-up: failed; the log ends:"; tail -30 $$st/log; rm -f $$st/pid; exit 1; fi; \
	  sleep 2; \
	done; \
	echo "KUBECONFIG=$$st/kubeconfig"; echo "kubectl: $$st/kubectl"

cluster-down: ## stop the cluster of cluster-up, take its node down and check the host for leftovers
	@set -eu; st=$(CLUSTER_STATE); \
	if [ ! -e $$st/pid ]; then echo "cluster-down: no cluster is up ($$st/pid)"; exit 1; fi; \
	pid=$$(cat $$st/pid); kill -TERM $$pid 2>/dev/null || true; \
	while kill -0 $$pid 2>/dev/null; do sleep 1; done; \
	rm -f $$st/pid; sed -n '/taking the cluster down/,$$p' $$st/log; \
	test "$$(cat $$st/exit 2>/dev/null)" = 0 || { echo "cluster-down: the node's teardown failed (exit $$(cat $$st/exit 2>/dev/null || echo unknown)); log: $$st/log"; exit 1; }; \
	echo "cluster-down: the node is down and left nothing on the host"

test-libvirt: ## libvirt 11.3's own checks (virt-xml-validate, virsh define) on the sidecar's domains, recorded ones included (SRIOV_UDN_DOMAIN_RECORD_DIR)
	$(call for_kubevirt,./libvirt/...,,go test $$mf -count=1 -timeout 30m -v $$pkgs,libvirt checks)

# The VF scenarios of test-guest run on these KubeVirt versions only: the VF adds nothing version-specific
# (the virtio scenarios run the pre-start path on every version), and each costs minutes of TCG.
GUEST_VF_KUBEVIRT_VERSIONS ?= $(shell .ci/kubevirt-modfiles base)

# The guest matrix (test/guest ImageMatrix x scenarios) boots on the first KubeVirt version; the others get the
# smoke boots (GUEST_MATRIX=smoke): the KubeVirt code a guest sees (ISO generator, hook Manager) is the same in each.
test-guest: ## boot real Debian 12/13 guests (networkd, NetworkManager) on the ISO KubeVirt builds from our output: full matrix on the first KubeVirt version, smoke on the others; real igb VFs under qemu 10 (GUEST_VF_KUBEVIRT_VERSIONS)
	$(call for_kubevirt,./guest/...,,GUEST_VF_KUBEVIRT_VERSIONS="$(GUEST_VF_KUBEVIRT_VERSIONS)" GUEST_MATRIX=$${GUEST_MATRIX:-$$(if [ "$$v" = "$(firstword $(KUBEVIRT_VERSIONS))" ]; then echo full; else echo smoke; fi)} go test $$mf -count=1 -timeout 75m -v $$pkgs,guest boot)

test-netconvert: ## the net-convert harness (pkg/cloudinit) on trixie's cloud-init 25.1.4, chrooted into a cached root (needs root; test-unit runs it on the host's 22.4.2)
	@if [ "$$(id -u)" -ne 0 ]; then echo "== test-netconvert: skipped: needs root (debootstrap and chroot into the trixie root)"; exit 0; fi; \
	  set -euo pipefail; root=$$(cd test && go run ./cmd/cloudinit-root); \
	  echo "== net-convert harness on $$(chroot $$root /usr/bin/cloud-init --version) in $$root"; \
	  CLOUDINIT_NETCONVERT_ROOT=$$root go test -count=1 -run 'NetConvert|ConfigDrive_BootEvent' ./pkg/cloudinit/

test-vfio: ## VFIO end to end alone (test-guest runs it too): a node guest (qemu 10, TCG, virtual IOMMU) binds an igb VF to vfio-pci, libvirt 11.3 starts a nested busybox guest with the sidecar's <hostdev>
	cd test && go test -count=1 -timeout 30m -v -run 'TestGuestVFIO_' ./guest/

# The e2e tag is vetted on test/e2e alone, the only package with files behind it (the recipe fails if another
# gets one): go vet hands -tags to its analyzers, so the tag is part of every vet result's cache key, and vetting
# all of test/ with it analysed each of its 1,250 dependencies again (3.3 min cold, for files that do not change).
test-vet-matrix: ## go vet the test/ module (test/plugin from v1.9.0 on, test/e2e with its e2e tag) against each KubeVirt version
	$(call for_kubevirt,./...,,go vet $$mf $$pkgs,go vet)
	$(call for_kubevirt,./plugin,,go vet $$mf $$pkgs,go vet test/plugin)
	@other=$$(grep -rlE --include='*.go' '^//go:build.*\be2e\b' test | grep -v '^test/e2e/' || true); \
	  if [ -n "$$other" ]; then echo "files behind the e2e tag outside test/e2e (add them to test-vet-matrix):"; echo "$$other"; exit 1; fi
	$(call for_kubevirt,./e2e/...,,GOFLAGS="$${GOFLAGS:-} -tags=e2e" go vet $$mf $$pkgs,go vet -tags e2e)

modfiles: ## regenerate test/go.kubevirt-<V>.mod/.sum from test/go.mod (after changing it)
	.ci/kubevirt-modfiles generate $(KUBEVIRT_EXTRA)

modfiles-check: ## fail when a test/go.kubevirt-<V>.mod/.sum differs from what `make modfiles` writes, or test/ builds a module at another version than KubeVirt's own go.mod
	.ci/kubevirt-modfiles check $(KUBEVIRT_EXTRA)

test-kubevirt-patches: ## apply patches/kubevirt/* to KubeVirt v1.8.4 and v1.9.0, build virt-handler for both, run their network tests and the differential test (~15 min with a warm cache)
	patches/kubevirt/test.sh

demo: ## run the sidecar's main job (render) on built-in sample data
	@echo "== make demo: building $(BIN) first (on a fresh machine this downloads the Go modules and compiles: about 2 minutes)"
	@$(MAKE) --no-print-directory build
	@echo "== ./$(BIN) render --sample: what the hooks would do for the built-in virt-launcher pod and VMI"
	./$(BIN) render --sample

bench: build ## footprint beside KubeVirt's passt sidecar: table + bin/bench.json (figures, not thresholds; needs root)
	cd test && go run ./bench/cmd/sidecarbench --ours $(abspath $(BIN)) --bin-dir $(abspath bin) --json $(abspath bin)/bench.json

bench-largest: build ## only peak RSS under the largest legal inputs (README "Limits"; needs root)
	cd test && go run ./bench/cmd/sidecarbench --only largest --ours $(abspath $(BIN)) --bin-dir $(abspath bin) --json $(abspath bin)/bench-largest.json

bench-micro: ## Go micro-benchmarks of every package
	go test -run '^$$' -bench . -benchmem ./...
	cd test && go test -run '^$$' -bench . -benchmem $$(go list ./... | grep -v /guest)

lint: tidy-check generate-check ## gofmt, go vet, staticcheck, golangci-lint (pinned; .golangci.yml: import groups, banned calls) on every module (test/plugin: go vet with KubeVirt v1.9.0); actionlint on .github/workflows
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do echo "== $$m"; (cd $$m && go vet ./... && go run $(STATICCHECK) ./... && go run $(GOLANGCI_LINT) fmt --config $(CURDIR)/.golangci.yml --diff ./...); done
	@# test/plugin builds only with the v1.9.0 modfile: go vet takes -modfile, but staticcheck (go/packages asks
	@# `go list` with GO111MODULE=off, where -modfile is refused) cannot; its format is checked as above.
	@cd test && mf=$$(../.ci/kubevirt-modfiles flag $(lastword $(KUBEVIRT_VERSIONS))) && echo "== test/plugin ($$mf)" && go vet $$mf ./plugin && \
	  go run $(GOLANGCI_LINT) fmt --config $(CURDIR)/.golangci.yml --diff ./plugin
	go run $(GOLANGCI_LINT) run ./...
	go run $(ACTIONLINT) .github/workflows/*.yaml

# The Go protobuf plugins that generate pkg/hooks/pluginv1alpha1 and pkg/hooks/requestpb; protoc itself is Debian's
# protobuf-compiler (3.21.12 on bookworm), which .ci/run installs.
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
PROTOS             := pkg/hooks/pluginv1alpha1/api.proto pkg/hooks/requestpb/request.proto

generate: ## regenerate pkg/hooks' protobuf code from its .proto files (protoc, and the Go plugins pinned here)
	@mkdir -p bin/protoc-plugins
	GOBIN=$(CURDIR)/bin/protoc-plugins go install $(PROTOC_GEN_GO)
	GOBIN=$(CURDIR)/bin/protoc-plugins go install $(PROTOC_GEN_GO_GRPC)
	protoc --plugin=protoc-gen-go=bin/protoc-plugins/protoc-gen-go --plugin=protoc-gen-go-grpc=bin/protoc-plugins/protoc-gen-go-grpc \
	  --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative $(PROTOS)

generate-check: ## fail when `make generate` would change the generated protobuf code
	@$(MAKE) --no-print-directory generate >/dev/null
	@if ! git diff --quiet -- $(dir $(PROTOS)); then echo "generated code is stale: run make generate"; git diff --stat -- $(dir $(PROTOS)); exit 1; fi
	@if [ -n "$$(git ls-files --others --exclude-standard -- $(dir $(PROTOS)))" ]; then echo "make generate wrote files git does not track:"; git ls-files --others --exclude-standard -- $(dir $(PROTOS)); exit 1; fi

# The kube-apiserver 1.36 module and test/cluster/kubernetes hold no Go files (only their `tool`s): nothing to vet or
# lint, but tidied too. The derived modfiles are tidied by `make modfiles` (modfiles-check).
tidy-check: ## fail when `go mod tidy` would change go.mod or go.sum of any module
	@set -e; for m in $(MODULES) test/controlplane/kube-apiserver-v1.36 test/cluster/kubernetes; do echo "== go mod tidy -diff: $$m"; (cd $$m && go mod tidy -diff); done

fuzz: ## run every fuzz target for FUZZTIME each (default 60s)
	@set -e; for pkg in $$(go list ./...); do for f in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do echo "== $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-60s} $$pkg; done; done

test-manifests: ## manifests decode strictly and kustomize builds, per KubeVirt API version (verdicts: test-controlplane)
	$(call for_kubevirt,./manifests,,go vet $$mf $$pkgs && go test $$mf -count=1 -skip '^TestRelease' $$pkgs,test/manifests)

# The kube-apiservers test-controlplane runs, and the kubectl the docs' blocks run with, each built once from
# its module's `tool` (test/cluster/kubernetes: Kubernetes 1.34.2's kube-apiserver and kubectl;
# test/controlplane/kube-apiserver-v1.36: 1.36.3, the first release that serves MutatingAdmissionPolicy v1 at its
# defaults), whatever KubeVirt version the tests link. The 1.34.2 pair is built with the command line of
# test/cluster's BuildKubernetes (module, -trimpath, CGO_ENABLED=0, version ldflags; its
# TestMakefile_BuildsKubernetesAsTheCluster holds them together), so Go's build cache serves the cluster's own
# build of Kubernetes: it compiles once.
KUBE_APISERVER      ?= $(CURDIR)/bin/kube-apiserver
KUBE_APISERVER_1_36 ?= $(CURDIR)/bin/kube-apiserver-v1.36.3
KUBECTL             ?= $(CURDIR)/bin/kubectl
KUBERNETES_LDFLAGS  := -s -w -X k8s.io/component-base/version.gitVersion=v1.34.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34
# build_kubernetes_tool BINARY OUT: one binary of test/cluster/kubernetes, as test/cluster builds it.
build_kubernetes_tool = (cd test/cluster/kubernetes && CGO_ENABLED=0 go build -trimpath -ldflags '$(KUBERNETES_LDFLAGS)' -o $(2) k8s.io/kubernetes/cmd/$(1))

# KUBE_VERSIONS: the Kubernetes releases test-controlplane runs; each kube-apiserver is built only when its
# release is among them. `make test` runs 1.34.2 in its main lane and 1.36.3 beside the guest boots.
KUBE_VERSIONS ?= 1.34.2 1.36.3

define build_controlplane_tools
	@set -euo pipefail; \
	  if [ -n "$(filter 1.34.2,$(KUBE_VERSIONS))" ]; then start=$$(date +%s); $(call build_kubernetes_tool,kube-apiserver,$(KUBE_APISERVER)); \
	  echo "== kube-apiserver $$(cd test/cluster/kubernetes && go list -m -f '{{.Version}}' k8s.io/kubernetes) built once for every KubeVirt version and the cluster in $$(( $$(date +%s) - start )) s: $(KUBE_APISERVER)"; fi; \
	  if [ -n "$(filter 1.36.3,$(KUBE_VERSIONS))" ]; then start=$$(date +%s); (cd test/controlplane/kube-apiserver-v1.36 && go build -o $(KUBE_APISERVER_1_36) k8s.io/kubernetes/cmd/kube-apiserver); \
	  echo "== kube-apiserver $$(cd test/controlplane/kube-apiserver-v1.36 && go list -m -f '{{.Version}}' k8s.io/kubernetes) built once for every KubeVirt version in $$(( $$(date +%s) - start )) s: $(KUBE_APISERVER_1_36)"; fi; \
	  start=$$(date +%s); $(call build_kubernetes_tool,kubectl,$(KUBECTL)); \
	  echo "== kubectl $$(cd test/cluster/kubernetes && go list -m -f '{{.Version}}' k8s.io/kubernetes) built in $$(( $$(date +%s) - start )) s: $(KUBECTL)"
endef

test-controlplane: ## manifests/ on real kube-apiservers 1.34.2 and 1.36.3 + etcd: docs/install.md's kubectl commands, every policy verdict, the launcher pod KubeVirt renders, per KubeVirt version
	$(build_controlplane_tools)
	$(call for_kubevirt,./controlplane,,export SRIOV_UDN_KUBE_VERSIONS="$(KUBE_VERSIONS)" SRIOV_UDN_KUBE_APISERVER=$(KUBE_APISERVER) SRIOV_UDN_KUBE_APISERVER_1_36=$(KUBE_APISERVER_1_36) SRIOV_UDN_KUBECTL=$(KUBECTL) && go vet $$mf $$pkgs && go test $$mf -count=1 -timeout 30m -skip '^TestDocs_' $$pkgs,test/controlplane)

# Once, against test/go.mod's KubeVirt (the docs do not depend on it): the same test binary as
# test-controlplane's first run, so after it nothing compiles again.
test-docs: ## the docs' shell blocks: each marked; the `here` ones run in a copy of the repository (make demo, render, kubectl kustomize), `cluster` ones parsed; links, make targets, each page says who it is for (the `controlplane` ones run in test-controlplane)
	@set -euo pipefail; start=$$(date +%s); $(call build_kubernetes_tool,kubectl,$(KUBECTL)); \
	  echo "== kubectl built in $$(( $$(date +%s) - start )) s: $(KUBECTL)"
	cd test && SRIOV_UDN_KUBECTL=$(KUBECTL) go test -count=1 -timeout 20m -v -run '^TestDocs_' ./controlplane

test-plugin: ## the Plugin API domain hook (KubeVirt v1.9.0's ApplyDomainHooks and client) on the built binary, beside the hook Manager; from v1.9.0 on (test/go.mod ignores test/plugin)
	$(call for_kubevirt,./plugin,,go vet $$mf $$pkgs && go test $$mf -count=1 -timeout 10m $$pkgs,test/plugin)

image: ## container image, compiled in the golang image on distroless/static: needs a registry (IMAGE=..., VERSION=..., CONTAINER_TOOL=docker|podman)
	$(CONTAINER_TOOL) build -f images/Containerfile --build-arg BINARY_FROM=build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

# The same Containerfile and final stage as `image`, chosen by build args: the binary `make build` wrote, on
# scratch. It pulls nothing. The prebuilt stage copies bin/sriov-udn-binding, hence the fixed BIN.
image-local: ## the same image with no registry: scratch + the binary `make build` makes, built by podman (LOCAL_IMAGE=..., PODMAN=...)
	@$(MAKE) --no-print-directory build check-build BIN=bin/sriov-udn-binding
	$(PODMAN) build -f images/Containerfile --build-arg BINARY_FROM=prebuilt --build-arg BASE_IMAGE=scratch \
	  --build-arg VERSION=$(VERSION) -t $(LOCAL_IMAGE) .

# A release: `make release VERSION=vX.Y.Z IMAGE_REPO=registry/namespace` (docs/image.md). The image is
# $(IMAGE_REPO)/sriov-udn-binding:$(VERSION): the name keeps `sriov-udn-binding`, which the
# MutatingAdmissionPolicies find our container by. It is built as image-local builds (scratch + the static binary,
# nothing pulled: a release can be cut on an air-gapped machine) for each of $(RELEASE_ARCHES), gathered in one
# image index under that name and saved as an OCI archive, and every entry point's manifests are rendered with
# kustomize's images: transformer (manifests/kubevirt/*/kustomizeconfig.yaml) pinned to it, into $(RELEASE_DIR): one
# YAML file per entry point and Kubernetes version, one per registration, each binary and its SBOM, SHA256SUMS.
IMAGE_REPO    ?= ghcr.io/sriov-udn-binding
RELEASE_IMAGE  = $(IMAGE_REPO)/sriov-udn-binding:$(VERSION)
RELEASE_DIR   ?= $(CURDIR)/bin/release/$(VERSION)
# The architectures of the release: static Go cross-builds, each in an image of its own (scratch plus the binary:
# nothing runs at build time, so no emulation), gathered in one OCI image index.
RELEASE_ARCHES ?= amd64 arm64
# The SBOM of each binary, CycloneDX JSON, from the module list Go embeds in it (its build info).
CYCLONEDX_GOMOD ?= go run github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
# kustomize v5.7.1: the version kubectl 1.34 embeds (the one test/controlplane applies with).
KUSTOMIZE     ?= go run sigs.k8s.io/kustomize/kustomize/v5@v5.7.1
# entry point : manifests directory : components, for each release file sriov-udn-binding[-<name>]-$(VERSION).yaml;
# the registration-* files are the merge patches of the KubeVirt (or HyperConverged) CR (docs/install.md step 3),
# the only files that name the image.
RELEASE_ENTRIES := \
  :.: \
  kubernetes-1.34-1.35:.:components/kubernetes-1.34-1.35 \
  pod-info:overlays/pod-info: \
  plugin:overlays/plugin: \
  plugin-kubernetes-1.34-1.35:overlays/plugin:components/kubernetes-1.34-1.35 \
  hco:overlays/hco: \
  hco-kubernetes-1.34-1.35:overlays/hco:components/kubernetes-1.34-1.35 \
  webhook:overlays/webhook:components/webhook-cert-manager \
  hco-webhook:overlays/hco-webhook: \
  registration-kubevirt:kubevirt/device-info: \
  registration-kubevirt-pod-info:kubevirt/pod-info: \
  registration-hco:hco:

release: ## a release: image $(IMAGE_REPO)/sriov-udn-binding:$(VERSION) (vX.Y.Z) for $(RELEASE_ARCHES), built offline by podman into one OCI image index saved as an OCI archive, the binaries and their SBOMs, and the manifests of every entry point pinned to it, in $(RELEASE_DIR)
	@set -euo pipefail; \
	  if ! [[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]]; then \
	    echo "make release: VERSION=$(VERSION) is not a release version: give VERSION=vMAJOR.MINOR.PATCH (docs/image.md)"; exit 2; fi; \
	  if [ -z "$(IMAGE_REPO)" ] || [[ "$(IMAGE_REPO)" == */ ]]; then \
	    echo "make release: IMAGE_REPO=$(IMAGE_REPO): give the registry and repository the image goes to, e.g. IMAGE_REPO=registry.example.com/team"; exit 2; fi; \
	  rm -rf $(RELEASE_DIR); mkdir -p $(RELEASE_DIR)/kustomize; \
	  echo "== make release $(VERSION): $(RELEASE_IMAGE) ($(RELEASE_ARCHES)) into $(RELEASE_DIR)"; \
	  if $(PODMAN) manifest exists $(RELEASE_IMAGE) 2>/dev/null; then $(PODMAN) manifest rm $(RELEASE_IMAGE) >/dev/null; fi; \
	  $(PODMAN) manifest create $(RELEASE_IMAGE) >/dev/null; \
	  for arch in $(RELEASE_ARCHES); do \
	    ctx=$(RELEASE_DIR)/context-$$arch; mkdir -p $$ctx/bin; \
	    GOARCH=$$arch $(MAKE) --no-print-directory build check-build BIN=$$ctx/bin/sriov-udn-binding VERSION=$(VERSION); \
	    $(PODMAN) build --platform linux/$$arch -f $(CURDIR)/images/Containerfile --build-arg BINARY_FROM=prebuilt \
	      --build-arg BASE_IMAGE=scratch --build-arg VERSION=$(VERSION) -t $(RELEASE_IMAGE)-$$arch $$ctx; \
	    $(PODMAN) manifest add $(RELEASE_IMAGE) containers-storage:$(RELEASE_IMAGE)-$$arch >/dev/null; \
	    cp $$ctx/bin/sriov-udn-binding $(RELEASE_DIR)/sriov-udn-binding-$(VERSION)-linux-$$arch; \
	    $(CYCLONEDX_GOMOD) bin -json -version $(VERSION) -output $(RELEASE_DIR)/sriov-udn-binding-$(VERSION)-linux-$$arch.cdx.json \
	      $$ctx/bin/sriov-udn-binding; \
	  done; \
	  $(PODMAN) manifest push --all $(RELEASE_IMAGE) oci-archive:$(RELEASE_DIR)/sriov-udn-binding-$(VERSION).oci.tar; \
	  for entry in $(RELEASE_ENTRIES); do \
	    IFS=: read -r name dir comp <<< "$$entry"; k=$(RELEASE_DIR)/kustomize/$${name:-default}; mkdir -p $$k; \
	    { echo "apiVersion: kustomize.config.k8s.io/v1beta1"; echo "kind: Kustomization"; \
	      echo "resources: [$$(realpath --relative-to=$$k $(CURDIR)/manifests/$$dir)]"; \
	      if [ -n "$$comp" ]; then echo "components: [$$(realpath --relative-to=$$k $(CURDIR)/manifests/$$comp)]"; fi; \
	      echo "images:"; echo "  - name: ghcr.io/sriov-udn-binding/sriov-udn-binding"; \
	      echo "    newName: $(IMAGE_REPO)/sriov-udn-binding"; echo "    newTag: $(VERSION)"; } > $$k/kustomization.yaml; \
	    out=$(RELEASE_DIR)/sriov-udn-binding$${name:+-$$name}-$(VERSION).yaml; \
	    { echo "# sriov-udn-binding $(VERSION): manifests/$${dir#.}$${comp:+ + manifests/$$comp}, image $(RELEASE_IMAGE)"; \
	      case $$name in registration-*) echo "# a merge patch of the CR it names, never applied: kubectl patch -f FILE --type merge --patch-file FILE";; esac; \
	      $(KUSTOMIZE) build $$k; } > $$out; \
	    case $$name in registration-*) grep -qF 'sidecarImage: $(RELEASE_IMAGE)' $$out || { echo "make release: $$out does not name $(RELEASE_IMAGE)"; exit 1; };; esac; \
	    echo "== $$out"; \
	  done; \
	  rm -rf $(RELEASE_DIR)/context-* $(RELEASE_DIR)/kustomize; \
	  (cd $(RELEASE_DIR) && sha256sum sriov-udn-binding-* > SHA256SUMS); \
	  echo "== make release $(VERSION): done; push with: $(PODMAN) manifest push --all $(RELEASE_IMAGE) docker://$(RELEASE_IMAGE)"; ls -l $(RELEASE_DIR)

# Once: podman builds the release image in storage of its own (test/manifests release_test.go).
test-release: ## make release VERSION=v0.1.0 IMAGE_REPO=example.org/x with a podman of its own (no registry): the image, the OCI archive and every release manifest name that image (needs root, podman, runc)
	cd test && go test -count=1 -timeout 20m -v -run '^TestRelease' ./manifests

# Once, against test/go.mod's KubeVirt: the hook Manager it drives the container with is byte-identical in
# every version of the matrix (README "Upgrade path"), and test-integration drives the bare binary with each.
test-container: ## build the image offline (image-local), inspect it, run it as KubeVirt would (root, podman, runc)
	@for t in podman runc; do command -v $$t >/dev/null || { echo "test-container needs $$t (apt-get install podman runc; .ci/run does)"; exit 1; }; done
	cd test && go vet ./container/... && go test -count=1 -timeout 15m -v ./container/...

# test/e2e's suite (suite.go) on a kind cluster it makes, or, with E2E_KUBECONFIG=path, on that cluster as it is
# (test/e2e/README.md says what it needs there). make test-cluster runs the same suite on the registry-free cluster.
e2e: ## the end-to-end suite on kind (needs docker, kind, kubectl and network; 20-40 min; not run in CI), or on E2E_KUBECONFIG's cluster
	@if [ -z "$(E2E_KUBECONFIG)" ]; then $(MAKE) image IMAGE=$(E2E_IMAGE) CONTAINER_TOOL=docker; fi
	cd test && E2E_IMAGE=$(E2E_IMAGE) E2E_KUBECONFIG=$(if $(E2E_KUBECONFIG),$(abspath $(E2E_KUBECONFIG))) E2E_FIXTURES=$(if $(E2E_FIXTURES),$(abspath $(E2E_FIXTURES))) go test -tags e2e -count=1 -timeout 60m -v ./e2e/...

clean: ## remove build outputs
	rm -rf bin
