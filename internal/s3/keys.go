package s3

import (
	"strings"
	"unicode/utf8"
)

// How buckets and keys map to paths (docs/s3.md, "Key mapping"):
//
//   - A bucket is a directory at the root of the file system: bucket b is
//     /b. Only directories whose names are valid S3 bucket names are
//     buckets.
//   - Key k of bucket b is the path /b/k: every '/' in the key is a
//     directory boundary. A key ending in '/' is a directory ("a/" is the
//     directory /b/a) and can hold no data.
//   - Keys that have no faithful path are refused with 400
//     XSluiceInvalidObjectName: an empty component (leading '/', "a//b"), a
//     "." or ".." component, NUL, invalid UTF-8, and the reserved top-level
//     name .sluice-s3. A key over 1024 bytes or with a component over 255
//     bytes is refused with 400 KeyTooLongError.
//   - A key can name a file or be the prefix of other keys, not both: "a"
//     and "a/b" cannot coexist. The second PUT fails with 409
//     XSluiceKeyConflict.

// hiddenDir is the gateway's per-bucket working directory: temporary
// uploads and multipart parts. It never shows in listings.
const hiddenDir = ".sluice-s3"

// maxKeyLen is S3's limit on a key, in bytes.
const maxKeyLen = 1024

// maxNameLen is the file system's limit on one path component.
const maxNameLen = 255

// validBucketName reports whether b follows the S3 bucket naming rules:
// 3-63 characters of lowercase letters, digits, '.' and '-', starting and
// ending with a letter or digit, no "..", not an IPv4 address.
func validBucketName(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	dots, digitsAndDots := 0, true
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= 'a' && c <= 'z':
			digitsAndDots = false
		case c >= '0' && c <= '9':
		case c == '.':
			dots++
			if i > 0 && b[i-1] == '.' {
				return false
			}
		case c == '-':
			digitsAndDots = false
		default:
			return false
		}
	}
	if !isAlnum(b[0]) || !isAlnum(b[len(b)-1]) {
		return false
	}
	if digitsAndDots && dots == 3 {
		return false // looks like an IP address
	}
	return !strings.Contains(b, ".-") && !strings.Contains(b, "-.")
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// objectPath checks key and returns its path in bucket, and whether the key
// names a directory (ends in '/'). The error is an *APIError.
func objectPath(bucket, key string) (string, bool, error) {
	if key == "" {
		return "", false, apiErr(ErrInvalidObjectName, "The key is empty")
	}
	if len(key) > maxKeyLen {
		return "", false, apiErr(ErrKeyTooLong, "Your key is too long: %d bytes, the limit is %d", len(key), maxKeyLen)
	}
	if !utf8.ValidString(key) {
		return "", false, apiErr(ErrInvalidObjectName, "The key is not valid UTF-8")
	}
	if strings.IndexByte(key, 0) >= 0 {
		return "", false, apiErr(ErrInvalidObjectName, "The key contains a NUL byte, which no file name can hold")
	}
	dir := strings.HasSuffix(key, "/")
	rest := key
	if dir {
		rest = key[:len(key)-1]
	}
	if rest == "" {
		return "", false, apiErr(ErrInvalidObjectName, "The key %q has an empty path component", key)
	}
	for i, c := range strings.Split(rest, "/") {
		switch {
		case c == "":
			return "", false, apiErr(ErrInvalidObjectName, "The key %q has an empty path component (a leading '/' or '//'), which a file system path cannot keep", key)
		case c == "." || c == "..":
			return "", false, apiErr(ErrInvalidObjectName, "The key %q has a %q path component, which would resolve outside the key's directory", key, c)
		case len(c) > maxNameLen:
			return "", false, apiErr(ErrKeyTooLong, "The key has a path component of %d bytes; the file system limit is %d", len(c), maxNameLen)
		case i == 0 && c == hiddenDir:
			return "", false, apiErr(ErrInvalidObjectName, "The key prefix %s/ is reserved for the gateway's temporary files", hiddenDir)
		}
	}
	return "/" + bucket + "/" + rest, dir, nil
}

// parentDir returns the directory of path p ("/b/a/c" -> "/b/a").
func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
