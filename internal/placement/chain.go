package placement

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sluice-fs/sluice/internal/errs"
)

// ChainID names a replication chain cluster-wide. A file's layout maps each
// of its slots to a chain; the chain's replicas hold copies of the slot's
// chunk.
//
// The chain of one replica on target t has ID t (so a single-node system's
// chains are its targets, and layouts written before chains existed still
// read right). Chains of two or more replicas have IDs at or above
// FirstReplicatedChain, given out by the metadata service.
type ChainID uint32

// FirstReplicatedChain is the lowest ID of a chain with two or more
// replicas; target IDs stay below it.
const FirstReplicatedChain ChainID = 1 << 31

// MaxReplicas bounds a layout's replica count.
const MaxReplicas = 3

// ReplicaState is a replica's role in its chain.
type ReplicaState uint8

const (
	// Serving replicas hold every acknowledged write: they take writes and
	// serve reads.
	Serving ReplicaState = 1
	// Syncing replicas take writes (they are at the end of the write path)
	// but serve no reads: the last serving replica is copying to them what
	// they missed. They become Serving when that copy is done.
	Syncing ReplicaState = 2
	// Offline replicas are out of the chain: their node stopped
	// heart-beating. They take nothing until their node returns and they
	// have synced.
	Offline ReplicaState = 3
)

