package s3

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluice-fs/sluice/internal/errs"
)

// APIError is an S3 error: the code and HTTP status a client sees, with a
// message saying what went wrong. Handlers return it (wrapped or not); the
// gateway writes it as an S3 XML error body exactly once, in writeError.
type APIError struct {
	Code    string
	Status  int
	Message string
	// Err is the underlying cause, if any (not shown to clients).
	Err error
}

func (e *APIError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("s3: %s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("s3: %s: %s", e.Code, e.Message)
}

func (e *APIError) Unwrap() error { return e.Err }

// apiErr returns an APIError of the given kind with a formatted message.
func apiErr(kind *APIError, format string, args ...any) *APIError {
	return &APIError{Code: kind.Code, Status: kind.Status, Message: fmt.Sprintf(format, args...)}
}

// wrapErr is apiErr with a cause.
func wrapErr(kind *APIError, cause error, format string, args ...any) *APIError {
	e := apiErr(kind, format, args...)
	e.Err = cause
	return e
}

// The S3 errors the gateway returns. Each is a template: apiErr copies it
// with a specific message.
var (
	ErrAccessDenied              = &APIError{Code: "AccessDenied", Status: http.StatusForbidden, Message: "Access Denied"}
	ErrAuthorizationHeaderMalf   = &APIError{Code: "AuthorizationHeaderMalformed", Status: http.StatusBadRequest, Message: "The authorization header is malformed."}
	ErrAuthQueryMalformed        = &APIError{Code: "AuthorizationQueryParametersError", Status: http.StatusBadRequest, Message: "The authorization query parameters are malformed."}
	ErrBadDigest                 = &APIError{Code: "BadDigest", Status: http.StatusBadRequest, Message: "The Content-MD5 or checksum you specified did not match what we received."}
	ErrBucketAlreadyExists       = &APIError{Code: "BucketAlreadyExists", Status: http.StatusConflict, Message: "The requested bucket name is not available."}
	ErrBucketAlreadyOwnedByYou   = &APIError{Code: "BucketAlreadyOwnedByYou", Status: http.StatusConflict, Message: "Your previous request to create the named bucket succeeded and you already own it."}
	ErrBucketNotEmpty            = &APIError{Code: "BucketNotEmpty", Status: http.StatusConflict, Message: "The bucket you tried to delete is not empty."}
	ErrEntityTooLarge            = &APIError{Code: "EntityTooLarge", Status: http.StatusBadRequest, Message: "Your proposed upload exceeds the maximum allowed object size."}
	ErrEntityTooSmall            = &APIError{Code: "EntityTooSmall", Status: http.StatusBadRequest, Message: "Your proposed upload is smaller than the minimum allowed object size."}
	ErrIncompleteBody            = &APIError{Code: "IncompleteBody", Status: http.StatusBadRequest, Message: "You did not provide the number of bytes specified by the Content-Length HTTP header."}
	ErrInternal                  = &APIError{Code: "InternalError", Status: http.StatusInternalServerError, Message: "We encountered an internal error. Please try again."}
	ErrInvalidAccessKeyID        = &APIError{Code: "InvalidAccessKeyId", Status: http.StatusForbidden, Message: "The AWS Access Key Id you provided does not exist in our records."}
	ErrInvalidArgument           = &APIError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "Invalid Argument"}
	ErrInvalidBucketName         = &APIError{Code: "InvalidBucketName", Status: http.StatusBadRequest, Message: "The specified bucket is not valid."}
	ErrInvalidDigest             = &APIError{Code: "InvalidDigest", Status: http.StatusBadRequest, Message: "The Content-MD5 you specified is not valid."}
	ErrInvalidPart               = &APIError{Code: "InvalidPart", Status: http.StatusBadRequest, Message: "One or more of the specified parts could not be found."}
	ErrInvalidPartNumber         = &APIError{Code: "InvalidPartNumber", Status: http.StatusBadRequest, Message: "The requested partnumber is not satisfiable."}
	ErrInvalidPartOrder          = &APIError{Code: "InvalidPartOrder", Status: http.StatusBadRequest, Message: "The list of parts was not in ascending order."}
	ErrInvalidRange              = &APIError{Code: "InvalidRange", Status: http.StatusRequestedRangeNotSatisfiable, Message: "The requested range is not satisfiable"}
	ErrInvalidRequest            = &APIError{Code: "InvalidRequest", Status: http.StatusBadRequest, Message: "Invalid Request"}
	ErrKeyTooLong                = &APIError{Code: "KeyTooLongError", Status: http.StatusBadRequest, Message: "Your key is too long."}
	ErrMalformedXML              = &APIError{Code: "MalformedXML", Status: http.StatusBadRequest, Message: "The XML you provided was not well-formed or did not validate against our published schema."}
	ErrMetadataTooLarge          = &APIError{Code: "MetadataTooLarge", Status: http.StatusBadRequest, Message: "Your metadata headers exceed the maximum allowed metadata size."}
	ErrMethodNotAllowed          = &APIError{Code: "MethodNotAllowed", Status: http.StatusMethodNotAllowed, Message: "The specified method is not allowed against this resource."}
	ErrMissingContentLength      = &APIError{Code: "MissingContentLength", Status: http.StatusLengthRequired, Message: "You must provide the Content-Length HTTP header."}
	ErrMissingSecurityHeader     = &APIError{Code: "MissingSecurityHeader", Status: http.StatusBadRequest, Message: "Your request is missing a required header."}
	ErrNoSuchBucket              = &APIError{Code: "NoSuchBucket", Status: http.StatusNotFound, Message: "The specified bucket does not exist."}
	ErrNoSuchKey                 = &APIError{Code: "NoSuchKey", Status: http.StatusNotFound, Message: "The specified key does not exist."}
	ErrNoSuchUpload              = &APIError{Code: "NoSuchUpload", Status: http.StatusNotFound, Message: "The specified multipart upload does not exist."}
	ErrNotImplemented            = &APIError{Code: "NotImplemented", Status: http.StatusNotImplemented, Message: "A header or query you provided implies functionality that is not implemented."}
	ErrNotModified               = &APIError{Code: "NotModified", Status: http.StatusNotModified, Message: "Not Modified"}
	ErrPreconditionFailed        = &APIError{Code: "PreconditionFailed", Status: http.StatusPreconditionFailed, Message: "At least one of the preconditions you specified did not hold."}
	ErrRequestHeaderTooLarge     = &APIError{Code: "RequestHeaderSectionTooLarge", Status: http.StatusBadRequest, Message: "Your request header section exceeds the maximum allowed size."}
	ErrRequestTimeTooSkewed      = &APIError{Code: "RequestTimeTooSkewed", Status: http.StatusForbidden, Message: "The difference between the request time and the server's time is too large."}
	ErrServiceUnavailable        = &APIError{Code: "ServiceUnavailable", Status: http.StatusServiceUnavailable, Message: "Please reduce your request rate."}
	ErrSignatureDoesNotMatch     = &APIError{Code: "SignatureDoesNotMatch", Status: http.StatusForbidden, Message: "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
	ErrContentSHA256Mismatch     = &APIError{Code: "XAmzContentSHA256Mismatch", Status: http.StatusBadRequest, Message: "The provided 'x-amz-content-sha256' header does not match what was computed."}
	ErrInvalidStorageClass       = &APIError{Code: "InvalidStorageClass", Status: http.StatusBadRequest, Message: "The storage class you specified is not valid."}
	ErrMalformedPOSTRequest      = &APIError{Code: "MalformedPOSTRequest", Status: http.StatusBadRequest, Message: "The body of your POST request is not well-formed multipart/form-data."}
	ErrInvalidEncodingMethod     = &APIError{Code: "InvalidEncodingMethod", Status: http.StatusBadRequest, Message: "The encoding method specified is not valid."}
	ErrRequestTimeout            = &APIError{Code: "RequestTimeout", Status: http.StatusBadRequest, Message: "Your socket connection to the server was not read from or written to within the timeout period."}
	ErrMaxMessageLengthExceeded  = &APIError{Code: "MaxMessageLengthExceeded", Status: http.StatusBadRequest, Message: "Your request was too big."}
	ErrInvalidCopySource         = &APIError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "Copy Source must mention the source bucket and key: sourcebucket/sourcekey."}
	ErrKeyConflict               = &APIError{Code: "XSluiceKeyConflict", Status: http.StatusConflict, Message: "The key collides with a directory or file of the file system."}
	ErrInvalidObjectName         = &APIError{Code: "XSluiceInvalidObjectName", Status: http.StatusBadRequest, Message: "The key cannot be stored as a file system path."}
	ErrStorageFull               = &APIError{Code: "XSluiceStorageFull", Status: http.StatusInsufficientStorage, Message: "The file system has no space left."}
	ErrUnsupportedSignatureV2    = &APIError{Code: "InvalidRequest", Status: http.StatusBadRequest, Message: "Signature Version 2 is not supported; use AWS Signature Version 4."}
	ErrExpiredPresignRequest     = &APIError{Code: "AccessDenied", Status: http.StatusForbidden, Message: "Request has expired"}
	ErrUnexpectedContent         = &APIError{Code: "UnexpectedContent", Status: http.StatusBadRequest, Message: "This request does not support content."}
	ErrInvalidChunk              = &APIError{Code: "IncompleteBody", Status: http.StatusBadRequest, Message: "The aws-chunked request body is malformed."}
	ErrXSluiceUnsupportedTrailer = &APIError{Code: "InvalidRequest", Status: http.StatusBadRequest, Message: "The trailing header is not supported."}
)

