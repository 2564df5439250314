package s3

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Lifecycle configuration (docs/s3.md, "Lifecycle"): a bucket's rules are
// the xattr user.s3.lifecycle of its directory (the document's structure,
// JSON). Expiration rules are applied by a sweep every gateway runs
// (Options.LifecycleSweepEvery): it walks the keys the rules' prefixes
// cover, lists each key's versions and applies what lifecycleActions
// decides from the rules, the versions and the time; it removes the
// incomplete multipart uploads AbortIncompleteMultipartUpload names.
// Transitions move objects to the object tier (transition.go).

const (
	xattrLifecycle = "user.s3.lifecycle"

	maxLifecycleRules = 1000
)

var errNoSuchLifecycle = &APIError{Code: "NoSuchLifecycleConfiguration", Status: http.StatusNotFound, Message: "The lifecycle configuration does not exist"}

// The LifecycleConfiguration document, as sent, stored (JSON) and returned.
type lifecycleConfiguration struct {
	XMLName xml.Name        `xml:"LifecycleConfiguration" json:"-"`
	Xmlns   string          `xml:"xmlns,attr,omitempty" json:"-"`
	Rules   []lifecycleRule `xml:"Rule" json:"rules"`
}

type lifecycleRule struct {
	ID                             string                  `xml:"ID,omitempty" json:"id,omitempty"`
	Prefix                         *string                 `xml:"Prefix,omitempty" json:"prefix,omitempty"` // the older form of Filter
	Filter                         *lifecycleFilter        `xml:"Filter,omitempty" json:"filter,omitempty"`
	Status                         string                  `xml:"Status" json:"status"`
	Expiration                     *lifecycleExpire        `xml:"Expiration,omitempty" json:"expiration,omitempty"`
	NoncurrentVersionExpiration    *lifecycleNC            `xml:"NoncurrentVersionExpiration,omitempty" json:"noncurrent,omitempty"`
	AbortIncompleteMultipartUpload *lifecycleAbort         `xml:"AbortIncompleteMultipartUpload,omitempty" json:"abort,omitempty"`
	Transitions                    []lifecycleTransition   `xml:"Transition,omitempty" json:"transitions,omitempty"`
	NoncurrentVersionTransitions   []lifecycleNCTransition `xml:"NoncurrentVersionTransition,omitempty" json:"nc_transitions,omitempty"`
}

type lifecycleFilter struct {
	Prefix                *string       `xml:"Prefix,omitempty" json:"prefix,omitempty"`
	Tag                   *tagXML       `xml:"Tag,omitempty" json:"tag,omitempty"`
	And                   *lifecycleAnd `xml:"And,omitempty" json:"and,omitempty"`
	ObjectSizeGreaterThan *int64        `xml:"ObjectSizeGreaterThan,omitempty" json:"gt,omitempty"`
	ObjectSizeLessThan    *int64        `xml:"ObjectSizeLessThan,omitempty" json:"lt,omitempty"`
}

type lifecycleAnd struct {
	Prefix                *string  `xml:"Prefix,omitempty" json:"prefix,omitempty"`
	Tags                  []tagXML `xml:"Tag" json:"tags,omitempty"`
	ObjectSizeGreaterThan *int64   `xml:"ObjectSizeGreaterThan,omitempty" json:"gt,omitempty"`
	ObjectSizeLessThan    *int64   `xml:"ObjectSizeLessThan,omitempty" json:"lt,omitempty"`
}

type lifecycleExpire struct {
	Days                      *int    `xml:"Days,omitempty" json:"days,omitempty"`
	Date                      *string `xml:"Date,omitempty" json:"date,omitempty"`
	ExpiredObjectDeleteMarker *bool   `xml:"ExpiredObjectDeleteMarker,omitempty" json:"expired_marker,omitempty"`
}

type lifecycleNC struct {
	NoncurrentDays          *int `xml:"NoncurrentDays,omitempty" json:"days,omitempty"`
	NewerNoncurrentVersions *int `xml:"NewerNoncurrentVersions,omitempty" json:"newer,omitempty"`
}

type lifecycleAbort struct {
	DaysAfterInitiation *int `xml:"DaysAfterInitiation,omitempty" json:"days,omitempty"`
}

