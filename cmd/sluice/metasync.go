package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/kv"
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