func (s ReplicaState) String() string {
	switch s {
	case Serving:
		return "serving"
	case Syncing:
		return "syncing"
	case Offline:
		return "offline"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Replica is one member of a chain.
type Replica struct {
	Target TargetID
	State  ReplicaState
}

// Chain is a replication chain: an ordered list of replicas on targets of
// different nodes. The order is the write path: serving replicas first
// (the first is the head, which clients write to), then syncing ones, then
// offline ones (not in the path). Every change bumps Version; clients and
// targets put the version they know in each request, and a target that
// knows another version refuses the request, so nobody acts on a stale
// chain.
//
// A chain always keeps at least one serving replica: the last one is never
// taken out, because only it holds every acknowledged write. While its node
// is down, the chain is unavailable.
type Chain struct {
	ID       ChainID
	Version  uint64
	Replicas []Replica
}

// Writers returns the write path: the serving then the syncing replicas.
func (c *Chain) Writers() []TargetID {
	out := make([]TargetID, 0, len(c.Replicas))
	for _, r := range c.Replicas {
		if r.State == Serving || r.State == Syncing {
			out = append(out, r.Target)
		}
	}
	return out
}

// Readers returns the serving replicas, which may serve reads.
func (c *Chain) Readers() []TargetID {
	out := make([]TargetID, 0, len(c.Replicas))
	for _, r := range c.Replicas {
		if r.State == Serving {
			out = append(out, r.Target)
		}
	}
	return out
}

// Head returns the first serving replica.
func (c *Chain) Head() (TargetID, bool) {
	for _, r := range c.Replicas {
		if r.State == Serving {
			return r.Target, true
		}
	}
	return 0, false
}

// Tail returns the last serving replica: it holds every acknowledged write
// and is the source of resyncs.
func (c *Chain) Tail() (TargetID, bool) {
	var t TargetID
	found := false
	for _, r := range c.Replicas {
		if r.State == Serving {
			t, found = r.Target, true
		}
	}
	return t, found
}

// State returns target t's state in the chain, and whether it is a member.
func (c *Chain) State(t TargetID) (ReplicaState, bool) {
	for _, r := range c.Replicas {
		if r.Target == t {
			return r.State, true
		}
	}
	return 0, false
}

// Next returns the replica after t on the write path, if any. ok is false
// when t is not on the write path.
func (c *Chain) Next(t TargetID) (next TargetID, hasNext, ok bool) {
	w := c.Writers()
	i := slices.Index(w, t)
	if i < 0 {
		return 0, false, false
	}
	if i+1 < len(w) {
		return w[i+1], true, true
	}
	return 0, false, true
}

// Prev returns the replica before t on the write path; ok is false when t
// is the head or not on the path.
func (c *Chain) Prev(t TargetID) (prev TargetID, ok bool) {
	w := c.Writers()
	i := slices.Index(w, t)
	if i <= 0 {
		return 0, false
	}
	return w[i-1], true
}

// Clone returns a deep copy.
func (c Chain) Clone() Chain {
	c.Replicas = slices.Clone(c.Replicas)
	return c
}

func (c Chain) String() string {
	s := fmt.Sprintf("chain %d v%d [", c.ID, c.Version)
	for i, r := range c.Replicas {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%s", r.Target, r.State)
	}
	return s + "]"
}

// Validate checks a chain's shape: 1 to MaxChainMembers distinct replicas
// with known states, ordered serving, syncing, offline, and at least one
// serving.
func (c *Chain) Validate() error {
	if len(c.Replicas) == 0 || len(c.Replicas) > MaxChainMembers {
		return errs.New(errs.Invalid, "placement: chain %d has %d replicas, want 1 to %d", c.ID, len(c.Replicas), MaxChainMembers)
	}
	seen := make(map[TargetID]bool, len(c.Replicas))
	last := Serving
	for _, r := range c.Replicas {
		if r.State < Serving || r.State > Offline {
			return errs.New(errs.Invalid, "placement: chain %d: replica on target %d has unknown state %d", c.ID, r.Target, r.State)
		}
		if r.State < last {
			return errs.New(errs.Invalid, "placement: chain %d: replicas out of order (%v)", c.ID, c)
		}
		last = r.State
		if seen[r.Target] {
			return errs.New(errs.Invalid, "placement: chain %d names target %d twice", c.ID, r.Target)
		}
		seen[r.Target] = true
	}
	if c.Replicas[0].State != Serving {
		return errs.New(errs.Invalid, "placement: chain %d has no serving replica", c.ID)
	}
	return nil
}

// setState moves target t to state st, keeping the order serving, syncing,
// offline: a replica that becomes serving goes after the other serving ones
// (it is the new tail), one that becomes syncing after the other syncing
// ones, one that goes offline to the end. It bumps Version if anything
// changed and reports whether it did.
func (c *Chain) setState(t TargetID, st ReplicaState) bool {
	i := slices.IndexFunc(c.Replicas, func(r Replica) bool { return r.Target == t })
	if i < 0 || c.Replicas[i].State == st {
		return false
	}
	rs := slices.Delete(slices.Clone(c.Replicas), i, i+1)
	pos := len(rs)
	for j, r := range rs {
		if r.State > st {
			pos = j
			break
		}
	}
	c.Replicas = slices.Insert(rs, pos, Replica{Target: t, State: st})
	c.Version++
	return true
}

// TakeOffline takes target t out of the write path because its node stopped
// heart-beating. The last serving replica stays: the chain then waits for
// it. It reports whether the chain changed.
func (c *Chain) TakeOffline(t TargetID) bool {
	st, ok := c.State(t)
	if !ok || st == Offline {
		return false
	}
	if st == Serving && len(c.Readers()) == 1 {
		return false
	}
	return c.setState(t, Offline)
}

// StartSync puts target t, whose node is back or restarted, at the end of
// the write path as a syncing replica. A serving replica is demoted unless
// it is the last serving one (then nobody has data it could lack). It
// reports whether the chain changed.
func (c *Chain) StartSync(t TargetID) bool {
	st, ok := c.State(t)
	if !ok || st == Syncing {
		return false
	}
	if st == Serving && len(c.Readers()) == 1 {
		return false
	}
	return c.setState(t, Syncing)
}

// FinishSync makes syncing target t serving, if the chain is still at
// version ver (the version the copy was made for). It reports whether the
// chain changed.
func (c *Chain) FinishSync(t TargetID, ver uint64) bool {
	if c.Version != ver {
		return false
	}
	if st, ok := c.State(t); !ok || st != Syncing {
		return false
	}
	return c.setState(t, Serving)
}

// NodeTarget is what FormChains knows of a target.
type NodeTarget struct {
	ID   TargetID
	Node string
}

// nodesOf returns each target's node and the number of nodes.
func nodesOf(all []NodeTarget) (map[TargetID]string, int) {
	node := make(map[TargetID]string, len(all))
	seen := make(map[string]bool)
	for _, t := range all {
		node[t.ID] = t.Node
		seen[t.Node] = true
	}
	return node, len(seen)
}

// FormChains makes chains of r replicas (2 <= r <= MaxReplicas) for the
// targets in heads that have none yet: one chain headed by each, followed
// by r-1 targets of other nodes, picking the targets that are in the fewest
// chains so far (load counts existing memberships and is updated). IDs are
// given from next on. It fails with errs.Invalid when fewer than r nodes
// exist.
func FormChains(all []NodeTarget, heads []TargetID, r int, load map[TargetID]int, next ChainID) ([]Chain, error) {
	if r < 2 || r > MaxReplicas {
		return nil, errs.New(errs.Invalid, "placement: replicated chains need 2 to %d replicas, not %d", MaxReplicas, r)
	}
	node, nodes := nodesOf(all)
	if nodes < r {
		return nil, errs.New(errs.Invalid, "placement: %d replicas need targets on %d different nodes, but the cluster has %d node(s)", r, r, nodes)
	}
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b NodeTarget) int { return cmp.Compare(a.ID, b.ID) })
	var out []Chain
	for _, h := range heads {
		c := Chain{ID: next, Version: 1, Replicas: []Replica{{Target: h, State: Serving}}}
		used := map[string]bool{node[h]: true}
		load[h]++
		for len(c.Replicas) < r {
			best, found := TargetID(0), false
			// Start after the head, so that ties spread followers round
			// the ring rather than piling onto the lowest IDs.
			start := slices.IndexFunc(sorted, func(t NodeTarget) bool { return t.ID > h })
			for k := range sorted {
				t := sorted[(max(start, 0)+k)%len(sorted)]
				if used[t.Node] {
					continue
				}
				if !found || load[t.ID] < load[best] {
					best, found = t.ID, true
				}
			}
			if !found {
				return nil, errs.New(errs.Invalid, "placement: no target on a further node for chain %d", next)
			}
			used[node[best]] = true
			load[best]++
			c.Replicas = append(c.Replicas, Replica{Target: best, State: Serving})
		}
		out = append(out, c)
		next++
	}
	return out, nil
}

