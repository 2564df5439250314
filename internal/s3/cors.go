package s3

import "net/http"

// CORS preflight (OPTIONS). Sluice has no CORS configuration, so it
// answers every preflight as S3 answers one for a bucket without any:
// 400 without an Origin or Access-Control-Request-Method header, else 403
// AccessForbidden. OPTIONS is never authenticated (browsers send
// preflights without credentials, and a presigned URL's signature is for
// another method), so it is answered before the signature is looked at:
// the same answer for every URL.

var (
	errCORSBadRequest = &APIError{Code: "BadRequest", Status: http.StatusBadRequest, Message: "Insufficient information. Origin request header needed."}
	errCORSNoMethod   = &APIError{Code: "BadRequest", Status: http.StatusBadRequest, Message: "Insufficient information. Access-Control-Request-Method header needed."}
	errCORSNotEnabled = &APIError{Code: "AccessForbidden", Status: http.StatusForbidden, Message: "CORSResponse: CORS is not enabled for this bucket."}
)

// corsPreflight returns the answer to an OPTIONS request with headers h.
func corsPreflight(h http.Header) error {
	switch {
	case h.Get("Origin") == "":
		return errCORSBadRequest
	case h.Get("Access-Control-Request-Method") == "":
		return errCORSNoMethod
	}
	return errCORSNotEnabled
}
