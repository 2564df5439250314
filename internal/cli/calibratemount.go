package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/advise"
	"github.com/sluice-fs/sluice/internal/fusefs"
)

// The mount cells' grid: sequential writes of these sizes from 1 and 4
// streams, through a mount without and with the kernel's write-back cache.
var calMountSizes = []int64{4 << 10, 16 << 10, 64 << 10, 1 << 20}

// calibrateMount measures the model's mount cells: it mounts the file
// system twice in this process (each mount with a client of its own, on a
// temporary directory), one with the write-back cache, and writes files
// of o.Size bytes per stream through each in turn, the two mounts
// alternating at every cell. The noise is as for the layouts' cells.
func (e *Env) calibrateMount(ctx context.Context, o CalibrateOptions) ([]advise.Cell, float64, error) {
	mounts := map[bool]string{}
	for _, wbc := range []bool{false, true} {
		mp, unmount, err := e.mountOwn(ctx, e.Client.Options(), wbc)
		if err != nil {
			return nil, 0, fmt.Errorf("advise calibrate --mount: %w", err)
		}
		defer unmount()
		mounts[wbc] = mp
	}
	dir := o.Scratch + "/mount"
	if err := e.Client.MkdirAll(ctx, dir, 0o700); err != nil {
		return nil, 0, err
	}
	defer e.Client.RemoveAll(context.WithoutCancel(ctx), dir)
	var runs [][]advise.Cell
	for run := range o.Runs {
		var cells []advise.Cell
		for _, streams := range calStreams {
			for _, req := range calMountSizes {
				for _, wbc := range []bool{false, true} {
					mbps, err := mountSeqWrite(filepath.Join(mounts[wbc], dir), streams, req, o.Size)
					if err != nil {
						return nil, 0, err
					}
					cells = append(cells, advise.Cell{Op: "write", Pattern: "seq", ReqSize: req, Streams: streams, WritebackCache: wbc, MBps: mbps})
				}
			}
		}
		if !o.Quiet {
			fmt.Fprintf(e.Stderr, "run %d, through mounts: %d cells measured\n", run+1, len(cells))
		}
		runs = append(runs, cells)
	}
	var noise float64
	for i := 1; i < len(runs); i++ {
		noise = max(noise, advise.MeasuredNoise(runs[0], runs[i]))
	}
	return advise.Average(runs...), noise, nil
}

// mountOwn mounts the file system on a new temporary directory, served by
// this process through a client of its own made with opts, with the
// kernel's write-back cache if wbc; unmount unmounts it and removes the
// directory.
func (e *Env) mountOwn(ctx context.Context, opts client.Options, wbc bool) (mp string, unmount func(), err error) {
	mp, err = os.MkdirTemp("", "sluice-advise-mount-")
	if err != nil {
		return "", nil, err
	}
	c, err := client.New(ctx, opts)
	if err != nil {
		os.Remove(mp)
		return "", nil, err
	}
	m, err := fusefs.Mount(ctx, c, fusefs.Options{Mountpoint: mp, Server: opts.Server, WritebackCache: wbc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		c.Close()
		os.Remove(mp)
		return "", nil, fmt.Errorf("%w (a mount needs /dev/fuse and, here, root)", err)
	}
	return mp, func() {
		m.Unmount(context.WithoutCancel(ctx))
		c.Close()
		os.Remove(mp)
	}, nil
}

// mountSeqWrite writes a file of size bytes per stream in dir (a
// directory of a mount) in req-sized writes, closes it (which sends the
// kernel's cached pages to the mount) and removes it; it returns the
// streams' MB/s together, up to the closes.
func mountSeqWrite(dir string, streams int, req, size int64) (float64, error) {
	buf := make([]byte, req)
	fillRandom(buf, uint64(req))
	mbps, err := parallel(streams, func(i int) (int64, error) {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("s%d", i)))
		if err != nil {
			return 0, err
		}
		for off := int64(0); off < size; off += req {
			if _, err := f.Write(buf[:min(req, size-off)]); err != nil {
				f.Close()
				return 0, err
			}
		}
		return size, f.Close()
	})
	for i := range streams {
		os.Remove(filepath.Join(dir, fmt.Sprintf("s%d", i)))
	}
	return mbps, err
}
