package s3

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// newHash returns the x-amz-checksum-<alg> hash (nil for "").
func newHash(alg string) hash.Hash {
	switch alg {
	case "crc32":
		return crc32.NewIEEE()
	case "crc32c":
		return crc32.New(crc32.MakeTable(crc32.Castagnoli))
	case "crc64nvme":
		return crc64.New(crc64.MakeTable(0x9a6c9329ac4bc9b5))
	case "sha1":
		return sha1.New()
	case "sha256":
		return sha256.New()
	}
	return nil
}
