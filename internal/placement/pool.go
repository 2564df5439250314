package placement

import (
	"slices"

	"github.com/sluice-fs/sluice/internal/errs"
)

// MaxPoolName is the longest pool name, in bytes.
const MaxPoolName = 64

// ValidPoolName checks a pool name: 1 to MaxPoolName bytes of lowercase
// letters, digits, '-', '_' and '.', starting with a letter or digit.
func ValidPoolName(name string) error {
	if name == "" || len(name) > MaxPoolName {
		return errs.New(errs.Invalid, "placement: pool name %q must be 1 to %d bytes", name, MaxPoolName)
	}
	for i, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '-' || c == '_' || c == '.')
		if !ok {
			return errs.New(errs.Invalid, "placement: pool name %q: use lowercase letters, digits, '-', '_' and '.', starting with a letter or digit", name)
		}
	}
	return nil
}

// PoolTargets keeps the targets that are members of a pool, in their
// order. The one-replica placement (Choose) then picks among them only.
func PoolTargets(targets []TargetInfo, members []TargetID) []TargetInfo {
	var out []TargetInfo
	for _, t := range targets {
		if slices.Contains(members, t.ID) {
			out = append(out, t)
		}
	}
	return out
}

// PoolChains keeps the chains whose replicas are all members of a pool:
// a file of the pool must not have a copy outside it.
func PoolChains(chains []Chain, members []TargetID) []Chain {
	var out []Chain
	for _, c := range chains {
		if len(c.Replicas) > 0 && !slices.ContainsFunc(c.Replicas, func(r Replica) bool { return !slices.Contains(members, r.Target) }) {
			out = append(out, c)
		}
	}
	return out
}

// ChangePool returns a pool's members after adding (add) or removing
// targets, sorted and without duplicates. Adding a member or removing a
// non-member is errs.Invalid, so that a mistyped ID is not lost silently;
// known says which targets exist.
func ChangePool(members, targets []TargetID, add bool, known func(TargetID) bool) ([]TargetID, error) {
	out := slices.Clone(members)
	for _, t := range targets {
		in := slices.Contains(out, t)
		switch {
		case add && !known(t):
			return nil, errs.New(errs.NotFound, "placement: target %d does not exist", t)
		case add && in:
			return nil, errs.New(errs.Invalid, "placement: target %d is in the pool already", t)
		case add:
			out = append(out, t)
		case !in:
			return nil, errs.New(errs.Invalid, "placement: target %d is not in the pool", t)
		default:
			out = slices.DeleteFunc(out, func(x TargetID) bool { return x == t })
		}
	}
	slices.Sort(out)
	return out, nil
}