// allFull reports whether no candidate's head has free space (then full
// heads are used: the create works and writes say ENOSPC).
func allFull(candidates []Chain, free map[TargetID]bool) bool {
	for _, c := range candidates {
		if h, ok := c.Head(); ok && free[h] {
			return false
		}
	}
	return true
}

// ChooseChains picks count distinct chains for a new file from candidates
// (chains of the wanted replica count), preferring chains whose replicas are
// all serving and whose head has free space, rotating the start by seed (the
// inode number). It fails with errs.NoSpace when too few chains can take
// writes.
func ChooseChains(candidates []Chain, free map[TargetID]bool, count int, seed uint64) ([]ChainID, error) {
	if count <= 0 {
		return nil, errs.New(errs.Invalid, "placement: stripe count must be positive, got %d", count)
	}
	anyFree := !allFull(candidates, free)
	var full, degraded []ChainID
	for _, c := range candidates {
		h, ok := c.Head()
		if !ok || (!free[h] && anyFree) {
			continue
		}
		if len(c.Readers()) == len(c.Replicas) {
			full = append(full, c.ID)
		} else {
			degraded = append(degraded, c.ID)
		}
	}
	slices.Sort(full)
	slices.Sort(degraded)
	ok := append(full, degraded...)
	if count > len(ok) {
		return nil, errs.New(errs.NoSpace, "placement: layout asks for %d chains but only %d can take writes", count, len(ok))
	}
	out := make([]ChainID, count)
	// Rotate within the fully healthy chains first.
	n := len(full)
	if n < count {
		n = len(ok)
	}
	start := int(seed % uint64(n))
	for i := range out {
		out[i] = ok[(start+i)%n]
	}
	return out, nil
}

// TopUpChains returns the chains of r replicas to add so that every
// target in all (the targets that may join chains in one scope: the
// cluster, or a pool) is in at least r of the scope's chains of r replicas
// (chains), as FormChains leaves every target of a balanced cluster: a
// target that joined later, or came back after its replicas were replaced,
// would otherwise hold no data of r replicas until a rebalance could move
// some to it. A target short of chains heads one if it heads none, and
// follows in the others; the other replicas are the targets of further
// nodes in the fewest chains. IDs are given from next on. It returns nil
// when fewer than r nodes exist.
func TopUpChains(all []NodeTarget, chains []Chain, r int, next ChainID) []Chain {
	if r < 2 || r > MaxReplicas {
		return nil
	}
	node, nodes := nodesOf(all)
	if nodes < r {
		return nil
	}
	load := make(map[TargetID]int)
	heads := make(map[TargetID]bool)
	for _, c := range chains {
		if len(c.Replicas) != r {
			continue
		}
		for i, rep := range c.Replicas {
			load[rep.Target]++
			if i == 0 {
				heads[rep.Target] = true
			}
		}
	}
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b NodeTarget) int { return cmp.Compare(a.ID, b.ID) })
	// least returns the target in the fewest chains on a node not in used,
	// searching round the ring from after t.
	least := func(t TargetID, used map[string]bool) (TargetID, bool) {
		start := max(slices.IndexFunc(sorted, func(x NodeTarget) bool { return x.ID > t }), 0)
		best, found := TargetID(0), false
		for k := range sorted {
			x := sorted[(start+k)%len(sorted)]
			if !used[x.Node] && (!found || load[x.ID] < load[best]) {
				best, found = x.ID, true
			}
		}
		return best, found
	}
	var out []Chain
	for _, t := range sorted {
		for load[t.ID] < r {
			used := map[string]bool{t.Node: true}
			members := []TargetID{t.ID}
			for len(members) < r {
				p, ok := least(t.ID, used)
				if !ok {
					return out // cannot happen: r nodes exist
				}
				used[node[p]] = true
				members = append(members, p)
			}
			if heads[t.ID] {
				// It heads one already: it follows the least-loaded
				// partner here.
				members[0], members[1] = members[1], members[0]
			}
			c := Chain{ID: next, Version: 1}
			for _, m := range members {
				load[m]++
				c.Replicas = append(c.Replicas, Replica{Target: m, State: Serving})
			}
			heads[members[0]] = true
			out = append(out, c)
			next++
		}
	}
	return out
}
