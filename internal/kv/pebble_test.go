package kv_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/kv/kvtest"
)

func openPebble(t *testing.T, dir string) kv.DB {
	t.Helper()
	db, err := kv.OpenPebble(dir, nil)
	if err != nil {
		t.Fatalf("OpenPebble: %v", err)
	}
	return db
}

func TestPebbleConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.DB { return openPebble(t, t.TempDir()) })
}

func TestPebbleReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openPebble(t, dir)
	err := db.Update(t.Context(), func(tx kv.Txn) error {
		for i := range 100 {
			tx.Set(fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "v%d", i))
		}
		tx.Delete([]byte("k050"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openPebble(t, dir)
	defer db.Close()
	err = db.View(t.Context(), func(tx kv.Txn) error {
		n := 0
		err := tx.Scan(nil, nil, 0, func(k, v []byte) bool {
			i, _ := strconv.Atoi(string(k[1:]))
			if i == 50 || string(v) != fmt.Sprintf("v%d", i) {
				t.Errorf("after reopen: %s = %s", k, v)
			}
			n++
			return true
		})
		if n != 99 {
			t.Errorf("after reopen: %d keys, want 99", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPebbleOpenLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openPebble(t, dir)
	defer db.Close()
	if db2, err := kv.OpenPebble(dir, nil); err == nil {
		db2.Close()
		t.Fatal("a second OpenPebble of an open directory succeeded")
	}
	if _, err := kv.OpenPebble(dir, &kv.PebbleOptions{CacheSize: -1}); err == nil {
		t.Fatal("OpenPebble accepted a negative cache size")
	}
}

// crashChildEnv names the environment variable that turns
// TestPebbleCrash into the child process that gets killed.
const crashChildEnv = "SLUICE_KV_CRASH_CHILD"

// TestPebbleCrash kills a process writing to pebble with SIGKILL and checks
// that every Update it acknowledged survived.
func TestPebbleCrash(t *testing.T) {
	if spec := os.Getenv(crashChildEnv); spec != "" {
		crashChild(spec)
		return
	}
	if testing.Short() {
		t.Skip("kills child processes")
	}
	t.Parallel()
	dir := t.TempDir()
	const rounds, acksBeforeKill = 3, 300
	for round := range rounds {
		acked := runAndKill(t, dir, round, acksBeforeKill)
		db := openPebble(t, dir)
		last := map[string]int{}
		err := db.View(t.Context(), func(tx kv.Txn) error {
			for _, a := range acked {
				v, err := tx.Get([]byte(a.key))
				if err != nil {
					return fmt.Errorf("acknowledged key %s: %w", a.key, err)
				}
				if string(v) != a.value {
					return fmt.Errorf("acknowledged key %s = %q, want %q", a.key, v, a.value)
				}
				w := a.key[:strings.LastIndexByte(a.key, '/')]
				i, _ := strconv.Atoi(a.value)
				last[w] = max(last[w], i)
			}
			for w, i := range last {
				v, err := tx.Get([]byte(w + "/last"))
				if err != nil {
					return fmt.Errorf("%s/last: %w", w, err)
				}
				if n, _ := strconv.Atoi(string(v)); n < i {
					return fmt.Errorf("%s/last = %d, but %d was acknowledged", w, n, i)
				}
			}
			return nil
		})
		if cerr := db.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatalf("round %d (%d acknowledged updates): %v", round, len(acked), err)
		}
		t.Logf("round %d: %d acknowledged updates survived kill -9", round, len(acked))
	}
}

type ack struct{ key, value string }

// runAndKill starts the child on dir, lets it acknowledge n updates, kills
// it and returns everything it acknowledged.
func runAndKill(t *testing.T, dir string, round, n int) []ack {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPebbleCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", crashChildEnv, dir, round))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []ack
	sc := bufio.NewScanner(out)
	killed := false
	timeout := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timeout.Stop()
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ack" {
			continue
		}
		acked = append(acked, ack{f[1], f[2]})
		if len(acked) == n && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !killed || !errors.As(err, &exit) {
		t.Fatalf("child ended by itself after %d acks (%v): %s", len(acked), err, stderr.String())
	}
	return acked
}

// crashChild writes from several goroutines until it is killed, printing
// each acknowledged update as "ack KEY VALUE".
func crashChild(spec string) {
	dir, round, _ := strings.Cut(spec, ",")
	db, err := kv.OpenPebble(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			worker := fmt.Sprintf("r%s/w%d", round, w)
			for i := 0; ; i++ {
				key := fmt.Sprintf("%s/%06d", worker, i)
				err := db.Update(context.Background(), func(tx kv.Txn) error {
					last := -1
					if v, err := tx.Get([]byte(worker + "/last")); err == nil {
						last, _ = strconv.Atoi(string(v))
					} else if !errors.Is(err, kv.ErrNotFound) {
						return err
					}
					if last != i-1 {
						return fmt.Errorf("%s/last = %d before update %d", worker, last, i)
					}
					tx.Set([]byte(key), []byte(strconv.Itoa(i)))
					tx.Set([]byte(worker+"/last"), []byte(strconv.Itoa(i)))
					return nil
				})
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					return
				}
				mu.Lock()
				fmt.Printf("ack %s %d\n", key, i)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	db.Close()
}