// lcRule is a rule in the form the decisions use.
type lcRule struct {
	id            string
	enabled       bool
	prefix        string
	tags          map[string]string
	gt, lt        *int64
	expDays       int       // 0: none
	expDate       time.Time // zero: none
	expiredMarker bool
	ncDays        int // 0: none
	ncNewer       int // noncurrent versions kept whatever their age
	abortDays     int // 0: none
	transitions   []lcTransition
	ncTransitions []lcTransition
}

// compileLifecycle checks a configuration as S3 does and returns its
// rules in decision form.
func compileLifecycle(cfg *lifecycleConfiguration) ([]lcRule, error) {
	if len(cfg.Rules) == 0 {
		return nil, apiErr(ErrMalformedXML, "A lifecycle configuration needs at least one Rule")
	}
	if len(cfg.Rules) > maxLifecycleRules {
		return nil, apiErr(ErrMalformedXML, "A lifecycle configuration has at most %d rules", maxLifecycleRules)
	}
	ids := map[string]bool{}
	out := make([]lcRule, 0, len(cfg.Rules))
	for _, r := range cfg.Rules {
		c := lcRule{id: r.ID}
		if len(r.ID) > 255 {
			return nil, apiErr(ErrInvalidArgument, "ID length should not exceed allowed limit of 255")
		}
		if r.ID != "" {
			if ids[r.ID] {
				return nil, apiErr(ErrInvalidArgument, "Rule ID must be unique. Found same ID for more than one rule")
			}
			ids[r.ID] = true
		}
		switch r.Status {
		case "Enabled":
			c.enabled = true
		case "Disabled":
		default:
			return nil, apiErr(ErrMalformedXML, "The lifecycle rule Status must be Enabled or Disabled, not %q", r.Status)
		}
		if err := compileFilter(&r, &c); err != nil {
			return nil, err
		}
		if e := r.Expiration; e != nil {
			n := 0
			if e.Days != nil {
				n++
				if *e.Days <= 0 {
					return nil, apiErr(ErrInvalidArgument, "'Days' for Expiration action must be a positive integer")
				}
				c.expDays = *e.Days
			}
			if e.Date != nil {
				n++
				t, err := parseLifecycleDate(*e.Date)
				if err != nil {
					return nil, err
				}
				c.expDate = t
			}
			if e.ExpiredObjectDeleteMarker != nil {
				n++
				if len(c.tags) > 0 {
					return nil, apiErr(ErrInvalidArgument, "ExpiredObjectDeleteMarker cannot be specified with tags.")
				}
				c.expiredMarker = *e.ExpiredObjectDeleteMarker
			}
			if n != 1 {
				return nil, apiErr(ErrMalformedXML, "Expiration takes one of Days, Date and ExpiredObjectDeleteMarker")
			}
		}
		if nc := r.NoncurrentVersionExpiration; nc != nil {
			if nc.NoncurrentDays == nil || *nc.NoncurrentDays <= 0 {
				return nil, apiErr(ErrInvalidArgument, "'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer")
			}
			c.ncDays = *nc.NoncurrentDays
			if nc.NewerNoncurrentVersions != nil {
				if *nc.NewerNoncurrentVersions <= 0 || *nc.NewerNoncurrentVersions > 100 {
					return nil, apiErr(ErrInvalidArgument, "'NewerNoncurrentVersions' must be from 1 to 100")
				}
				c.ncNewer = *nc.NewerNoncurrentVersions
			}
		}
		if a := r.AbortIncompleteMultipartUpload; a != nil {
			if a.DaysAfterInitiation == nil || *a.DaysAfterInitiation <= 0 {
				return nil, apiErr(ErrInvalidArgument, "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer")
			}
			if len(c.tags) > 0 || c.gt != nil || c.lt != nil {
				return nil, apiErr(ErrInvalidRequest, "AbortIncompleteMultipartUpload cannot be specified with tags or object sizes.")
			}
			c.abortDays = *a.DaysAfterInitiation
		}
		if err := compileTransitions(&r, &c); err != nil {
			return nil, err
		}
		if r.Expiration == nil && r.NoncurrentVersionExpiration == nil && r.AbortIncompleteMultipartUpload == nil && len(r.Transitions) == 0 && len(r.NoncurrentVersionTransitions) == 0 {
			return nil, apiErr(ErrInvalidRequest, "At least one action needs to be specified in a rule")
		}
		out = append(out, c)
	}
	return out, nil
}

