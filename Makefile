# sofa build and test entry points. CI runs `make test` through .ci/run.
# Needs Go (see go.mod), Node.js 20+ and npm.

GO       ?= go
NPM      ?= npm
TEST_PKGS ?= ./...
# Packages whose tests also run under the race detector (in `make test`
# too): the concurrency-heavy test infrastructure and helpers.
RACE_PKGS ?= ./internal/... ./replicate/... ./couch/... ./archive/... ./verify/... ./fleet/... ./storage/...

.PHONY: all deps build test vet race demo bench clean

all: build

# npm ci reruns only when node_modules is missing or older than the lockfile
# (npm ci writes node_modules/.package-lock.json). Install scripts stay off:
# PouchDB Server --in-memory needs none of the native builds.
node_modules/.package-lock.json: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund --ignore-scripts
	@touch $@

deps: node_modules/.package-lock.json
	bash scripts/debs.sh
	$(GO) mod download

build:
	$(GO) build -o bin/sofa ./cmd/sofa

vet:
	$(GO) vet ./...

# Every test once on CouchDB (when available: ../shared/couchdb,
# SOFA_COUCHDB_RELEASE or SOFA_COUCHDB_URL) and once on PouchDB Server, side
# by side, then the race detector; see scripts/test.sh.
test: deps vet
	GO="$(GO)" TEST_PKGS="$(TEST_PKGS)" RACE_PKGS="$(RACE_PKGS)" bash scripts/test.sh

race: deps
	$(GO) test -race -count=1 -timeout 40m $(RACE_PKGS)

demo: deps build
	bash scripts/demo.sh

bench: deps build
	bash scripts/bench.sh

clean:
	rm -rf bin
