package s3

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// XML documents of the S3 API, requests and responses.

const s3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/"

// s3Time formats a time as S3 does in XML bodies.
func s3Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

type listAllMyBucketsResult struct {
	XMLName           xml.Name       `xml:"ListAllMyBucketsResult"`
	Xmlns             string         `xml:"xmlns,attr"`
	Owner             owner          `xml:"Owner"`
	Buckets           []bucketResult `xml:"Buckets>Bucket"`
	ContinuationToken string         `xml:"ContinuationToken,omitempty"`
	Prefix            string         `xml:"Prefix,omitempty"`
}

type bucketResult struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
}

type listObjectsResult struct {
	XMLName        xml.Name       `xml:"ListBucketResult"`
	Xmlns          string         `xml:"xmlns,attr"`
	Name           string         `xml:"Name"`
	Prefix         string         `xml:"Prefix"`
	Marker         *string        `xml:"Marker"`
	NextMarker     string         `xml:"NextMarker,omitempty"`
	ContToken      string         `xml:"ContinuationToken,omitempty"`
	NextContToken  string         `xml:"NextContinuationToken,omitempty"`
	StartAfter     string         `xml:"StartAfter,omitempty"`
	KeyCount       *int           `xml:"KeyCount"`
	MaxKeys        int            `xml:"MaxKeys"`
	Delimiter      string         `xml:"Delimiter,omitempty"`
	EncodingType   string         `xml:"EncodingType,omitempty"`
	IsTruncated    bool           `xml:"IsTruncated"`
	Contents       []objectResult `xml:"Contents"`
	CommonPrefixes []prefixResult `xml:"CommonPrefixes"`
}

type objectResult struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	Owner        *owner `xml:"Owner,omitempty"`
	StorageClass string `xml:"StorageClass"`
}

type listVersionsResult struct {
	XMLName             xml.Name       `xml:"ListVersionsResult"`
	Xmlns               string         `xml:"xmlns,attr"`
	Name                string         `xml:"Name"`
	Prefix              string         `xml:"Prefix"`
	KeyMarker           string         `xml:"KeyMarker"`
	VersionIDMarker     string         `xml:"VersionIdMarker"`
	NextKeyMarker       string         `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string         `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int            `xml:"MaxKeys"`
	Delimiter           string         `xml:"Delimiter,omitempty"`
	EncodingType        string         `xml:"EncodingType,omitempty"`
	IsTruncated         bool           `xml:"IsTruncated"`
	Entries             []versionEntry // Version and DeleteMarker elements, in order
	CommonPrefixes      []prefixResult `xml:"CommonPrefixes"`
}

// versionEntry is a Version or a DeleteMarker (XMLName says which).
type versionEntry struct {
	XMLName      xml.Name
	Key          string `xml:"Key"`
	VersionID    string `xml:"VersionId"`
	IsLatest     bool   `xml:"IsLatest"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag,omitempty"`
	Size         *int64 `xml:"Size,omitempty"`
	Owner        *owner `xml:"Owner,omitempty"`
	StorageClass string `xml:"StorageClass,omitempty"`
}

type prefixResult struct {
	Prefix string `xml:"Prefix"`
}

type locationResult struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	Xmlns   string   `xml:"xmlns,attr"`
	Region  string   `xml:",chardata"`
}

type versioningResult struct {
	XMLName xml.Name `xml:"VersioningConfiguration"`
	Xmlns   string   `xml:"xmlns,attr"`
	Status  string   `xml:"Status,omitempty"`
}

type grantee struct {
	XMLNS       string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID,omitempty"`
	DisplayName string `xml:"DisplayName,omitempty"`
	URI         string `xml:"URI,omitempty"`
}

type grant struct {
	Grantee    grantee `xml:"Grantee"`
	Permission string  `xml:"Permission"`
}

type accessControlPolicy struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	Xmlns   string   `xml:"xmlns,attr"`
	Owner   owner    `xml:"Owner"`
	Grants  []grant  `xml:"AccessControlList>Grant"`
}

