package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// DefaultMarker is the file whose presence commits a checkpoint directory:
// PyTorch DCP renames ".metadata.tmp" to it once every shard is written.
const DefaultMarker = ".metadata"

// Checkpoint is a directory of checkpoint files as `sluice checkpoint`
// sees it.
type Checkpoint struct {
	Path      string
	Committed bool      // holds the commit marker
	Time      time.Time // the marker's mtime (the directory's when none)
	Files     int
	Bytes     int64
	Staged    int // files whose data is still draining from a client
}

// AbsorbShow prints the absorb policy in force for directory p.
func (e *Env) AbsorbShow(ctx context.Context, p string) error {
	fi, err := e.Client.Stat(ctx, p)
	if err != nil || !fi.IsDir() {
		return err
	}
	pol, err := e.Client.GetAbsorb(ctx, p)
	if errs.CodeOf(err) == errs.NotSupported {
		return nil
	}
	if err != nil {
		return err
	}
	from := "default"
	if pol.From != 0 {
		from = fmt.Sprintf("set on inode %d", pol.From)
	}
	fmt.Fprintf(e.Stdout, "absorb: %s (%s)\n", pol.Mode, from)
	return nil
}

// Checkpoints lists the checkpoint directories at p: p itself when it is
// one (it holds marker), else its subdirectories, oldest first.
func (e *Env) Checkpoints(ctx context.Context, p, marker string) ([]Checkpoint, error) {
	staged, err := e.Client.StagedFiles(ctx)
	if err != nil && errs.CodeOf(err) != errs.NotSupported {
		return nil, err
	}
	pending := make(map[uint64]bool, len(staged))
	for _, s := range staged {
		pending[s.Ino] = true
	}
	if _, err := e.Client.Stat(ctx, path.Join(p, marker)); err == nil {
		ck, err := e.checkpoint(ctx, p, marker, pending)
		if err != nil {
			return nil, err
		}
		return []Checkpoint{ck}, nil
	}
	ents, err := e.Client.ReadDirAll(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []Checkpoint
	for _, d := range ents {
		if !d.Mode.IsDir() {
			continue
		}
		ck, err := e.checkpoint(ctx, path.Join(p, d.Name), marker, pending)
		if errs.CodeOf(err) == errs.NotFound {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ck)
	}
	SortCheckpoints(out)
	return out, nil
}

func (e *Env) checkpoint(ctx context.Context, dir, marker string, pending map[uint64]bool) (Checkpoint, error) {
	ck := Checkpoint{Path: dir}
	fi, err := e.Client.Stat(ctx, dir)
	if err != nil {
		return ck, err
	}
	ck.Time = fi.ModTime()
	err = e.Client.Walk(ctx, dir, func(p string, fi *client.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return nil
		}
		ck.Files++
		ck.Bytes += fi.Size()
		if pending[fi.Attr().Ino] {
			ck.Staged++
		}
		if p == path.Join(dir, marker) {
			ck.Committed = true
			ck.Time = fi.ModTime()
		}
		return nil
	})
	return ck, err
}

