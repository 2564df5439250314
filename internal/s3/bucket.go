package s3

import (
	"errors"
	"io/fs"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-fs/sluice/internal/errs"
)

// listBuckets lists the root directories whose names are bucket names.
// It takes the optional prefix, max-buckets and continuation-token.
func (g *Gateway) listBuckets(rq *request) error {
	prefix := rq.query.Get("prefix")
	after := rq.query.Get("continuation-token")
	limit := 10000
	if v := rq.query.Get("max-buckets"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return apiErr(ErrInvalidArgument, "max-buckets must be a number from 1 to 10000")
		}
		limit = n
	}
	res := listAllMyBucketsResult{Xmlns: s3Namespace, Owner: rq.owner(), Prefix: prefix}
	for e, err := range g.c.ReadDir(rq.ctx, "/") {
		if err != nil {
			return fsErr(err, ErrInternal, "the root directory")
		}
		if !e.Mode.IsDir() || !validBucketName(e.Name) || !strings.HasPrefix(e.Name, prefix) || e.Name <= after {
			continue
		}
		if len(res.Buckets) == limit {
			res.ContinuationToken = res.Buckets[len(res.Buckets)-1].Name
			break
		}
		fi, err := g.c.Stat(rq.ctx, "/"+e.Name)
		if err != nil {
			continue // removed meanwhile
		}
		res.Buckets = append(res.Buckets, bucketResult{Name: e.Name, CreationDate: s3Time(fi.Attr().Ctime)})
	}
	return writeXML(rq, res)
}

// createBucket makes the bucket's directory.
func (g *Gateway) createBucket(rq *request) error {
	var cfg createBucketRequest
	if _, err := decodeXML(rq.r.Body, &cfg, true); err != nil {
		return err
	}
	acl, err := aclFromHeaders(rq.r.Header, true)
	if err != nil {
		return err
	}
	err = g.c.Mkdir(rq.ctx, rq.bucketPath(), 0o755)
	if errs.CodeOf(err) == errs.Exists {
		fi, serr := g.c.Stat(rq.ctx, rq.bucketPath())
		isDir := serr == nil && fi.IsDir()
		own := ""
		if isDir {
			own = g.bucketOwner(rq.ctx, rq.bucket)
		}
		return bucketExistsError(isDir, own, rq.owner().ID)
	}
	if err != nil {
		return fsErr(err, ErrInternal, "bucket "+rq.bucket)
	}
	g.configs.forget(rq.bucket)
	if err := g.c.SetXattr(rq.ctx, rq.bucketPath(), xattrOwner, []byte(rq.owner().ID)); err != nil {
		return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
	}
	if err := g.setBucketACL(rq.ctx, rq.bucket, acl); err != nil {
		return err
	}
	rq.w.Header().Set("Location", "/"+rq.bucket)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// bucketExistsError is the answer to creating a bucket whose name is
// taken: by a directory owned by owner ("" when none is recorded: made
// through POSIX, or before owners were recorded, and counted as the
// requester's) or, if !isDir, by a file.
func bucketExistsError(isDir bool, owner, requester string) error {
	switch {
	case !isDir:
		return apiErr(ErrBucketAlreadyExists, "The requested bucket name is not available: a file of that name is in the root directory")
	case owner != "" && owner != requester:
		return apiErr(ErrBucketAlreadyExists, "The requested bucket name is not available: the bucket is owned by another access key")
	}
	return apiErr(ErrBucketAlreadyOwnedByYou, "Your previous request to create the named bucket succeeded and you already own it.")
}

func (g *Gateway) headBucket(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	rq.w.Header().Set("X-Amz-Bucket-Region", g.opts.Region)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// deleteBucket removes an empty bucket: one with no entries but the
// gateway's working directory, whose temporary files and unfinished
// multipart uploads go with it.
func (g *Gateway) deleteBucket(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	for e, err := range g.c.ReadDir(rq.ctx, rq.bucketPath()) {
		if err != nil {
			return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
		}
		if e.Name != hiddenDir {
			return apiErr(ErrBucketNotEmpty, "The bucket you tried to delete is not empty")
		}
	}
	if has, err := g.hasVersions(rq.ctx, rq.bucket); err != nil || has {
		if err != nil {
			return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
		}
		return apiErr(ErrBucketNotEmpty, "The bucket you tried to delete is not empty. You must delete all versions in the bucket.")
	}
	g.configs.forget(rq.bucket)
	if err := g.c.RemoveAll(rq.ctx, rq.bucketPath()+"/"+hiddenDir); err != nil {
		return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
	}
	if err := g.c.Remove(rq.ctx, rq.bucketPath()); err != nil {
		if errs.CodeOf(err) == errs.NotEmpty {
			return apiErr(ErrBucketNotEmpty, "The bucket you tried to delete is not empty")
		}
		return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (g *Gateway) getBucketLocation(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	region := g.opts.Region
	if region == "us-east-1" {
		region = "" // as S3 reports it
	}
	return writeXML(rq, locationResult{Xmlns: s3Namespace, Region: region})
}

// unsupportedBucketConfig answers reads of bucket configurations Sluice
// does not have with the error S3 gives for an unconfigured bucket where
// clients rely on it, else NotImplemented.
func (g *Gateway) unsupportedBucketConfig(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	q := rq.query
	switch {
	case q.Has("policy"):
		return &APIError{Code: "NoSuchBucketPolicy", Status: http.StatusNotFound, Message: "The bucket policy does not exist"}
	case q.Has("encryption"):
		return &APIError{Code: "ServerSideEncryptionConfigurationNotFoundError", Status: http.StatusNotFound, Message: "The server side encryption configuration was not found"}
	case q.Has("website"):
		return &APIError{Code: "NoSuchWebsiteConfiguration", Status: http.StatusNotFound, Message: "The specified bucket does not have a website configuration"}
	}
	return apiErr(ErrNotImplemented, "This bucket configuration is not supported by Sluice")
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
