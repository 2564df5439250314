package s3

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"
)

// GetObjectAttributes (docs/s3.md): what HEAD tells and more, chosen with
// x-amz-object-attributes: ETag, Checksum, ObjectParts, StorageClass,
// ObjectSize. ObjectParts is there for multipart objects, from the part
// sizes recorded at Complete; per-part checksums are not kept after
// Complete, so parts list their number and size only.

// objectAttrNames are the attributes that may be asked for.
var objectAttrNames = map[string]bool{"ETag": true, "Checksum": true, "ObjectParts": true, "StorageClass": true, "ObjectSize": true}

// parseObjectAttributes parses x-amz-object-attributes (one or more
// header lines, comma-separated names).
func parseObjectAttributes(vals []string) (map[string]bool, error) {
	want := map[string]bool{}
	for _, v := range vals {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if !objectAttrNames[name] {
				return nil, apiErr(ErrInvalidArgument, "Invalid attribute name specified: %q", name)
			}
			want[name] = true
		}
	}
	if len(want) == 0 {
		return nil, apiErr(ErrInvalidArgument, "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty")
	}
	return want, nil
}

type objectAttributesResult struct {
	XMLName      xml.Name           `xml:"GetObjectAttributesResponse"`
	Xmlns        string             `xml:"xmlns,attr"`
	ETag         string             `xml:"ETag,omitempty"`
	Checksum     *attributeChecksum `xml:"Checksum,omitempty"`
	ObjectParts  *attributeParts    `xml:"ObjectParts,omitempty"`
	StorageClass string             `xml:"StorageClass,omitempty"`
	ObjectSize   *int64             `xml:"ObjectSize,omitempty"`
}

type attributeChecksum struct {
	checksumFields
	ChecksumType string `xml:"ChecksumType,omitempty"`
}

type attributeParts struct {
	IsTruncated          bool            `xml:"IsTruncated"`
	MaxParts             int             `xml:"MaxParts"`
	NextPartNumberMarker int             `xml:"NextPartNumberMarker"`
	PartNumberMarker     int             `xml:"PartNumberMarker"`
	Parts                []attributePart `xml:"Part"`
	PartsCount           int             `xml:"PartsCount"`
}

type attributePart struct {
	PartNumber int   `xml:"PartNumber"`
	Size       int64 `xml:"Size"`
}

// objectAttributes builds the answer from what is known of the object:
// its ETag, storage class, size, checksums, and part sizes (nil: not multipart), with
// the parts after marker, at most maxParts of them.
func objectAttributes(want map[string]bool, etag, class string, size int64, checksum map[string]string, parts []int64, maxParts, marker int) objectAttributesResult {
	res := objectAttributesResult{Xmlns: s3Namespace}
	if want["ETag"] {
		res.ETag = etag
	}
	if want["StorageClass"] {
		res.StorageClass = class
	}
	if want["ObjectSize"] {
		res.ObjectSize = &size
	}
	if want["Checksum"] && len(checksum) > 0 {
		c := &attributeChecksum{}
		for alg, v := range checksum {
			c.setChecksum(alg, v)
			c.ChecksumType = checksumType(v)
		}
		res.Checksum = c
	}
	if want["ObjectParts"] && parts != nil {
		p := &attributeParts{MaxParts: maxParts, PartNumberMarker: marker, PartsCount: len(parts)}
		for i, s := range parts {
			n := i + 1
			if n <= marker {
				continue
			}
			if len(p.Parts) == maxParts {
				p.IsTruncated = true
				break
			}
			p.Parts = append(p.Parts, attributePart{PartNumber: n, Size: s})
			p.NextPartNumberMarker = n
		}
		res.ObjectParts = p
	}
	return res
}

// getObjectAttributes is GetObjectAttributes (also of a version).
func (g *Gateway) getObjectAttributes(rq *request) error {
	h := rq.r.Header
	want, err := parseObjectAttributes(h.Values("X-Amz-Object-Attributes"))
	if err != nil {
		return err
	}
	maxParts, marker := 1000, 0
	if v := h.Get("X-Amz-Max-Parts"); v != "" {
		if maxParts, err = strconv.Atoi(v); err != nil || maxParts < 0 {
			return apiErr(ErrInvalidArgument, "x-amz-max-parts must be a non-negative integer")
		}
		maxParts = min(maxParts, 1000)
	}
	if v := h.Get("X-Amz-Part-Number-Marker"); v != "" {
		if marker, err = strconv.Atoi(v); err != nil || marker < 0 {
			return apiErr(ErrInvalidArgument, "x-amz-part-number-marker must be a non-negative integer")
		}
	}
	info, err := g.readTarget(rq)
	if err != nil {
		return err
	}
	var parts []int64
	if info.meta.Parts > 0 && info.etag == info.meta.ETag {
		if parts = g.objectPartSizes(rq, info); parts == nil {
			parts = []int64{info.attr.Size} // one part, or sizes not recorded
			if info.meta.Parts > 1 {
				parts = nil // the sizes are unknown: no ObjectParts
			}
		}
	}
	checksum := info.meta.Checksum
	if info.etag != info.meta.ETag {
		checksum = nil // changed through POSIX: the checksum no longer holds
	}
	rq.w.Header().Set("Last-Modified", info.attr.Mtime.UTC().Format(http.TimeFormat))
	return writeXML(rq, objectAttributes(want, info.etag, info.meta.storageClass(info.attr), info.attr.Size, checksum, parts, maxParts, marker))
}
