package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// Lifecycle transitions (docs/s3.md, "Lifecycle"): a Transition or
// NoncurrentVersionTransition moves an object's data to Sluice's object
// tier (docs/tier.md): the file is archived to the transition backend and
// released from the targets; its name, metadata and version stay. Every
// transition storage class goes to the same backend
// (Options.TransitionTier, else the only one registered); the class is
// recorded in the object's metadata xattr and reported as its
// StorageClass. What to do is decided by lifecycleActions from the rules,
// the versions (with their recorded class and HSM state) and the time;
// applyTransition only carries it out.

// transitionClasses are the storage classes a lifecycle rule may move
// objects to, from the warmest to the coldest: when several transitions
// of the rules are due for a version, the coldest wins, as S3 moves an
// object to the lowest-cost class when rules conflict.
var transitionClasses = []string{"INTELLIGENT_TIERING", "STANDARD_IA", "ONEZONE_IA", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"}

// coldness ranks a transition class (0: not one).
func coldness(class string) int {
	return slices.Index(transitionClasses, class) + 1
}

// minIADays is S3's shortest age for a transition to STANDARD_IA or
// ONEZONE_IA.
const minIADays = 30

var (
	// errNoTransitionTier refuses transitions when the gateway has no
	// backend to move objects to.
	errNoTransitionTier = errs.New(errs.Invalid, "s3: no transition tier")
)

type lifecycleTransition struct {
	Days         *int    `xml:"Days,omitempty" json:"days,omitempty"`
	Date         *string `xml:"Date,omitempty" json:"date,omitempty"`
	StorageClass string  `xml:"StorageClass" json:"class"`
}

type lifecycleNCTransition struct {
	NoncurrentDays          *int   `xml:"NoncurrentDays,omitempty" json:"days,omitempty"`
	NewerNoncurrentVersions *int   `xml:"NewerNoncurrentVersions,omitempty" json:"newer,omitempty"`
	StorageClass            string `xml:"StorageClass" json:"class"`
}

// lcTransition is a Transition (days from creation, or a date) or a
// NoncurrentVersionTransition (days from becoming noncurrent, sparing the
// newer newest noncurrent versions) in decision form.
type lcTransition struct {
	days  int
	date  time.Time // zero: by days
	newer int
	class string
}

// checkTransitionClass checks the StorageClass of a transition action.
func checkTransitionClass(action, class string, days *int, seen map[string]bool) error {
	switch {
	case class == "":
		return apiErr(ErrMalformedXML, "A %s action needs a StorageClass", action)
	case coldness(class) == 0:
		return apiErr(ErrInvalidStorageClass, "The storage class %q cannot be a lifecycle transition's: use one of %s", class, strings.Join(transitionClasses, ", "))
	case seen[class]:
		return apiErr(ErrInvalidArgument, "'StorageClass' must be different for '%s' actions in same 'Rule'", action)
	case days != nil && *days < minIADays && (class == "STANDARD_IA" || class == "ONEZONE_IA"):
		return apiErr(ErrInvalidArgument, "'Days' in %s action for StorageClass %s must be greater than or equal to %d", action, class, minIADays)
	}
	seen[class] = true
	return nil
}

// compileTransitions checks a rule's transitions as S3 does (and against
// its expirations, compiled into c already) and adds them to c.
func compileTransitions(r *lifecycleRule, c *lcRule) error {
	seen := map[string]bool{}
	byDate, byDays := false, false
	for _, t := range r.Transitions {
		if (t.Days == nil) == (t.Date == nil) {
			return apiErr(ErrMalformedXML, "Transition takes one of Days and Date")
		}
		if err := checkTransitionClass("Transition", t.StorageClass, t.Days, seen); err != nil {
			return err
		}
		ct := lcTransition{class: t.StorageClass}
		if t.Days != nil {
			if *t.Days < 0 {
				return apiErr(ErrInvalidArgument, "'Days' in Transition action must be nonnegative")
			}
			if c.expDays > 0 && *t.Days >= c.expDays {
				return apiErr(ErrInvalidArgument, "'Days' in the Expiration action must be greater than 'Days' in the Transition action")
			}
			ct.days, byDays = *t.Days, true
		} else {
			d, err := parseLifecycleDate(*t.Date)
			if err != nil {
				return err
			}
			if !c.expDate.IsZero() && !d.Before(c.expDate) {
				return apiErr(ErrInvalidArgument, "'Date' in the Expiration action must be later than 'Date' in the Transition action")
			}
			ct.date, byDate = d, true
		}
		c.transitions = append(c.transitions, ct)
	}
	if byDate && byDays {
		return apiErr(ErrInvalidArgument, "Found mixed 'Date' and 'Days' based Transition actions in lifecycle rule")
	}
	if byDate && c.expDays > 0 || byDays && !c.expDate.IsZero() {
		return apiErr(ErrInvalidArgument, "Found mixed 'Date' and 'Days' based Expiration and Transition actions in lifecycle rule")
	}
	seen = map[string]bool{}
	for _, t := range r.NoncurrentVersionTransitions {
		if t.NoncurrentDays == nil || *t.NoncurrentDays < 0 {
			return apiErr(ErrInvalidArgument, "'NoncurrentDays' for NoncurrentVersionTransition action must be a nonnegative integer")
		}
		if err := checkTransitionClass("NoncurrentVersionTransition", t.StorageClass, t.NoncurrentDays, seen); err != nil {
			return err
		}
		if c.ncDays > 0 && *t.NoncurrentDays >= c.ncDays {
			return apiErr(ErrInvalidArgument, "'NoncurrentDays' in the NoncurrentVersionExpiration action must be greater than 'NoncurrentDays' in the NoncurrentVersionTransition action")
		}
		ct := lcTransition{days: *t.NoncurrentDays, class: t.StorageClass}
		if n := t.NewerNoncurrentVersions; n != nil {
			if *n <= 0 || *n > 100 {
				return apiErr(ErrInvalidArgument, "'NewerNoncurrentVersions' must be from 1 to 100")
			}
			ct.newer = *n
		}
		c.ncTransitions = append(c.ncTransitions, ct)
	}
	return nil
}

// hasTransitions reports whether any rule (enabled or not) has one.
func hasTransitions(rules []lcRule) bool {
	for _, r := range rules {
		if len(r.transitions) > 0 || len(r.ncTransitions) > 0 {
			return true
		}
	}
	return false
}

// pickTransitionTier decides the backend transitions go to: the
// configured one, which must be registered, else the only one registered.
func pickTransitionTier(configured string, registered []string) (string, error) {
	if configured != "" {
		if slices.Contains(registered, configured) {
			return configured, nil
		}
		return "", fmt.Errorf("%w: the gateway's transition tier %q (--s3-transition-tier) is not a registered tier backend (sluice tier add)", errNoTransitionTier, configured)
	}
	switch len(registered) {
	case 1:
		return registered[0], nil
	case 0:
		return "", fmt.Errorf("%w: no tier backend is registered (sluice tier add)", errNoTransitionTier)
	}
	return "", fmt.Errorf("%w: %d tier backends are registered (%s): start the gateway with --s3-transition-tier NAME", errNoTransitionTier, len(registered), strings.Join(registered, ", "))
}

// transitionDue returns the coldest class the transitions of the rules
// that select version j of versions (newest first) have moved it to by
// now ("" if none).
func transitionDue(rules []lcRule, key string, versions []lcVersion, j int, now time.Time, day time.Duration) string {
	v := versions[j]
	best := ""
	pick := func(class string) {
		if coldness(class) > coldness(best) {
			best = class
		}
	}
	for i := range rules {
		r := &rules[i]
		if !r.enabled || v.marker || !r.matches(key, v) {
			continue
		}
		if v.latest {
			for _, t := range r.transitions {
				due := t.date
				if due.IsZero() {
					due = lcDue(v.mtime, t.days, day)
				}
				if !now.Before(due) {
					pick(t.class)
				}
			}
			continue
		}
		if j == 0 || len(r.ncTransitions) == 0 {
			continue
		}
		nc := 0 // this version's place among the noncurrent ones, newest first
		for _, w := range versions[:j+1] {
			if !w.latest {
				nc++
			}
		}
		since := versions[j-1].mtime
		for _, t := range r.ncTransitions {
			if nc > t.newer && !now.Before(lcDue(since, t.days, day)) {
				pick(t.class)
			}
		}
	}
	return best
}

// transitionAction decides what moving a version to class takes, from the
// class recorded for it and its HSM state: nothing if it is in that class
// already or archived without a recorded class (someone keeps it on the
// targets: an explicit archive); the class alone if its data is in the
// tier (a released file; one transitioned to a warmer class); else moving
// its data. An unknown state (not read) does nothing.
func transitionAction(vid, class, recorded, hsm string) (lcAction, bool) {
	switch {
	case recorded == class:
		return lcAction{}, false
	case recorded != "" || hsm == "released":
		return lcAction{vid: vid, class: class}, true
	case hsm == "resident" || hsm == "dirty":
		return lcAction{vid: vid, class: class, move: true}, true
	}
	return lcAction{}, false
}

// transitionWanted reports whether a transition of the rules selects v:
// only such versions need their HSM state read before deciding.
func transitionWanted(rules []lcRule, key string, v lcVersion) bool {
	for i := range rules {
		r := &rules[i]
		if r.enabled && !v.marker && (v.latest && len(r.transitions) > 0 || !v.latest && len(r.ncTransitions) > 0) && r.matches(key, v) {
			return true
		}
	}
	return false
}

// transitionTier returns the backend transitions go to now.
func (g *Gateway) transitionTier(ctx context.Context) (string, error) {
	bs, err := g.c.TierList(ctx)
	if err != nil {
		return "", err
	}
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Name
	}
	return pickTransitionTier(g.opts.TransitionTier, names)
}

