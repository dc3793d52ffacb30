# The appliance: `make run` runs the lab on its embedded default, `make test`
# runs the test suite. Both build or install what they need.
SHELL := /bin/bash
GO ?= go
BIN := bin/appliance
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/rdma-appliance/appliance/appliance/cli.version=$(VERSION)
BENCHTIME ?= 1s
FUZZTIME ?= 10s
APT_INSTALL = DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends
export GONOSUMDB := github.com/yerden/go-dpdk

.PHONY: all build run test race pooldebug bench fuzz lint p4check p4verify deps-test build-dpdk test-dpdk build-rdma test-rdma deps-dpdk deps-rdma deps-bench clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./appliance/cmd/appliance

## run: the main job, the in-process lab on its embedded default.
run: build
	./$(BIN) lab

## test: the P4 programs through p4c's front end and bf-p4c (p4verify), vet, unit/integration tests (netns
## tests run as root). Chromium, for the HTML reports' screenshot test, is installed when missing and root (the
## test skips without it).
test: p4verify deps-test
	$(GO) vet ./...
	$(GO) test -count=1 ./...

race:
	$(GO) test -count=1 -race ./dpdk/... ./verbs/... ./dumper/... ./internal/... ./appliance/... ./translator/dtatranslator

## pooldebug: the packet-path packages with every freed pool buffer poisoned and checked when handed
## out again (pool memory is outside the Go heap, so the race detector does not see a use after free).
pooldebug:
	$(GO) test -count=1 -tags pooldebug ./dpdk/... ./verbs/... ./translator/... ./dumper/... ./collector/... ./appliance/lab

## p4verify: every P4 program under p4/ through p4c's front end, then bf-p4c for Tofino 1 and 2 (results cached
## per program, build and compiler in ~/.cache/appliance-p4check); fails when one does not fit, or when README.md's
## resource table or a program's p4testgen tests are stale. Skipped where ../shared is absent.
p4verify:
	@./p4/check.sh

## p4check: p4verify that rewrites README.md's resource table and regenerates the p4testgen tests of programs that
## changed.
p4check:
	@./p4/check.sh -update

## bench: every benchmark with rates; installs the peers it compares against. One package at a time
## (-p 1), so no benchmark shares the machine with another. Then, built with the dpdk tag, the dumper on
## net_null against dpdk-testpmd (x-vs-testpmd).
bench: deps-bench
	$(GO) test -p 1 -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) ./... | tee bench.out
	@if pkg-config --exists libdpdk 2>/dev/null; then \
	  echo "$(GO) test -tags dpdk -run='^$$' -bench='VsTestpmd$$' -benchmem ./dumper"; \
	  $(GO) test -tags dpdk -run='^$$' -bench='VsTestpmd$$' -benchmem ./dumper | tee -a bench.out; \
	else echo "libdpdk-dev missing: the dumper's DPDK benchmark (x-vs-testpmd) is skipped"; fi

deps-test:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -q >/dev/null && $(APT_INSTALL) chromium >/dev/null; } || echo "chromium missing: the HTML report screenshot test will skip"

deps-bench:
	@command -v tcpdump >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -q && $(APT_INSTALL) tcpdump; } || echo "tcpdump missing: its side of the capture benchmark will skip"
	@command -v zstd >/dev/null || { [ "$$(id -u)" = 0 ] && $(APT_INSTALL) zstd; } || echo "zstd missing: its side of the pcap benchmark will skip"
	@command -v dpdk-testpmd >/dev/null || { [ "$$(id -u)" = 0 ] && $(APT_INSTALL) dpdk-dev; } || echo "dpdk-testpmd missing: the DPDK side of the capture benchmark will skip"
	@pkg-config --exists libdpdk 2>/dev/null || { [ "$$(id -u)" = 0 ] && $(APT_INSTALL) libdpdk-dev pkg-config; } || echo "libdpdk-dev missing: the dumper's DPDK benchmark will skip"
	@[ -f /usr/include/ns3.37/ns3/core-module.h ] || ls /usr/include/ns3*/ns3/core-module.h >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && $(APT_INSTALL) libns3-dev g++; } || echo "ns-3 missing: its side of the fabric benchmark will skip"

