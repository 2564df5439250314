# Sluice: the targets a developer and CI use.
GO      ?= go
BIN     ?= bin/sluice
DATA    ?= ./sluice-data
MNT     ?= ./sluice-mnt
S3      ?= 127.0.0.1:9000

.PHONY: build serve test test-short race fuzz bench lint clean python

build:
	$(GO) build -o $(BIN) ./cmd/sluice

# The main job: a complete single-node Sluice on ./sluice-data, mounted on
# ./sluice-mnt, with an S3 endpoint.
serve: build
	mkdir -p $(MNT)
	$(BIN) serve --data-dir $(DATA) --mount $(MNT) --s3 $(S3)

# The test command CI runs (see README and .ci/run). The race detector
# checks the code that runs in the test processes: every package's own
# tests, and the end-to-end tests in which the client library works
# concurrently (E2E_RACE). The other tests under test/ drive sluice
# processes that are not built with it, so there it would only slow the
# tests' own harness (2.8x for test/e2e, 5x for the exercisers).
RACE_PKGS = ./internal/... ./client/... ./cmd/... ./test/kvcache
PROC_PKGS = $(shell $(GO) list ./test/... | grep -v -e '/test/kvcache$$' -e '/test/e2e$$')
E2E_RACE  = Races|Racing|TwoClients|^TestMigrateRandom$$|^TestKill9DuringWrites$$|^TestClientFileSemantics$$|^TestGarbledInTransit$$
# test/e2e runs beside the other process tests: first its race-checked
# tests, then the rest of it without the race detector (each test once); both
# spend much of their time waiting on sluice processes and the disk (CI
# used about one of the two CPUs when they ran one after the other); the
# former's output follows the latter's.
test:
	$(GO) vet ./...
	$(GO) test -race -timeout 25m $(RACE_PKGS)
	@log=$$(mktemp); \
	echo "$(GO) test -race -timeout 25m -run '$(E2E_RACE)' ./test/e2e, then $(GO) test -timeout 25m -skip '$(E2E_RACE)' ./test/e2e (beside the next)"; \
	( $(GO) test -race -timeout 25m -run '$(E2E_RACE)' ./test/e2e; r=$$?; \
	  $(GO) test -timeout 25m -skip '$(E2E_RACE)' ./test/e2e || r=1; exit $$r ) > $$log 2>&1 & race=$$!; \
	echo "$(GO) test -timeout 25m $(PROC_PKGS)"; \
	$(GO) test -timeout 25m $(PROC_PKGS); rc=$$?; \
	wait $$race; rrc=$$?; \
	cat $$log; rm -f $$log; \
	echo "process tests: exit $$rc; end-to-end tests (race-checked, then the rest): exit $$rrc"; \
	[ $$rc -eq 0 ] && [ $$rrc -eq 0 ]

test-short:
	$(GO) test -short ./...

race:
	$(GO) test -race ./...

FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./internal/wire
	$(GO) test -run '^$$' -fuzz FuzzRoundTrip -fuzztime $(FUZZTIME) ./internal/wire
	$(GO) test -run '^$$' -fuzz FuzzHeader -fuzztime $(FUZZTIME) ./internal/wire
	$(GO) test -run '^$$' -fuzz FuzzRange -fuzztime $(FUZZTIME) ./internal/s3
	$(GO) test -run '^$$' -fuzz FuzzSigV4 -fuzztime $(FUZZTIME) ./internal/s3
	$(GO) test -run '^$$' -fuzz FuzzChunkedReader -fuzztime $(FUZZTIME) ./internal/s3
	$(GO) test -run '^$$' -fuzz FuzzXML -fuzztime $(FUZZTIME) ./internal/s3
	$(GO) test -run '^$$' -fuzz FuzzObjectPath -fuzztime $(FUZZTIME) ./internal/s3
	$(GO) test -run '^$$' -fuzz FuzzParseConfig -fuzztime $(FUZZTIME) ./internal/cabi

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./test/e2e

# The Python package (docs/python.md): the client library as a C shared
# library inside python/sluice, then a wheel in python/dist (offline: no
# build isolation, Debian's setuptools and wheel).
PYTHON ?= /usr/bin/python3
python:
	$(GO) build -buildmode=c-shared -o python/sluice/_libsluice.so ./cmd/libsluice
	rm -f python/sluice/_libsluice.h
	cd python && $(PYTHON) -m pip wheel --no-deps --no-build-isolation --wheel-dir dist .

lint:
	gofmt -l . | (! grep .)
	$(GO) vet ./...

clean:
	rm -rf bin
