package fuse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helperEnv, when set, makes the test binary a helper: it performs the
// operations the variable holds (JSON) as its own user and prints the
// errno of each. Tests run it under another uid to check permissions.
const helperEnv = "SLUICE_FUSE_HELPER"

type helperOp struct {
	Op    string // open, mkdir, unlink, rmdir, rename, chmod, chown, truncate, utimes, read, write
	Path  string
	Path2 string `json:",omitempty"`
	Flags int    `json:",omitempty"`
	Mode  uint32 `json:",omitempty"`
	Size  int64  `json:",omitempty"`
}

func runHelper() int {
	var ops []helperOp
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &ops); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	res := make([]int, len(ops))
	for i, op := range ops {
		res[i] = int(errnoOf(doOp(op)))
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

func doOp(op helperOp) error {
	switch op.Op {
	case "open":
		fd, err := syscall.Open(op.Path, op.Flags|syscall.O_CLOEXEC, op.Mode)
		if err == nil {
			syscall.Close(fd)
		}
		return err
	case "mkdir":
		return syscall.Mkdir(op.Path, op.Mode)
	case "unlink":
		return syscall.Unlink(op.Path)
	case "rmdir":
		return syscall.Rmdir(op.Path)
	case "rename":
		return syscall.Rename(op.Path, op.Path2)
	case "chmod":
		return syscall.Chmod(op.Path, op.Mode)
	case "chown":
		return syscall.Chown(op.Path, int(op.Size), -1)
	case "truncate":
		return syscall.Truncate(op.Path, op.Size)
	case "utimes":
		return syscall.UtimesNano(op.Path, []syscall.Timespec{{Sec: 1, Nsec: 0}, {Sec: 1, Nsec: 0}})
	case "read":
		f, err := os.Open(op.Path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.ReadAll(f)
		return err
	case "write":
		f, err := os.OpenFile(op.Path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.Write([]byte("x"))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return syscall.ENOSYS
}

// errnoOf returns the errno err carries (0 for nil, EIO if none).
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return syscall.EIO
}

var (
	helperOnce sync.Once
	helperBin  string
	helperErr  error
)

// asUser runs ops as uid/gid in a helper process and returns their errnos.
func asUser(t testing.TB, uid, gid uint32, ops ...helperOp) []syscall.Errno {
	t.Helper()
	helperOnce.Do(func() {
		// The test binary lives in a directory only root can enter: copy it.
		dir, err := os.MkdirTemp("", "sluice-fuse-helper")
		if err != nil {
			helperErr = err
			return
		}
		os.Chmod(dir, 0o755)
		helperBin = filepath.Join(dir, "helper")
		src, err := os.ReadFile(os.Args[0])
		if err != nil {
			helperErr = err
			return
		}
		helperErr = os.WriteFile(helperBin, src, 0o755)
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	js, _ := json.Marshal(ops)
	cmd := exec.Command(helperBin)
	cmd.Env = append(os.Environ(), helperEnv+"="+string(js))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper as uid %d: %v: %s", uid, err, out)
	}
	var res []int
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(ops) {
		t.Fatalf("helper output %q: %v", out, err)
	}
	ens := make([]syscall.Errno, len(res))
	for i, r := range res {
		ens[i] = syscall.Errno(r)
	}
	return ens
}

func removeHelper() {
	if helperBin != "" {
		os.RemoveAll(filepath.Dir(helperBin))
	}
}

func contextTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}
