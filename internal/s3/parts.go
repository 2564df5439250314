package s3

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// Part sizes of a multipart object, for GET and HEAD with ?partNumber=N
// (SDK transfer managers download an object part by part). Complete
// records them in the xattr user.s3.parts of the new file, beside
// user.s3.meta (whose JSON could not hold 10,000 sizes within the 64 KiB
// xattr limit): a version byte (1), then runs of equal sizes as uvarint
// pairs (size, count). 10,000 different sizes of up to 5 GiB take at most
// 60,001 bytes; the usual upload (equal parts and a last one) takes a few.

const partSizesVersion = 1

var errPartSizes = errors.New("s3: malformed part sizes")

// encodePartSizes encodes part sizes in order.
func encodePartSizes(sizes []int64) []byte {
	b := []byte{partSizesVersion}
	for i := 0; i < len(sizes); {
		j := i + 1
		for j < len(sizes) && sizes[j] == sizes[i] {
			j++
		}
		b = binary.AppendUvarint(b, uint64(sizes[i]))
		b = binary.AppendUvarint(b, uint64(j-i))
		i = j
	}
	return b
}

// decodePartSizes decodes encodePartSizes; it refuses more than maxParts
// parts, negative sizes and trailing bytes.
func decodePartSizes(b []byte) ([]int64, error) {
	if len(b) == 0 || b[0] != partSizesVersion {
		return nil, errPartSizes
	}
	b = b[1:]
	var out []int64
	for len(b) > 0 {
		size, n := binary.Uvarint(b)
		if n <= 0 || size > 1<<62 {
			return nil, errPartSizes
		}
		b = b[n:]
		count, n := binary.Uvarint(b)
		if n <= 0 || count == 0 || count > uint64(maxParts-len(out)) {
			return nil, errPartSizes
		}
		b = b[n:]
		for range count {
			out = append(out, int64(size))
		}
	}
	return out, nil
}

// partRange returns the byte range of part n (1-based) of an object of
// size bytes with these part sizes, and the number of parts. An object
// without part sizes (not multipart, changed through POSIX, or completed
// before sizes were recorded) is one part: the whole object. A part
// number beyond the count is InvalidPartNumber.
func partRange(sizes []int64, size int64, n int) (byteRange, int, error) {
	if len(sizes) == 0 {
		sizes = []int64{size}
	}
	if n < 1 || n > len(sizes) {
		return byteRange{}, len(sizes), apiErr(ErrInvalidPartNumber, "The requested partnumber is not satisfiable: the object has %d part(s)", len(sizes))
	}
	var start, total int64
	for i, s := range sizes {
		if i < n-1 {
			start += s
		}
		total += s
	}
	if total != size {
		// The recorded sizes do not describe this file: serve it as
		// one part rather than wrong bytes.
		return partRange(nil, size, n)
	}
	return byteRange{Start: start, Length: sizes[n-1]}, len(sizes), nil
}

// readPartNumber parses the partNumber parameter of a GET or HEAD (0 if
// absent).
func readPartNumber(rq *request) (int, error) {
	if !rq.query.Has("partNumber") {
		return 0, nil
	}
	n, err := strconv.Atoi(rq.query.Get("partNumber"))
	if err != nil || n < 1 || n > maxParts {
		return 0, apiErr(ErrInvalidArgument, "Part number must be an integer between 1 and 10000, inclusive")
	}
	if rq.r.Header.Get("Range") != "" {
		return 0, apiErr(ErrInvalidRequest, "Cannot specify both Range header and partNumber query parameter")
	}
	return n, nil
}

// objectPartSizes returns the recorded part sizes of a multipart object
// (nil for others, or if none are recorded).
func (g *Gateway) objectPartSizes(rq *request, info *objInfo) []int64 {
	if info.meta.Parts < 2 {
		return nil
	}
	b, err := g.c.GetXattr(rq.ctx, info.path, xattrParts)
	if err != nil {
		return nil
	}
	sizes, err := decodePartSizes(b)
	if err != nil || len(sizes) != info.meta.Parts {
		g.log.Warn("s3: unreadable part sizes; serving the object as one part", "path", info.path, "err", err)
		return nil
	}
	return sizes
}