// tagging is the Tagging document of object and bucket tagging, request
// and response.
type tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	Xmlns   string   `xml:"xmlns,attr"`
	TagSet  tagSet   `xml:"TagSet"` // always there, empty or not, as in S3
}

type tagSet struct {
	Tags []tagXML `xml:"Tag"`
}

type tagXML struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type copyObjectResult struct {
	XMLName      xml.Name `xml:"CopyObjectResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
	versionID    string   // the new object's version, a header
}

// responseHeaders sets x-amz-version-id (longOp calls it when the
// response has not started).
func (r copyObjectResult) responseHeaders(h http.Header) {
	if r.versionID != "" {
		h.Set("X-Amz-Version-Id", r.versionID)
	}
}

type copyPartResult struct {
	XMLName      xml.Name `xml:"CopyPartResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
}

type initiateMultipartUploadResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

type completeMultipartUploadResult struct {
	XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
	checksumFields
	ChecksumType string `xml:"ChecksumType,omitempty"`
	versionID    string // the new object's version, a header
}

func (r completeMultipartUploadResult) responseHeaders(h http.Header) {
	if r.versionID != "" {
		h.Set("X-Amz-Version-Id", r.versionID)
	}
}

// checksumFields are the Checksum<ALG> elements of results and parts.
type checksumFields struct {
	ChecksumCRC32     string `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string `xml:"ChecksumSHA256,omitempty"`
}

// setChecksum sets the element of algorithm alg (as checksumAlgorithms
// names it).
func (c *checksumFields) setChecksum(alg, v string) {
	switch alg {
	case "crc32":
		c.ChecksumCRC32 = v
	case "crc32c":
		c.ChecksumCRC32C = v
	case "crc64nvme":
		c.ChecksumCRC64NVME = v
	case "sha1":
		c.ChecksumSHA1 = v
	case "sha256":
		c.ChecksumSHA256 = v
	}
}

// checksums returns the elements set, by algorithm.
func (c *checksumFields) checksums() map[string]string {
	out := map[string]string{}
	for alg, v := range map[string]string{"crc32": c.ChecksumCRC32, "crc32c": c.ChecksumCRC32C, "crc64nvme": c.ChecksumCRC64NVME, "sha1": c.ChecksumSHA1, "sha256": c.ChecksumSHA256} {
		if v = strings.TrimSpace(v); v != "" {
			out[alg] = v
		}
	}
	return out
}

type listPartsResult struct {
	XMLName              xml.Name     `xml:"ListPartsResult"`
	Xmlns                string       `xml:"xmlns,attr"`
	Bucket               string       `xml:"Bucket"`
	Key                  string       `xml:"Key"`
	UploadID             string       `xml:"UploadId"`
	Initiator            owner        `xml:"Initiator"`
	Owner                owner        `xml:"Owner"`
	StorageClass         string       `xml:"StorageClass"`
	PartNumberMarker     int          `xml:"PartNumberMarker"`
	NextPartNumberMarker int          `xml:"NextPartNumberMarker"`
	MaxParts             int          `xml:"MaxParts"`
	IsTruncated          bool         `xml:"IsTruncated"`
	Parts                []partResult `xml:"Part"`
}

type partResult struct {
	PartNumber   int    `xml:"PartNumber"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	checksumFields
}

type listMultipartUploadsResult struct {
	XMLName            xml.Name       `xml:"ListMultipartUploadsResult"`
	Xmlns              string         `xml:"xmlns,attr"`
	Bucket             string         `xml:"Bucket"`
	KeyMarker          string         `xml:"KeyMarker"`
	UploadIDMarker     string         `xml:"UploadIdMarker"`
	NextKeyMarker      string         `xml:"NextKeyMarker"`
	NextUploadIDMarker string         `xml:"NextUploadIdMarker"`
	Prefix             string         `xml:"Prefix"`
	Delimiter          string         `xml:"Delimiter,omitempty"`
	MaxUploads         int            `xml:"MaxUploads"`
	IsTruncated        bool           `xml:"IsTruncated"`
	Uploads            []uploadResult `xml:"Upload"`
	CommonPrefixes     []prefixResult `xml:"CommonPrefixes"`
}