// checkTransitionTier refuses a lifecycle configuration with transitions
// when there is no backend to move objects to.
func (g *Gateway) checkTransitionTier(ctx context.Context) error {
	if _, err := g.transitionTier(ctx); err != nil {
		if errors.Is(err, errNoTransitionTier) {
			return &APIError{Code: ErrInvalidStorageClass.Code, Status: http.StatusBadRequest,
				Message: "Lifecycle transitions move objects to Sluice's object tier, and this gateway has none to use: " + strings.TrimPrefix(err.Error(), errNoTransitionTier.Error()+": ")}
		}
		return wrapErr(ErrInternal, err, "%s", ErrInternal.Message)
	}
	return nil
}

// applyTransition carries out a transition of a version (row) of key: it
// archives the file to backend and releases it (a move), then records the
// class in the object's metadata. A file that is no longer the version
// decided about is left alone. A file kept inline in the metadata cannot
// be released: it stays archived and takes the class.
func (g *Gateway) applyTransition(ctx context.Context, a lcAction, row versionRow, backend string) error {
	info := row.info
	if a.move {
		fi, err := g.c.Lstat(ctx, info.path)
		if err != nil {
			if isNotExist(err) {
				return nil
			}
			return err
		}
		if cur := fi.Attr(); cur.Ino != info.attr.Ino || !cur.Mtime.Equal(info.attr.Mtime) || cur.Size != info.attr.Size {
			return nil // replaced or changed meanwhile
		}
		if _, err := g.c.HsmArchive(ctx, info.path, backend); err != nil {
			return err
		}
		if _, err := g.c.HsmRelease(ctx, info.path); err != nil && errs.CodeOf(err) != errs.NotSupported {
			return err
		}
	}
	return g.recordClass(ctx, info.attr, a.class)
}

// recordClass sets the storage class in the metadata xattr of file a (by
// inode: the file decided about, whatever its names are now). Metadata
// that no longer describes the file (changed through POSIX) keeps only
// what still applies, as findObject reports it, now for the file's size
// and mtime.
func (g *Gateway) recordClass(ctx context.Context, a *client.Attr, class string) error {
	m := &objectMeta{}
	raw, err := g.c.GetXattrIno(ctx, a.Ino, xattrMeta)
	switch {
	case err == nil:
		if d, ok := decodeMeta(raw); ok {
			m = d
		}
	case errs.CodeOf(err) != errs.NoData:
		return err
	}
	if !m.validFor(a) {
		m = &objectMeta{ContentType: m.ContentType, Headers: m.Headers, User: m.User, ACL: m.ACL, Owner: m.Owner, VersionID: m.VersionID, Tags: m.Tags,
			Size: a.Size, Mtime: a.Mtime.UnixNano()}
	}
	m.StorageClass = class
	return g.c.SetXattrIno(ctx, a.Ino, xattrMeta, m.encode(), 0)
}
