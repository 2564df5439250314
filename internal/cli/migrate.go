package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// MigrateArgs are the arguments of sluice migrate.
type MigrateArgs struct {
	Paths     []string
	Recursive bool
	Spec      client.MigrateSpec
	Opts      client.MigrateOptions
	Quiet     bool
	Verbose   bool // print each file's phases as they start
	// PauseAt, for tests, stops each migration before the phase named
	// until the process is killed (sluice migrate --pause-at, hidden).
	PauseAt string
}

// Migrate moves the data of each regular file named (with Recursive, of
// every regular file below each directory named) to the new layout, one
// file at a time, and prints a line per file and a total. A file that
// fails is reported and the others go on; the error says how many failed.
func (e *Env) Migrate(ctx context.Context, a MigrateArgs) error {
	start := time.Now()
	var files int
	var bytes int64
	var failures []error
	fail := func(err error) {
		// One failure is the command's error; more are printed as they
		// come, then counted.
		failures = append(failures, err)
		switch len(failures) {
		case 1:
		case 2:
			fmt.Fprintf(e.Stderr, "sluice migrate: %v\n", failures[0])
			fallthrough
		default:
			fmt.Fprintf(e.Stderr, "sluice migrate: %v\n", err)
		}
	}
	one := func(p string) {
		opts := a.Opts
		if a.Verbose || a.PauseAt != "" {
			opts.Phase = func(phase string, to client.Layout) {
				if a.Verbose {
					fmt.Fprintf(e.Stdout, "%s: %s (to %s)\n", p, phase, formatLayout(to))
				}
				if phase == a.PauseAt {
					fmt.Fprintf(e.Stdout, "%s: paused before %s\n", p, phase)
					<-ctx.Done()
				}
			}
		}
		res, err := e.Client.Migrate(ctx, p, a.Spec, opts)
		if err != nil {
			fail(err)
			return
		}
		files++
		bytes += res.Bytes + res.Recopied
		if !a.Quiet {
			fmt.Fprintf(e.Stdout, "%s\t%s -> %s\t%d bytes copied, %d again after the freeze\n",
				p, formatLayout(res.Old), formatLayout(res.New), res.Bytes, res.Recopied)
		}
	}
	for _, p := range a.Paths {
		fi, err := e.Client.Stat(ctx, p)
		if err != nil {
			fail(err)
			continue
		}
		switch {
		case fi.Mode().IsRegular():
			one(p)
		case fi.IsDir() && a.Recursive:
			err := e.Client.Walk(ctx, p, func(q string, fi *client.FileInfo, err error) error {
				if err != nil {
					return err
				}
				if fi.Mode().IsRegular() {
					one(q)
				}
				return ctx.Err()
			})
			if err != nil {
				fail(fmt.Errorf("walk %s: %w", p, err))
			}
		case fi.IsDir():
			fail(fmt.Errorf("%s is a directory (use -r)", p))
		default:
			fail(fmt.Errorf("%s is not a regular file", p))
		}
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(e.Stdout, "migrated %d files, %d bytes in %.1f s (%.1f MiB/s)\n", files, bytes, secs, float64(bytes)/(1<<20)/max(secs, 1e-9))
	switch len(failures) {
	case 0:
		return nil
	case 1:
		return failures[0]
	}
	return fmt.Errorf("%d files failed to migrate; each keeps its old layout", len(failures))
}