// compileFilter reads a rule's Filter (or older Prefix) into c.
func compileFilter(r *lifecycleRule, c *lcRule) error {
	if r.Prefix != nil && r.Filter != nil {
		return apiErr(ErrMalformedXML, "A rule has a Prefix or a Filter, not both")
	}
	if r.Prefix != nil {
		c.prefix = *r.Prefix
		return nil
	}
	f := r.Filter
	if f == nil {
		return nil // every object
	}
	n := 0
	for _, set := range []bool{f.Prefix != nil, f.Tag != nil, f.And != nil, f.ObjectSizeGreaterThan != nil, f.ObjectSizeLessThan != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return apiErr(ErrMalformedXML, "A Filter has one of Prefix, Tag, ObjectSizeGreaterThan, ObjectSizeLessThan and And")
	}
	var pairs [][2]string
	switch {
	case f.Prefix != nil:
		c.prefix = *f.Prefix
	case f.Tag != nil:
		pairs = append(pairs, [2]string{f.Tag.Key, f.Tag.Value})
	case f.ObjectSizeGreaterThan != nil:
		c.gt = f.ObjectSizeGreaterThan
	case f.ObjectSizeLessThan != nil:
		c.lt = f.ObjectSizeLessThan
	case f.And != nil:
		a := f.And
		if a.Prefix != nil {
			c.prefix = *a.Prefix
		}
		for _, t := range a.Tags {
			pairs = append(pairs, [2]string{t.Key, t.Value})
		}
		c.gt, c.lt = a.ObjectSizeGreaterThan, a.ObjectSizeLessThan
	}
	if len(pairs) > 0 {
		tags, err := checkTags(pairs, maxObjectTags, false)
		if err != nil {
			return err
		}
		c.tags = tags
	}
	if c.gt != nil && c.lt != nil && *c.gt >= *c.lt {
		return apiErr(ErrInvalidArgument, "ObjectSizeGreaterThan must be less than ObjectSizeLessThan")
	}
	if c.gt != nil && *c.gt < 0 || c.lt != nil && *c.lt <= 0 {
		return apiErr(ErrInvalidArgument, "Object sizes in a lifecycle filter must be positive")
	}
	return nil
}

// parseLifecycleDate parses an Expiration Date: midnight UTC, ISO 8601.
func parseLifecycleDate(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	var t time.Time
	var err error
	for _, f := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err = time.Parse(f, v); err == nil {
			break
		}
	}
	if err != nil {
		return time.Time{}, apiErr(ErrInvalidArgument, "'Date' must be in ISO 8601 format")
	}
	t = t.UTC()
	if !t.Equal(t.Truncate(24 * time.Hour)) {
		return time.Time{}, apiErr(ErrInvalidArgument, "'Date' must be at midnight GMT")
	}
	return t, nil
}

// lcVersion is one version of a key as the decisions see it.
type lcVersion struct {
	vid    string
	latest bool
	marker bool
	size   int64
	mtime  time.Time
	tags   map[string]string
	// class is the transition class recorded for the version ("" if
	// none: STANDARD), hsm its HSM state ("resident", "archived",
	// "released", "dirty"; "" if not read).
	class, hsm string
}

// lcAction is one thing a sweep does to a key: expire the current object
// (a delete without a version: a delete marker where versioning is on),
// delete a version for good, or transition version vid to class (moving
// its data to the tier, or recording the class of data there already).
type lcAction struct {
	vid     string
	current bool
	class   string // a transition's class; "" for a deletion
	move    bool   // the transition archives and releases the data
}

// lcDue is when something that started at start is due after days
// lifecycle days: rounded up to the next day boundary (midnight UTC for
// 24-hour days), as S3 does.
func lcDue(start time.Time, days int, day time.Duration) time.Time {
	t := start.Add(time.Duration(days) * day)
	if r := t.Sub(time.Unix(0, 0)) % day; r != 0 {
		t = t.Add(day - r)
	}
	return t
}

