package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/meta"
)

// syncModeValue is the flag value of --meta-sync.
type syncModeValue struct{ m *kv.SyncMode }

func (v syncModeValue) String() string { return v.m.String() }
func (v syncModeValue) Type() string   { return "group|always" }
func (v syncModeValue) Set(s string) error {
	m, err := kv.ParseSyncMode(s)
	if err != nil {
		return err
	}
	*v.m = m
	return nil
}

// metaSyncFlags registers --meta-sync and --meta-sync-window, the
// embedded metadata engine's durability policy (ADR 0006).
func metaSyncFlags(cmd *cobra.Command, mode *kv.SyncMode, window *time.Duration) {
	*mode = kv.SyncGroup
	f := cmd.Flags()
	f.Var(syncModeValue{mode}, "meta-sync", "when metadata changes become durable against power loss: "+
		"group (acknowledged once written, which survives a crash of the process; synced within --meta-sync-window, "+
		"and at once on fsync, fsyncdir, close of an O_SYNC file and S3 PUT) or always (synced before every reply)")
	f.DurationVar(window, "meta-sync-window", kv.DefaultSyncWindow, "with --meta-sync group: the longest an acknowledged metadata change waits for its sync")
}

// inlineSize is the flag value of --inline-max.
type inlineSize struct{ n *int }

func (v inlineSize) String() string { return fmt.Sprint(*v.n) }
func (v inlineSize) Type() string   { return "size" }
func (v inlineSize) Set(s string) error {
	n, err := cli.ParseSize(s)
	if err != nil {
		return err
	}
	if n < 0 || n > meta.MaxInlineMax {
		return fmt.Errorf("%d bytes is not between 0 and %d", n, meta.MaxInlineMax)
	}
	*v.n = int(n)
	if n == 0 {
		*v.n = -1 // meta.Options: none
	}
	return nil
}

// inlineMaxFlag registers --inline-max: the most bytes of a file the
// metadata service keeps itself (inline data, ADR 0009).
func inlineMaxFlag(cmd *cobra.Command, n *int) {
	*n = 0 // meta.Options: the engine's default
	cmd.Flags().Var(inlineSize{n}, "inline-max", "keep files' first bytes up to this size in the metadata service instead of chunks "+
		"(small files then need no storage target I/O; default 16 KiB; 0: never)")
}

// auditFlag registers --audit (default on): whether the metadata service
// records namespace changes in its audit trail (docs/audit.md).
func auditFlag(cmd *cobra.Command, noAudit *bool) {
	cmd.Flags().Var(negBool{noAudit}, "audit", "record permission, owner and layout changes, removals and renames "+
		"in the hash-chained audit trail (--audit=false: do not)")
	cmd.Flags().Lookup("audit").NoOptDefVal = "true"
}

// negBool is a bool flag that stores its negation.
type negBool struct{ p *bool }

func (b negBool) String() string {
	if b.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*b.p)
}

func (b negBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.p = !v
	return nil
}

func (negBool) Type() string { return "bool" }
