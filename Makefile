# sriov-udn-binding: KubeVirt network binding plugin sidecar for SR-IOV VFs on OVN-K UDNs.
# `make help` lists the targets.

SHELL        := /bin/bash
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN          ?= bin/sriov-udn-binding
IMAGE        ?= ghcr.io/sriov-udn-binding/sriov-udn-binding:$(VERSION)
E2E_IMAGE    ?= sriov-udn-binding:e2e
CONTAINER_TOOL ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || echo docker)
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.8.2
LDFLAGS      := -s -w -X main.version=$(VERSION)
# grpcnotrace drops gRPC's golang.org/x/net/trace and with it text/template, whose reflection keeps
# every exported method of every linked type: 12.0 -> 8.7 MB binary, 2.7 MiB fewer binary pages in idle RSS
# (test/bench/README.md).
# The same tags are in images/Containerfile and test/internal/harness (BuildTags); a test compares them.
GOTAGS       := grpcnotrace
# Go modules that hold tests: the sidecar, the integration/guest module, the manifests module.
MODULES      := . test test/manifests

.PHONY: help build test test-unit test-integration test-manifests test-guest demo bench bench-largest bench-micro lint fuzz image e2e clean

help: ## list targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## static sidecar binary at $(BIN)
	CGO_ENABLED=0 go build -trimpath -tags '$(GOTAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sidecar

test: ## every test: unit, integration (KubeVirt hook Manager, kubelet AtomicWriter, cloud-init), guest boot
	go vet ./...
	go test -count=1 ./...
	cd test && go vet ./... && go vet -tags e2e ./...
	$(MAKE) test-integration
	$(MAKE) test-manifests
	$(MAKE) test-controlplane
	$(MAKE) test-guest

test-unit: ## unit tests of the sidecar module only
	go test -count=1 ./...

test-integration: ## the test/ module without the guest boot
	cd test && go test -count=1 $$(go list ./... | grep -v /guest)

test-guest: ## boot a real Debian guest with cloud-init on the ISO KubeVirt builds from our output
	cd test && go test -count=1 -timeout 30m -v ./guest/...

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

lint: ## gofmt, go vet, staticcheck (pinned) on every module
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do echo "== $$m"; (cd $$m && go vet ./... && go run $(STATICCHECK) ./...); done

fuzz: ## run every fuzz target for FUZZTIME each (default 60s)
	@set -e; for pkg in $$(go list ./...); do for f in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do echo "== $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-60s} $$pkg; done; done

test-manifests: ## manifests decode strictly, kustomize builds, admission policy verdicts
	cd test/manifests && go vet ./... && go test -count=1 ./...

test-controlplane: ## manifests/ on a real kube-apiserver + etcd: kubectl apply -k, policy verdicts, the launcher pod KubeVirt renders
	cd test/controlplane && go vet ./... && go test -count=1 -timeout 20m ./...

image: ## container image (IMAGE=..., VERSION=..., CONTAINER_TOOL=docker|podman)
	$(CONTAINER_TOOL) build -f images/Containerfile --build-arg VERSION=$(VERSION) -t $(IMAGE) .

e2e: ## kind end-to-end suite: needs docker, kind, kubectl and network; 20-40 min; not run in CI
	$(MAKE) image IMAGE=$(E2E_IMAGE) CONTAINER_TOOL=docker
	cd test && E2E_IMAGE=$(E2E_IMAGE) go test -tags e2e -count=1 -timeout 60m -v ./e2e/...

clean: ## remove build outputs
	rm -rf bin