// SortCheckpoints orders checkpoints oldest first (by commit time, then
// path).
func SortCheckpoints(cks []Checkpoint) {
	slices.SortStableFunc(cks, func(a, b Checkpoint) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
}

// PrunePlan returns the checkpoints to remove so that the newest keep
// committed ones stay. Uncommitted directories are never removed: they may
// be checkpoints still being written. cks is sorted oldest first.
func PrunePlan(cks []Checkpoint, keep int) []Checkpoint {
	var committed []Checkpoint
	for _, ck := range cks {
		if ck.Committed {
			committed = append(committed, ck)
		}
	}
	if len(committed) <= keep {
		return nil
	}
	return committed[:len(committed)-max(keep, 0)]
}

// CheckpointLs prints the checkpoints at p.
func (e *Env) CheckpointLs(ctx context.Context, p, marker string) error {
	cks, err := e.Checkpoints(ctx, p, marker)
	if err != nil {
		return err
	}
	for _, ck := range cks {
		state := "committed"
		switch {
		case !ck.Committed:
			state = "incomplete"
		case ck.Staged > 0:
			state = "draining"
		}
		fmt.Fprintf(e.Stdout, "%-10s %s %6d files %12d bytes  %s\n", state, ck.Time.UTC().Format(time.RFC3339), ck.Files, ck.Bytes, ck.Path)
	}
	return nil
}

// ErrVerify is the error of a checkpoint verification that found damage.
var ErrVerify = errors.New("checkpoint verification failed")

// CheckpointVerify reads every file of each committed checkpoint at p in
// full: the storage targets check every 64 KiB block's CRC32C on the way,
// so a damaged or missing byte fails the read. It also checks that no
// file is still draining and that each file reads back its full size.
func (e *Env) CheckpointVerify(ctx context.Context, p, marker string) error {
	cks, err := e.Checkpoints(ctx, p, marker)
	if err != nil {
		return err
	}
	bad, n := 0, 0
	buf := make([]byte, 8<<20)
	for _, ck := range cks {
		if !ck.Committed {
			continue
		}
		n++
		var problems []string
		if ck.Staged > 0 {
			problems = append(problems, fmt.Sprintf("%d files still draining", ck.Staged))
		}
		err := e.Client.Walk(ctx, ck.Path, func(fp string, fi *client.FileInfo, err error) error {
			if err != nil {
				problems = append(problems, err.Error())
				return nil
			}
			if fi.IsDir() {
				return nil
			}
			if err := readAll(ctx, e.Client, fp, fi.Size(), buf); err != nil {
				problems = append(problems, err.Error())
			}
			return nil
		})
		if err != nil {
			problems = append(problems, err.Error())
		}
		if len(problems) > 0 {
			bad++
			fmt.Fprintf(e.Stdout, "FAIL %s: %s\n", ck.Path, strings.Join(problems, "; "))
		} else {
			fmt.Fprintf(e.Stdout, "ok   %s: %d files, %d bytes\n", ck.Path, ck.Files, ck.Bytes)
		}
	}
	if n == 0 {
		return errs.New(errs.NotFound, "no committed checkpoint (no %s) at %s", marker, p)
	}
	if bad > 0 {
		return fmt.Errorf("%w: %d of %d checkpoints damaged", ErrVerify, bad, n)
	}
	return nil
}

func readAll(ctx context.Context, c *client.Client, p string, size int64, buf []byte) error {
	f, err := c.Open(ctx, p)
	if err != nil {
		return err
	}
	defer f.Close()
	var got int64
	for {
		n, err := f.ReadAtContext(ctx, buf, got)
		got += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if got != size {
		return fmt.Errorf("%s: read %d bytes, size is %d", p, got, size)
	}
	return nil
}

// CheckpointPrune removes all but the newest keep committed checkpoints
// at p.
func (e *Env) CheckpointPrune(ctx context.Context, p, marker string, keep int, dryRun bool) error {
	if keep < 0 {
		return errs.New(errs.Invalid, "--keep must be 0 or more")
	}
	cks, err := e.Checkpoints(ctx, p, marker)
	if err != nil {
		return err
	}
	if len(cks) == 1 && cks[0].Path == path.Clean(p) {
		return errs.New(errs.Invalid, "%s is a checkpoint: prune takes the directory holding checkpoints", p)
	}
	for _, ck := range PrunePlan(cks, keep) {
		fmt.Fprintf(e.Stdout, "remove %s\n", ck.Path)
		if dryRun {
			continue
		}
		// The marker first: a crash midway leaves an incomplete
		// directory, never a committed checkpoint with files missing.
		if err := e.Client.Remove(ctx, path.Join(ck.Path, marker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := e.Client.RemoveAll(ctx, ck.Path); err != nil {
			return err
		}
	}
	return nil
}