## fuzz: a short run of every fuzz target (FUZZTIME each); the inputs the fuzzer found interesting are
## copied from the Go cache into the package's testdata/fuzz so they are committed as the seed corpus.
fuzz:
	@set -e; cache=$$($(GO) env GOCACHE)/fuzz; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
	    if [ -d "$$cache/$$pkg/$$f" ]; then mkdir -p "$$dir/testdata/fuzz/$$f"; cp -n "$$cache/$$pkg/$$f"/* "$$dir/testdata/fuzz/$$f/" 2>/dev/null || true; fi; \
	  done; done

## lint: gofmt, goimports grouping (the standard library, then other modules, then this module's packages),
## go vet and staticcheck; CI runs it.
GOIMPORTS := golang.org/x/tools/cmd/goimports@v0.51.0
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt wants to change:"; echo "$$out"; exit 1; fi
	@out=$$($(GO) run $(GOIMPORTS) -local github.com/rdma-appliance/appliance -l $$(git ls-files '*.go')); \
	  if [ -n "$$out" ]; then echo "goimports -local github.com/rdma-appliance/appliance wants to change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags pooldebug ./dpdk/...
	@if pkg-config --exists libdpdk 2>/dev/null; then $(GO) vet -tags dpdk ./dpdk/...; else echo "lint: libdpdk-dev missing, the dpdk-tagged vet is skipped (make deps-dpdk)"; fi
	@if [ -f /usr/include/infiniband/verbs.h ]; then $(GO) vet -tags rdma ./verbs/...; else echo "lint: libibverbs-dev missing, the rdma-tagged vet is skipped (make deps-rdma)"; fi
	$(GO) run $(STATICCHECK) ./...

deps-dpdk:
	@pkg-config --exists libdpdk 2>/dev/null || { apt-get update -q && $(APT_INSTALL) libdpdk-dev pkg-config; }

deps-rdma:
	@[ -f /usr/include/infiniband/verbs.h ] || { apt-get update -q && $(APT_INSTALL) libibverbs-dev pkg-config; }

build-dpdk: deps-dpdk
	$(GO) build -tags dpdk -ldflags '$(LDFLAGS)' -o bin/appliance-dpdk ./appliance/cmd/appliance

test-dpdk: deps-dpdk
	$(GO) vet -tags dpdk ./dpdk/... ./dumper
	$(GO) test -count=1 -tags dpdk ./dpdk/... ./dumper

build-rdma: deps-rdma
	$(GO) build -tags rdma -ldflags '$(LDFLAGS)' -o bin/appliance-rdma ./appliance/cmd/appliance

test-rdma: deps-rdma
	$(GO) vet -tags rdma ./verbs/...
	$(GO) test -count=1 -tags rdma ./verbs/...

clean:
	rm -rf bin lab-out bench.out

## deb: bin/appliance built with the dpdk and rdma tags and bin/appliance_VERSION_ARCH.deb (units, example
## configurations, rendered docs, Grafana dashboard; every unit through systemd-analyze verify).
## Installs dpkg-dev, libdpdk-dev and libibverbs-dev when missing.
.PHONY: deb image docs
deb:
	GO=$(GO) ./packaging/build-deb.sh $(VERSION)

## image: a Debian root filesystem (debootstrap) with the package installed, as bin/appliance-image.tar.gz,
## then chrooted into to run `appliance version`, `appliance lab --help` and systemd-analyze verify. Root.
image: deb
	./packaging/build-image.sh bin/appliance.deb bin/appliance-image.tar.gz

## docs: every command's --help into docs/commands/, the man page docs/appliance.1 and docs/metrics.md.
docs: build
	./packaging/render-docs.sh $(BIN) docs
