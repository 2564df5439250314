// Package s3 is Sluice's S3-compatible gateway: an http.Handler that
// serves the S3 REST API over the file system namespace, through the
// client library. Buckets are top-level directories and object keys are
// paths below them, so an object written over S3 is a file on the mount
// and the other way round (docs/s3.md has the full mapping, the supported
// API and the limitations).
//
// # Invariants
//
//   - Readers never see a partial object: PUT, CopyObject and
//     CompleteMultipartUpload write a temporary file under the bucket's
//     hidden working directory (.sluice-s3/tmp), verify the body (length,
//     Content-MD5, x-amz-content-sha256, aws-chunked signatures and
//     checksums) and only then rename it over the key. A failed or
//     aborted upload removes its temporary file.
//   - The working directory .sluice-s3 never shows in listings and no
//     key can address it. Temporary files a dead gateway left there are
//     collected by Run (temps.go), never those of uploads in flight.
//   - A key maps to exactly one path inside its bucket: keys with empty,
//     "." or ".." components, NUL or invalid UTF-8 are refused, so no key
//     can name a path outside its bucket.
//   - The ETag recorded with an object (xattr user.s3.meta) is returned
//     only while the file's size and mtime are those it was recorded
//     for; a file changed through POSIX gets a derived ETag instead.
//   - The namespace is a file view of the latest versions: /b/k is the
//     current version of k. Noncurrent versions and delete markers of a
//     bucket with versioning live in .sluice-s3/versions (versions.go);
//     the object a write displaces is linked there before the exchange
//     that replaces it, so no version is lost and no data copied.
//   - Anonymous requests get only what a canned ACL grants to everyone:
//     the object's ACL for reads of it, the bucket's for listing and
//     writing (acl.go: a pure decision on the request's op and one ACL).
//   - Every error a client sees is an S3 XML error document with the
//     S3 code and HTTP status; file system errors (internal/errs classes)
//     are translated once, in fsErr.
//
// Concurrency: a Gateway is safe for concurrent use; each request runs on
// its net/http goroutine with the request's context. Long operations
// (CompleteMultipartUpload, copies) run in a goroutine the request waits
// for, writing keep-alive spaces meanwhile.
package s3
