package fuse

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestTools runs real programs on the mount and checks their results:
// tar, git, go build, sqlite3, rsync -a and cp -a with hard links.
func TestTools(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	m := startMount(t, s.addr)
	src := sourceTree(t)
	t.Run("tar", func(t *testing.T) {
		need(t, "tar")
		dir := m.path("tar")
		must(t, os.Mkdir(dir, 0o755))
		archive := filepath.Join(dir, "src.tar")
		run(t, "", "tar", "-C", src, "-cf", archive, ".")
		out := filepath.Join(dir, "out")
		must(t, os.Mkdir(out, 0o755))
		run(t, "", "tar", "-C", out, "-xpf", archive)
		sameTree(t, src, out)
		// And back out of the mount.
		back := t.TempDir()
		run(t, "", "tar", "-C", out, "-cf", filepath.Join(back, "b.tar"), ".")
		local := t.TempDir()
		run(t, "", "tar", "-C", local, "-xpf", filepath.Join(back, "b.tar"))
		sameTree(t, src, local)
	})
	t.Run("git", func(t *testing.T) {
		need(t, "git")
		dir := m.path("git")
		must(t, os.Mkdir(dir, 0o755))
		env := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()}
		git := func(args ...string) string {
			out, err := runErr(dir, env, "git", args...)
			if err != nil {
				t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return out
		}
		git("init", "-q", "-b", "main")
		run(t, "", "cp", "-a", src+"/.", dir)
		git("add", "-A")
		git("commit", "-q", "-m", "first")
		writeFile(t, filepath.Join(dir, "pkg", "extra.go"), "package pkg\n")
		git("add", "-A")
		git("commit", "-q", "-m", "second")
		if n := strings.TrimSpace(git("rev-list", "--count", "HEAD")); n != "2" {
			t.Errorf("git rev-list --count: %s", n)
		}
		git("fsck", "--strict")
		if st := git("status", "--porcelain"); st != "" {
			t.Errorf("git status not clean: %s", st)
		}
		git("gc", "-q")
		git("fsck", "--strict")
		clone := t.TempDir()
		run(t, "", "git", "clone", "-q", dir, filepath.Join(clone, "c"))
		// git keeps contents and the executable bit, not modes or times.
		if a, b := contentTree(t, dir), contentTree(t, filepath.Join(clone, "c")); a != b {
			t.Errorf("clone differs from the repository on the mount:\n%s\n---\n%s", a, b)
		}
	})
	t.Run("go build", func(t *testing.T) {
		need(t, "go")
		dir := m.path("gobuild")
		run(t, "", "cp", "-a", src, dir)
		out, err := runErr(dir, []string{"GOFLAGS=-mod=mod", "GOCACHE=" + filepath.Join(dir, ".cache"), "CGO_ENABLED=0"},
			"go", "build", "-o", "hello", ".")
		if err != nil {
			t.Fatalf("go build on the mount: %v\n%s", err, out)
		}
		if got := run(t, dir, "./hello"); got != "hello from sluice 42\n" {
			t.Errorf("built program printed %q", got)
		}
	})
	t.Run("sqlite3", func(t *testing.T) {
		need(t, "sqlite3")
		dir := m.path("sqlite")
		must(t, os.Mkdir(dir, 0o755))
		db := filepath.Join(dir, "t.db")
		var sql strings.Builder
		sql.WriteString("PRAGMA journal_mode=WAL;\nCREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);\nBEGIN;\n")
		for i := range 5000 {
			fmt.Fprintf(&sql, "INSERT INTO t(v) VALUES('value %d %s');\n", i, strings.Repeat("x", i%200))
		}
		sql.WriteString("COMMIT;\nCREATE INDEX tv ON t(v);\nDELETE FROM t WHERE k % 3 = 0;\nVACUUM;\n")
		cmd := exec.Command("sqlite3", db)
		cmd.Stdin = strings.NewReader(sql.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sqlite3: %v\n%s", err, out)
		}
		got := run(t, "", "sqlite3", db, "PRAGMA integrity_check; SELECT count(*), sum(length(v)) FROM t;")
		// 5000 rows minus the 1666 with k%3 == 0 (k = 1..5000).
		if !strings.HasPrefix(got, "ok\n3334|") {
			t.Errorf("sqlite3 integrity check / count: %q", got)
		}
		// Rollback journal mode too.
		db2 := filepath.Join(dir, "j.db")
		run(t, "", "sqlite3", db2, "PRAGMA journal_mode=DELETE; CREATE TABLE a(x); INSERT INTO a VALUES(1),(2),(3);")
		if got := run(t, "", "sqlite3", db2, "SELECT sum(x) FROM a; PRAGMA integrity_check;"); got != "6\nok\n" {
			t.Errorf("sqlite3 rollback journal db: %q", got)
		}
	})
	t.Run("rsync", func(t *testing.T) {
		need(t, "rsync")
		dir := m.path("rsync")
		run(t, "", "rsync", "-aH", src+"/", dir+"/")
		sameTree(t, src, dir)
		// A second run has nothing to transfer.
		out := run(t, "", "rsync", "-aHi", src+"/", dir+"/")
		if strings.TrimSpace(out) != "" {
			t.Errorf("second rsync transferred:\n%s", out)
		}
		back := t.TempDir()
		run(t, "", "rsync", "-aH", dir+"/", back+"/")
		sameTree(t, src, back)
	})
	t.Run("cp -a", func(t *testing.T) {
		dir := m.path("cp")
		run(t, "", "cp", "-a", src, dir)
		sameTree(t, src, dir)
		var a, b syscall.Stat_t
		must(t, syscall.Lstat(filepath.Join(dir, "data", "big.bin"), &a))
		must(t, syscall.Lstat(filepath.Join(dir, "data", "hardlink.bin"), &b))
		if a.Ino != b.Ino || a.Nlink != 2 {
			t.Errorf("cp -a did not keep the hard link: ino %d/%d nlink %d", a.Ino, b.Ino, a.Nlink)
		}
		dir2 := m.path("cp2")
		run(t, "", "cp", "-a", dir, dir2) // mount to mount
		sameTree(t, src, dir2)
	})
	m.stop()
}