// matches reports whether the rule's filter selects a version of key.
func (r *lcRule) matches(key string, v lcVersion) bool {
	if !r.enabled || !strings.HasPrefix(key, r.prefix) {
		return false
	}
	if v.marker {
		return len(r.tags) == 0 && r.gt == nil && r.lt == nil
	}
	for k, want := range r.tags {
		if got, ok := v.tags[k]; !ok || got != want {
			return false
		}
	}
	if r.gt != nil && v.size <= *r.gt || r.lt != nil && v.size >= *r.lt {
		return false
	}
	return true
}

// lifecycleActions decides what the rules do now to a key whose versions
// are given newest first (the latest first when there is one). A version
// is noncurrent since the next newer one was made. Deletions come first;
// a version that is deleted (or the current object, expired) is not
// transitioned too.
func lifecycleActions(rules []lcRule, key string, versions []lcVersion, now time.Time, day time.Duration) []lcAction {
	var out []lcAction
	done := map[string]bool{}
	add := func(a lcAction) {
		k := a.vid
		if a.current {
			k = "\x00current"
		}
		if !done[k] {
			done[k] = true
			out = append(out, a)
		}
	}
	for i := range rules {
		r := &rules[i]
		if !r.enabled {
			continue
		}
		nc := 0 // noncurrent versions seen, newest first
		for j, v := range versions {
			if !r.matches(key, v) {
				if !v.latest {
					nc++
				}
				continue
			}
			if v.latest {
				switch {
				case v.marker:
					if r.expiredMarker && len(versions) == 1 {
						add(lcAction{vid: v.vid})
					}
				case r.expDays > 0 && !now.Before(lcDue(v.mtime, r.expDays, day)),
					!r.expDate.IsZero() && !now.Before(r.expDate):
					add(lcAction{vid: v.vid, current: true})
				}
				continue
			}
			nc++
			if r.ncDays == 0 || j == 0 || nc <= r.ncNewer {
				continue
			}
			if since := versions[j-1].mtime; !now.Before(lcDue(since, r.ncDays, day)) {
				add(lcAction{vid: v.vid})
			}
		}
	}
	for j, v := range versions {
		if done[v.vid] || v.latest && done["\x00current"] {
			continue
		}
		class := transitionDue(rules, key, versions, j, now, day)
		if class == "" {
			continue
		}
		if a, ok := transitionAction(v.vid, class, v.class, v.hsm); ok {
			out = append(out, a)
		}
	}
	return out
}

// abortsUpload reports whether the rules remove an incomplete multipart
// upload of key initiated at initiated.
func abortsUpload(rules []lcRule, key string, initiated, now time.Time, day time.Duration) bool {
	for _, r := range rules {
		if r.enabled && r.abortDays > 0 && strings.HasPrefix(key, r.prefix) && !now.Before(lcDue(initiated, r.abortDays, day)) {
			return true
		}
	}
	return false
}

// sweepPrefix is the longest prefix every enabled rule's keys share: the
// part of the bucket a sweep walks.
func sweepPrefix(rules []lcRule) string {
	first, p := true, ""
	for _, r := range rules {
		if !r.enabled {
			continue
		}
		if first {
			p, first = r.prefix, false
			continue
		}
		n := 0
		for n < len(p) && n < len(r.prefix) && p[n] == r.prefix[n] {
			n++
		}
		p = p[:n]
	}
	return p
}

func (g *Gateway) getBucketLifecycle(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	v, err := g.bucketAttr(rq.ctx, rq.bucket, xattrLifecycle)
	if err != nil {
		return err
	}
	if v == nil {
		return apiErr(errNoSuchLifecycle, "The lifecycle configuration does not exist")
	}
	var cfg lifecycleConfiguration
	if err := json.Unmarshal(v, &cfg); err != nil {
		return wrapErr(ErrInternal, errs.New(errs.Corruption, "s3: bucket %s has an unreadable lifecycle configuration: %v", rq.bucket, err), "%s", ErrInternal.Message)
	}
	cfg.Xmlns = s3Namespace
	return writeXML(rq, cfg)
}

