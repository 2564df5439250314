# Sluice: the targets a developer and CI use.
GO      ?= go
BIN     ?= bin/sluice
DATA    ?= ./sluice-data
MNT     ?= ./sluice-mnt
S3      ?= 127.0.0.1:9000

.PHONY: build serve test test-short race fuzz bench lint clean

build:
	$(GO) build -o $(BIN) ./cmd/sluice

# The main job: a complete single-node Sluice on ./sluice-data, mounted on
# ./sluice-mnt, with an S3 endpoint.
serve: build
	mkdir -p $(MNT)
	$(BIN) serve --data-dir $(DATA) --mount $(MNT) --s3 $(S3)

# The test command CI runs (see README and .ci/run).
test:
	$(GO) vet ./...
	$(GO) test -race -timeout 25m ./...

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

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./test/e2e

lint:
	gofmt -l . | (! grep .)
	$(GO) vet ./...

clean:
	rm -rf bin