func need(t *testing.T, tool string) {
	t.Helper()
	proctest.NeedTool(t, tool)
}

// sourceTree makes a small Go module with a mix of files, a symlink, a
// hard link, an empty directory and odd modes, in a local temp dir.
func sourceTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	files := map[string]string{
		"go.mod":         "module example.com/hello\n\ngo 1.22\n",
		"main.go":        "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/hello/pkg\"\n)\n\nfunc main() { fmt.Println(\"hello from sluice\", pkg.Answer()) }\n",
		"pkg/pkg.go":     "package pkg\n\n// Answer is the answer.\nfunc Answer() int { return 42 }\n",
		"pkg/pkg_doc.go": "// Package pkg is small.\npackage pkg\n",
		"README":         strings.Repeat("readme line\n", 1000),
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(body), 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(dir, "data", "empty"), 0o750))
	big := make([]byte, 3<<20+1234)
	for i := range big {
		big[i] = byte(i * 7 % 251)
	}
	must(t, os.WriteFile(filepath.Join(dir, "data", "big.bin"), big, 0o600))
	must(t, os.Link(filepath.Join(dir, "data", "big.bin"), filepath.Join(dir, "data", "hardlink.bin")))
	must(t, os.Symlink("../README", filepath.Join(dir, "data", "readme-link")))
	must(t, os.WriteFile(filepath.Join(dir, "data", "script.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	for i := range 50 {
		must(t, os.WriteFile(filepath.Join(dir, "data", fmt.Sprintf("small-%02d", i)), []byte(strings.Repeat("s", i*100)), 0o644))
	}
	return dir
}

// contentTree lists the regular files below root with their contents'
// checksums, leaving out .git.
func contentTree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	must(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if fi.IsDir() && rel == ".git" {
			return filepath.SkipDir
		}
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s %x", rel, checksum(data)))
		}
		return nil
	}))
	return strings.Join(lines, "\n")
}

// sameTree checks that two trees have the same names, types, modes,
// contents, symlink targets and (for regular files) mtimes.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	ta, tb := describeTree(t, a), describeTree(t, b)
	if ta != tb {
		t.Errorf("trees differ:\n%s:\n%s\n%s:\n%s", a, ta, b, tb)
	}
}

func describeTree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ".git" || strings.HasPrefix(rel, ".git/") || rel == ".cache" || strings.HasPrefix(rel, ".cache/") {
			if fi.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x mtime %d", len(data), checksum(data), fi.ModTime().Unix())
		}
		if rel != "." {
			lines = append(lines, line)
		}
		return nil
	})
	must(t, err)
	return strings.Join(lines, "\n")
}