func (g *Gateway) putBucketLifecycle(rq *request) error {
	body, err := g.readDocument(rq, true)
	if err != nil {
		return err
	}
	var cfg lifecycleConfiguration
	if _, err := decodeXML(body, &cfg, false); err != nil {
		return err
	}
	rules, err := compileLifecycle(&cfg)
	if err != nil {
		return err
	}
	if hasTransitions(rules) {
		if err := g.checkTransitionTier(rq.ctx); err != nil {
			return err
		}
	}
	val, err := json.Marshal(&cfg)
	if err != nil {
		return wrapErr(ErrInternal, err, "%s", ErrInternal.Message)
	}
	if len(val) > 60<<10 {
		return apiErr(ErrInvalidRequest, "The lifecycle configuration is too large: %d bytes stored, the limit is %d", len(val), 60<<10)
	}
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	if err := g.setBucketAttr(rq.ctx, rq.bucket, xattrLifecycle, val); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (g *Gateway) deleteBucketLifecycle(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	if err := g.setBucketAttr(rq.ctx, rq.bucket, xattrLifecycle, nil); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// lifecycleRules reads and compiles a bucket's rules (nil if none).
func (g *Gateway) lifecycleRules(ctx context.Context, bucket string) ([]lcRule, error) {
	v, err := g.c.GetXattr(ctx, "/"+bucket, xattrLifecycle)
	if err != nil {
		if c := errs.CodeOf(err); c == errs.NoData || c == errs.NotFound {
			return nil, nil
		}
		return nil, err
	}
	var cfg lifecycleConfiguration
	if err := json.Unmarshal(v, &cfg); err != nil {
		return nil, errs.New(errs.Corruption, "s3: bucket %s has an unreadable lifecycle configuration: %v", bucket, err)
	}
	return compileLifecycle(&cfg)
}

// lcCounts counts what a sweep did: versions, objects and uploads
// removed, versions transitioned.
type lcCounts struct {
	expired, transitioned int
}

func (n *lcCounts) add(m lcCounts) {
	n.expired += m.expired
	n.transitioned += m.transitioned
}

// sweepLifecycle applies every bucket's lifecycle rules once.
func (g *Gateway) sweepLifecycle(ctx context.Context) (lcCounts, error) {
	var n lcCounts
	for e, err := range g.c.ReadDir(ctx, "/") {
		if err != nil {
			return n, err
		}
		if !e.Mode.IsDir() || !validBucketName(e.Name) {
			continue
		}
		rules, err := g.lifecycleRules(ctx, e.Name)
		if err != nil {
			g.log.Warn("s3: cannot read a bucket's lifecycle rules", "bucket", e.Name, "err", err)
			continue
		}
		if rules == nil {
			continue
		}
		m, err := g.sweepBucket(ctx, e.Name, rules)
		n.add(m)
		if err != nil {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			g.log.Warn("s3: lifecycle sweep of a bucket failed", "bucket", e.Name, "err", err)
		}
	}
	return n, nil
}

// sweepBucket applies rules to the keys of bucket they cover. Without a
// transition tier, transitions that would move data are skipped (logged
// once per sweep of the bucket) and the rest goes on.
func (g *Gateway) sweepBucket(ctx context.Context, bucket string, rules []lcRule) (lcCounts, error) {
	now, day := g.now(), g.opts.LifecycleDay
	var n lcCounts
	prefix := sweepPrefix(rules)
	owner := g.bucketOwner(ctx, bucket)
	transitions := hasTransitions(rules)
	var backend string
	var tierErr error
	if transitions {
		backend, tierErr = g.transitionTier(ctx)
	}
	tierLogged := false
	for after := ""; ; {
		ns, err := g.listPage(ctx, bucket, prefix, "", after, 1000)
		if err != nil {
			return n, err
		}
		vs, err := g.versionKeys(ctx, bucket, prefix, "", after, 1000)
		if err != nil {
			return n, err
		}
		items, cut := mergeItems(ns.items, ns.truncated, vs.items, vs.truncated)
		for _, it := range items {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			rows, err := g.keyVersions(ctx, bucket, it.key)
			if err != nil {
				return n, err
			}
			versions := make([]lcVersion, len(rows))
			for i, r := range rows {
				v := lcVersion{vid: r.vid, latest: r.latest, marker: r.marker, size: r.info.attr.Size, mtime: r.info.attr.Mtime, tags: r.info.meta.Tags,
					class: r.info.meta.transitionClass(r.info.attr)}
				if transitions && v.class == "" && transitionWanted(rules, it.key, v) {
					// Left "" (nothing decided) if it cannot be read.
					if st, err := g.c.HsmStateIno(ctx, r.info.attr.Ino); err == nil {
						v.hsm = st.State
					} else {
						g.log.Warn("s3: lifecycle cannot read a version's HSM state", "bucket", bucket, "key", it.key, "version", r.vid, "err", err)
					}
				}
				versions[i] = v
			}
			for _, a := range lifecycleActions(rules, it.key, versions, now, day) {
				if a.class == "" {
					if err := g.applyLifecycle(ctx, bucket, it.key, a, rows, owner); err != nil {
						g.log.Warn("s3: lifecycle expiration failed", "bucket", bucket, "key", it.key, "version", a.vid, "err", err)
						continue
					}
					n.expired++
					continue
				}
				if a.move && tierErr != nil {
					if !tierLogged {
						g.log.Warn("s3: lifecycle transitions skipped: no tier backend to move objects to", "bucket", bucket, "err", tierErr)
						tierLogged = true
					}
					continue
				}
				i := slices.IndexFunc(rows, func(r versionRow) bool { return r.vid == a.vid })
				if i < 0 {
					continue
				}
				if err := g.applyTransition(ctx, a, rows[i], backend); err != nil {
					g.log.Warn("s3: lifecycle transition failed", "bucket", bucket, "key", it.key, "version", a.vid, "class", a.class, "err", err)
					continue
				}
				n.transitioned++
			}
		}
		if !cut || len(items) == 0 {
			break
		}
		after = items[len(items)-1].key
	}
	m, err := g.sweepUploads(ctx, bucket, rules, now, day)
	n.expired += m
	return n, err
}

// applyLifecycle does one action. The current object is expired only if
// it is still the version the decision was about.
func (g *Gateway) applyLifecycle(ctx context.Context, bucket, key string, a lcAction, rows []versionRow, owner string) error {
	if !a.current {
		_, err := g.deleteVersion(ctx, bucket, key, a.vid)
		return err
	}
	info, _, err := g.statObjectIn(ctx, bucket, key)
	if err != nil {
		if hasCode(err, ErrNoSuchKey.Code) {
			return nil
		}
		return err
	}
	if len(rows) == 0 || !rows[0].latest || info.attr.Ino != rows[0].info.attr.Ino || !info.attr.Mtime.Equal(rows[0].info.attr.Mtime) {
		return nil // replaced meanwhile
	}
	_, err = g.deleteObjectKey(ctx, bucket, key, owner)
	return err
}

// sweepUploads removes the incomplete multipart uploads the rules abort.
func (g *Gateway) sweepUploads(ctx context.Context, bucket string, rules []lcRule, now time.Time, day time.Duration) (int, error) {
	aborts := false
	for _, r := range rules {
		aborts = aborts || r.enabled && r.abortDays > 0
	}
	if !aborts {
		return 0, nil
	}
	n := 0
	for e, err := range g.c.ReadDir(ctx, uploadsDir(bucket)) {
		if err != nil {
			if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NotDir {
				return n, nil
			}
			return n, err
		}
		if !validUploadID(e.Name) {
			continue
		}
		b, err := g.c.GetXattr(ctx, uploadDir(bucket, e.Name), xattrUpload)
		if err != nil {
			continue
		}
		var info uploadInfo
		if json.Unmarshal(b, &info) != nil {
			continue
		}
		if abortsUpload(rules, info.Key, time.Unix(0, info.Initiated), now, day) {
			if err := g.c.RemoveAll(ctx, uploadDir(bucket, e.Name)); err != nil {
				g.log.Warn("s3: lifecycle cannot abort an upload", "bucket", bucket, "upload", e.Name, "err", err)
				continue
			}
			n++
		}
	}
	return n, nil
}

// lifecycleLoop sweeps every LifecycleSweepEvery until ctx ends.
func (g *Gateway) lifecycleLoop(ctx context.Context) {
	tick := time.NewTicker(g.opts.LifecycleSweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := g.sweepLifecycle(ctx)
		if err != nil && ctx.Err() == nil {
			g.log.Warn("s3: lifecycle sweep failed", "err", err)
		}
		if n.expired > 0 {
			g.log.Info("s3: lifecycle rules expired objects", "count", n.expired)
		}
		if n.transitioned > 0 {
			g.log.Info("s3: lifecycle rules transitioned objects", "count", n.transitioned)
		}
	}
}