// fsErr translates an error of the file system (classified by errs) to an
// S3 error. notFound is the S3 error a missing path means in context
// (NoSuchKey, NoSuchBucket, NoSuchUpload); what names the object.
func fsErr(err error, notFound *APIError, what string) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	switch errs.CodeOf(err) {
	case errs.NotFound:
		return wrapErr(notFound, err, "%s", notFound.Message)
	case errs.NotDir, errs.IsDir, errs.Exists, errs.NotEmpty:
		return wrapErr(ErrKeyConflict, err, "%s collides with a directory or file of the same name in the file system (see docs/s3.md: a key cannot be both an object and a prefix of other objects)", what)
	case errs.NameTooLong:
		return wrapErr(ErrKeyTooLong, err, "a path component of %s is longer than 255 bytes", what)
	case errs.Invalid:
		return wrapErr(ErrInvalidObjectName, err, "%s cannot be stored as a file system path", what)
	case errs.Permission, errs.NotPermitted:
		return wrapErr(ErrAccessDenied, err, "Access Denied")
	case errs.NoSpace:
		return wrapErr(ErrStorageFull, err, "%s", ErrStorageFull.Message)
	case errs.TooBig:
		return wrapErr(ErrEntityTooLarge, err, "%s", ErrEntityTooLarge.Message)
	case errs.Unavailable, errs.Busy, errs.Conflict, errs.Stale:
		return wrapErr(ErrServiceUnavailable, err, "the file system is unavailable, try again: %v", errs.CodeOf(err))
	}
	return wrapErr(ErrInternal, err, "%s", ErrInternal.Message)
}

// errorBody is the S3 XML error document.
type errorBody struct {
	XMLName    xml.Name `xml:"Error"`
	Code       string   `xml:"Code"`
	Message    string   `xml:"Message"`
	BucketName string   `xml:"BucketName,omitempty"`
	Key        string   `xml:"Key,omitempty"`
	Resource   string   `xml:"Resource,omitempty"`
	RequestID  string   `xml:"RequestId"`
	HostID     string   `xml:"HostId"`
}
