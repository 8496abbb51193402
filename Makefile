# sofa build and test entry points. CI runs `make test` through .ci/run.
# Needs Go (see go.mod), Node.js 20+ and npm.

GO       ?= go
NPM      ?= npm
TEST_PKGS ?= ./...
# Packages whose tests also run under the race detector (in `make test`
# too): the concurrency-heavy test infrastructure and helpers.
RACE_PKGS ?= . ./internal/... ./replicate/... ./couch/... ./archive/... ./verify/... ./fleet/... ./storage/...

.PHONY: all deps build test vet lint race demo bench clean

all: build

# npm ci reruns only when node_modules is missing or older than the lockfile
# (npm ci writes node_modules/.package-lock.json). Install scripts stay off:
# PouchDB Server --in-memory needs none of the native builds.
node_modules/.package-lock.json: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund --ignore-scripts
	@touch $@

# The S3-compatible server of the storage/s3 and s3:// tests (posix
# backend), installed like staticcheck; internal/s3test runs it.
VERSITYGW_VERSION ?= v1.8.0
VERSITYGW := .work/tools/versitygw-$(VERSITYGW_VERSION)/versitygw

$(VERSITYGW):
	cd "$${TMPDIR:-/tmp}" && GOBIN="$(CURDIR)/$(@D)" GOFLAGS=-buildvcs=false $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

deps: node_modules/.package-lock.json $(VERSITYGW)
	bash scripts/debs.sh
	$(GO) mod download

build:
	CGO_ENABLED=0 $(GO) build -o bin/sofa ./cmd/sofa
	$(GO) build -o bin/sofa-load ./cmd/sofa-load

vet:
	$(GO) vet ./...

# The linter, installed once per version into .work/tools (go install from
# the module proxy; nothing else needed on a fresh machine).
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := .work/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck

$(STATICCHECK):
	GOBIN="$(CURDIR)/$(@D)" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Hygiene, no server needed: go.mod and go.sum tidy, gofmt, staticcheck
# (checks in staticcheck.conf), and the layering rules of layers_test.go.
lint: $(STATICCHECK)
	$(GO) mod tidy -diff
	@files=$$(find . -name '*.go' -not -path './node_modules/*' -not -path './.work/*' | xargs "$$($(GO) env GOROOT)/bin/gofmt" -l); \
	if [ -n "$$files" ]; then echo "gofmt needed:"; echo "$$files"; exit 1; fi
	$(STATICCHECK) ./...
	$(GO) test -count=1 -run '^TestLayers$$' .

# Every test once on CouchDB (when available: ../shared/couchdb,
# SOFA_COUCHDB_RELEASE or SOFA_COUCHDB_URL) and once on PouchDB Server, side
# by side, then the race detector; see scripts/test.sh.
test: deps vet lint
	GO="$(GO)" TEST_PKGS="$(TEST_PKGS)" RACE_PKGS="$(RACE_PKGS)" bash scripts/test.sh

race: deps
	$(GO) test -race -count=1 -timeout 40m $(RACE_PKGS)

demo: deps build
	bash scripts/demo.sh

bench: deps build
	bash scripts/bench.sh

clean:
	rm -rf bin