type uploadResult struct {
	Key          string `xml:"Key"`
	UploadID     string `xml:"UploadId"`
	Initiator    owner  `xml:"Initiator"`
	Owner        owner  `xml:"Owner"`
	StorageClass string `xml:"StorageClass"`
	Initiated    string `xml:"Initiated"`
}

type deleteResult struct {
	XMLName xml.Name       `xml:"DeleteResult"`
	Xmlns   string         `xml:"xmlns,attr"`
	Deleted []deletedEntry `xml:"Deleted"`
	Errors  []deleteError  `xml:"Error"`
}

type deletedEntry struct {
	Key                   string `xml:"Key"`
	VersionID             string `xml:"VersionId,omitempty"`
	DeleteMarker          bool   `xml:"DeleteMarker,omitempty"`
	DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
}

type deleteError struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

// Request documents.

// deleteRequest is the body of DeleteObjects.
type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool     `xml:"Quiet"`
	Objects []struct {
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId"`
	} `xml:"Object"`
}

// completeRequest is the body of CompleteMultipartUpload.
type completeRequest struct {
	XMLName xml.Name       `xml:"CompleteMultipartUpload"`
	Parts   []completePart `xml:"Part"`
}

type completePart struct {
	PartNumber int    `xml:"PartNumber"`
	ETag       string `xml:"ETag"`
	checksumFields
}

// aclPolicyRequest is the body of PutBucketAcl and PutObjectAcl. Grantee's
// type attribute is xsi:type; matching on the local name accepts it with
// any prefix.
type aclPolicyRequest struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	Owner   struct {
		ID string `xml:"ID"`
	} `xml:"Owner"`
	Grants []struct {
		Grantee struct {
			Type  string `xml:"type,attr"`
			ID    string `xml:"ID"`
			URI   string `xml:"URI"`
			Email string `xml:"EmailAddress"`
		} `xml:"Grantee"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// versioningConfiguration is the body of PutBucketVersioning.
type versioningConfiguration struct {
	XMLName   xml.Name `xml:"VersioningConfiguration"`
	Status    string   `xml:"Status"`
	MfaDelete string   `xml:"MfaDelete"`
}

// createBucketRequest is the optional body of CreateBucket.
type createBucketRequest struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string   `xml:"LocationConstraint"`
}

// maxXMLBody bounds the request documents (10,000 parts of
// CompleteMultipartUpload are well under it).
const maxXMLBody = 4 << 20

// decodeXML reads one XML document of at most maxXMLBody bytes from body
// into v. An empty body is an error unless allowEmpty. The document's root
// element must be the one v expects.
func decodeXML(body io.Reader, v any, allowEmpty bool) (empty bool, err error) {
	data, err := io.ReadAll(io.LimitReader(body, maxXMLBody+1))
	if err != nil {
		return false, err
	}
	if len(data) > maxXMLBody {
		return false, apiErr(ErrMaxMessageLengthExceeded, "Your XML request body is larger than %d bytes", maxXMLBody)
	}
	if len(bytesTrimSpace(data)) == 0 {
		if allowEmpty {
			return true, nil
		}
		return true, apiErr(ErrMalformedXML, "The XML request body is empty")
	}
	if err := xml.Unmarshal(data, v); err != nil {
		var se *xml.SyntaxError
		if errors.As(err, &se) {
			return false, apiErr(ErrMalformedXML, "The XML you provided was not well-formed: %v", se)
		}
		return false, apiErr(ErrMalformedXML, "The XML you provided did not validate: %v", err)
	}
	return false, nil
}

func bytesTrimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
