// Package tier is the object tier below the storage targets (docs/tier.md,
// ADR 0011): the Store interface over one S3 bucket (an S3 implementation
// on minio-go and an in-memory one), the object format of an archived file
// (key, metadata, block checksums) and the checks a restore makes.
//
// It holds no state of its own: backends and HSM records live in the
// metadata service; the client library moves the bytes.
package tier
