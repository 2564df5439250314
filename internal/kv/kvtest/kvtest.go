// Package kvtest is the conformance suite for kv.DB engines. Every engine
// runs it from its tests:
//
//	func TestConformance(t *testing.T) {
//		kvtest.Run(t, func(t *testing.T) kv.DB { return kv.NewMemory() })
//	}
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
)

// Run runs the conformance suite. open returns a new, empty DB for one
// subtest; Run closes it when the subtest ends (Close must be idempotent).
// Subtests run in parallel.
func Run(t *testing.T, open func(t *testing.T) kv.DB) {
	tests := []struct {
		name string
		fn   func(t *testing.T, db kv.DB)
	}{
		{"GetSetDelete", testGetSetDelete},
		{"Scan", testScan},
		{"ScanOrder", testScanOrder},
		{"ReadYourWritesGet", testReadYourWritesGet},
		{"ReadYourWritesScan", testReadYourWritesScan},
		{"Atomicity", testAtomicity},
		{"ViewRejectsWrites", testViewRejectsWrites},
		{"ViewSnapshot", testViewSnapshot},
		{"ConflictRetriesFn", testConflictRetriesFn},
		{"RetryLimit", testRetryLimit},
		{"BlindWritesDontConflict", testBlindWrites},
		{"ScanConflictIsVisitedRange", testScanConflictRange},
		{"Counter", testCounter},
		{"Bank", testBank},
		{"Phantom", testPhantom},
		{"PhantomRandom", testPhantomRandom},
		{"WriteSkew", testWriteSkew},
		{"Context", testContext},
		{"Close", testClose},
		{"CloseWaitsForUpdate", testCloseWaits},
		{"ValuesAreCopies", testValuesAreCopies},
		{"Limits", testLimits},
		{"TxnAfterReturn", testTxnAfterReturn},
		{"Sync", testSync},
		{"RequireSync", testRequireSync},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			t.Cleanup(func() {
				if err := db.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, db)
		})
	}
}

// Helpers.

func update(t *testing.T, db kv.DB, fn func(tx kv.Txn) error) {
	t.Helper()
	if err := db.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func put(t *testing.T, db kv.DB, kvs ...string) {
	t.Helper()
	update(t, db, func(tx kv.Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			tx.Set([]byte(kvs[i]), []byte(kvs[i+1]))
		}
		return nil
	})
}

// get returns the committed value of key, or "<none>".
func get(t *testing.T, db kv.DB, key string) string {
	t.Helper()
	var s string
	err := db.View(t.Context(), func(tx kv.Txn) error {
		v, err := tx.Get([]byte(key))
		if errors.Is(err, kv.ErrNotFound) {
			s = "<none>"
			return nil
		}
		s = string(v)
		return err
	})
	if err != nil {
		t.Fatalf("View: Get %q: %v", key, err)
	}
	return s
}

// scan renders a Scan as "k=v k=v ...".
func scan(tx kv.Txn, start, end []byte, limit int) (string, error) {
	var out []string
	err := tx.Scan(start, end, limit, func(k, v []byte) bool {
		out = append(out, string(k)+"="+string(v))
		return true
	})
	return strings.Join(out, " "), err
}

func scanView(t *testing.T, db kv.DB, start, end []byte, limit int) string {
	t.Helper()
	var s string
	err := db.View(t.Context(), func(tx kv.Txn) error {
		var err error
		s, err = scan(tx, start, end, limit)
		return err
	})
	if err != nil {
		t.Fatalf("View: Scan: %v", err)
	}
	return s
}

func getInt(tx kv.Txn, key string) (int, error) {
	v, err := tx.Get([]byte(key))
	if errors.Is(err, kv.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

func setInt(tx kv.Txn, key string, n int) { tx.Set([]byte(key), []byte(strconv.Itoa(n))) }

// Tests.

func testGetSetDelete(t *testing.T, db kv.DB) {
	if got := get(t, db, "a"); got != "<none>" {
		t.Fatalf("fresh db: a = %q", got)
	}
	put(t, db, "a", "1", "b", "2")
	if got := get(t, db, "a"); got != "1" {
		t.Fatalf("a = %q, want 1", got)
	}
	put(t, db, "a", "3")
	if got, got2 := get(t, db, "a"), get(t, db, "b"); got != "3" || got2 != "2" {
		t.Fatalf("after overwrite: a = %q, b = %q; want 3, 2", got, got2)
	}
	update(t, db, func(tx kv.Txn) error {
		tx.Delete([]byte("a"))
		tx.Delete([]byte("never-existed"))
		return nil
	})
	if got := get(t, db, "a"); got != "<none>" {
		t.Fatalf("after delete: a = %q", got)
	}
	// An empty value is a value.
	put(t, db, "empty", "")
	err := db.View(t.Context(), func(tx kv.Txn) error {
		v, err := tx.Get([]byte("empty"))
		if err != nil || len(v) != 0 {
			return fmt.Errorf("Get(empty) = %q, %v; want empty value", v, err)
		}
		if _, err := tx.Get([]byte("a")); !errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("Get(deleted) error = %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The empty key is a key, and the first one.
	put(t, db, "", "e")
	if got := get(t, db, ""); got != "e" {
		t.Fatalf("empty key = %q, want e", got)
	}
	if got := scanView(t, db, nil, []byte("b"), 0); got != "=e" {
		t.Fatalf("Scan(nil, b) = %q, want =e", got)
	}
	if got := scanView(t, db, []byte{}, nil, 1); got != "=e" {
		t.Fatalf("Scan(empty, nil, 1) = %q, want =e", got)
	}
}

func testScan(t *testing.T, db kv.DB) {
	put(t, db, "a", "A", "b", "B", "ba", "BA", "bb", "BB", "c", "C", "d", "D",
		"\xff", "FF", "\xff\xff", "FFFF")
	tests := []struct {
		name       string
		start, end []byte
		limit      int
		want       string
	}{
		{"all", nil, nil, 0, "a=A b=B ba=BA bb=BB c=C d=D \xff=FF \xff\xff=FFFF"},
		{"bounded", []byte("b"), []byte("c"), 0, "b=B ba=BA bb=BB"},
		{"end exclusive", []byte("a"), []byte("ba"), 0, "a=A b=B"},
		{"start between keys", []byte("bab"), []byte("d"), 0, "bb=BB c=C"},
		{"nil end", []byte("c"), nil, 0, "c=C d=D \xff=FF \xff\xff=FFFF"},
		{"limit", nil, nil, 3, "a=A b=B ba=BA"},
		{"limit beyond range", []byte("b"), []byte("c"), 10, "b=B ba=BA bb=BB"},
		{"negative limit", []byte("c"), []byte("e"), -1, "c=C d=D"},
		{"empty range", []byte("c"), []byte("c"), 0, ""},
		{"inverted range", []byte("d"), []byte("a"), 0, ""},
		{"no keys in range", []byte("e"), []byte("f"), 0, ""},
		{"prefix", []byte("b"), kv.PrefixEnd([]byte("b")), 0, "b=B ba=BA bb=BB"},
		{"prefix 0xff", []byte("\xff"), kv.PrefixEnd([]byte("\xff")), 0, "\xff=FF \xff\xff=FFFF"},
	}
	for _, tc := range tests {
		if got := scanView(t, db, tc.start, tc.end, tc.limit); got != tc.want {
			t.Errorf("%s: Scan(%q, %q, %d) = %q, want %q", tc.name, tc.start, tc.end, tc.limit, got, tc.want)
		}
	}
	// fn returning false stops the scan.
	err := db.View(t.Context(), func(tx kv.Txn) error {
		var keys []string
		err := tx.Scan(nil, nil, 0, func(k, _ []byte) bool {
			keys = append(keys, string(k))
			return len(keys) < 2
		})
		if err != nil || !slices.Equal(keys, []string{"a", "b"}) {
			return fmt.Errorf("stopped scan visited %q, %v; want [a b]", keys, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testScanOrder(t *testing.T, db kv.DB) {
	r := rand.New(rand.NewPCG(1, 2))
	var want []string
	keys := map[string]bool{}
	for len(keys) < 500 {
		k := make([]byte, 1+r.IntN(6))
		for i := range k {
			k[i] = byte(r.IntN(256))
		}
		keys[string(k)] = true
	}
	for k := range keys { // map order: random insertion order
		want = append(want, k)
	}
	for i := 0; i < len(want); i += 100 {
		update(t, db, func(tx kv.Txn) error {
			for _, k := range want[i:min(i+100, len(want))] {
				tx.Set([]byte(k), []byte("v"+k))
			}
			return nil
		})
	}
	slices.Sort(want)
	var got []string
	err := db.View(t.Context(), func(tx kv.Txn) error {
		return tx.Scan(nil, nil, 0, func(k, v []byte) bool {
			if string(v) != "v"+string(k) {
				t.Errorf("key %q has value %q", k, v)
			}
			got = append(got, string(k))
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Scan returned %d keys not in byte order (want %d)", len(got), len(want))
	}
}

func testReadYourWritesGet(t *testing.T, db kv.DB) {
	put(t, db, "x", "old", "y", "Y", "z", "Z")
	update(t, db, func(tx kv.Txn) error {
		tx.Set([]byte("x"), []byte("new"))
		tx.Delete([]byte("y"))
		tx.Set([]byte("n"), []byte("N"))
		tx.Delete([]byte("n"))
		tx.Delete([]byte("z"))
		tx.Set([]byte("z"), []byte("Z2"))
		checks := []struct{ key, want string }{
			{"x", "new"}, {"y", "<none>"}, {"n", "<none>"}, {"z", "Z2"},
		}
		for _, c := range checks {
			v, err := tx.Get([]byte(c.key))
			got := string(v)
			if errors.Is(err, kv.ErrNotFound) {
				got = "<none>"
			} else if err != nil {
				return err
			}
			if got != c.want {
				t.Errorf("in txn: Get(%s) = %q, want %q", c.key, got, c.want)
			}
		}
		return nil
	})
	for key, want := range map[string]string{"x": "new", "y": "<none>", "n": "<none>", "z": "Z2"} {
		if got := get(t, db, key); got != want {
			t.Errorf("after commit: %s = %q, want %q", key, got, want)
		}
	}
}

func testReadYourWritesScan(t *testing.T, db kv.DB) {
	put(t, db, "a", "A", "c", "C", "e", "E", "g", "G")
	update(t, db, func(tx kv.Txn) error {
		tx.Set([]byte("b"), []byte("B"))   // new key between store keys
		tx.Delete([]byte("c"))             // hides a store key
		tx.Set([]byte("e"), []byte("E2"))  // overwrites a store key
		tx.Set([]byte("h"), []byte("H"))   // new key after all store keys
		tx.Set([]byte("0"), []byte("Z"))   // new key before all store keys
		tx.Delete([]byte("absent"))        // deleting nothing shows nothing
		tx.Set([]byte("zz"), []byte("ZZ")) // outside the scanned range below
		cases := []struct {
			start, end string
			limit      int
			want       string
		}{
			{"", "z", 0, "0=Z a=A b=B e=E2 g=G h=H"},
			{"", "z", 3, "0=Z a=A b=B"},
			{"b", "f", 0, "b=B e=E2"},
			{"c", "e", 0, ""},
			{"f", "", 0, "g=G h=H zz=ZZ"},
		}
		for _, c := range cases {
			var end []byte
			if c.end != "" {
				end = []byte(c.end)
			}
			got, err := scan(tx, []byte(c.start), end, c.limit)
			if err != nil {
				return err
			}
			if got != c.want {
				t.Errorf("in txn: Scan(%q, %q, %d) = %q, want %q", c.start, c.end, c.limit, got, c.want)
			}
		}
		// Writing from inside Scan's fn is allowed.
		return tx.Scan([]byte("a"), []byte("h"), 0, func(k, v []byte) bool {
			tx.Set(append([]byte("copy/"), k...), v)
			return true
		})
	})
	want := "0=Z a=A b=B copy/a=A copy/b=B copy/e=E2 copy/g=G e=E2 g=G h=H zz=ZZ"
	if got := scanView(t, db, nil, nil, 0); got != want {
		t.Fatalf("after commit: %q, want %q", got, want)
	}
}

func testAtomicity(t *testing.T, db kv.DB) {
	put(t, db, "keep", "1")
	boom := errors.New("boom")
	err := db.Update(t.Context(), func(tx kv.Txn) error {
		tx.Set([]byte("a"), []byte("1"))
		tx.Delete([]byte("keep"))
		tx.Set([]byte("b"), []byte("2"))
		return boom
	})
	if err != boom {
		t.Fatalf("Update returned %v, want fn's error unchanged", err)
	}
	// A write the engine rejects dooms the whole transaction.
	err = db.Update(t.Context(), func(tx kv.Txn) error {
		tx.Set([]byte("c"), []byte("3"))
		tx.Set(make([]byte, kv.MaxKeySize+1), nil)
		tx.Set([]byte("d"), []byte("4"))
		return nil
	})
	if !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("Update with an oversized key returned %v, want errs.ErrInvalid", err)
	}
	if got := scanView(t, db, nil, nil, 0); got != "keep=1" {
		t.Fatalf("after failed updates the db holds %q, want only keep=1", got)
	}
}

func testViewRejectsWrites(t *testing.T, db kv.DB) {
	put(t, db, "k", "v")
	for _, op := range []string{"set", "delete"} {
		err := db.View(t.Context(), func(tx kv.Txn) error {
			if op == "set" {
				tx.Set([]byte("k"), []byte("changed"))
			} else {
				tx.Delete([]byte("k"))
			}
			return nil
		})
		if err == nil {
			t.Errorf("View with %s returned nil", op)
		}
		if got := get(t, db, "k"); got != "v" {
			t.Errorf("View with %s changed k to %q", op, got)
		}
	}
}

// testViewSnapshot checks that a View reads one snapshot: a commit that
// completes during the View is not visible to it.
func testViewSnapshot(t *testing.T, db kv.DB) {
	put(t, db, "a", "1", "b", "1")
	err := db.View(t.Context(), func(tx kv.Txn) error {
		if v, err := tx.Get([]byte("a")); err != nil || string(v) != "1" {
			return fmt.Errorf("first Get(a) = %q, %v", v, err)
		}
		put(t, db, "a", "2", "b", "2", "c", "2")
		if v, err := tx.Get([]byte("a")); err != nil || string(v) != "1" {
			return fmt.Errorf("Get(a) after a concurrent commit = %q, %v; want the snapshot's 1", v, err)
		}
		if got, err := scan(tx, nil, nil, 0); err != nil || got != "a=1 b=1" {
			return fmt.Errorf("Scan after a concurrent commit = %q, %v; want a=1 b=1", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := scanView(t, db, nil, nil, 0); got != "a=2 b=2 c=2" {
		t.Fatalf("a View after the commit sees %q", got)
	}
}

// testConflictRetriesFn: a key read by a transaction changes before it
// commits, so Update runs fn again, which then sees the new value.
func testConflictRetriesFn(t *testing.T, db kv.DB) {
	put(t, db, "k", "1")
	calls := 0
	update(t, db, func(tx kv.Txn) error {
		calls++
		v, err := tx.Get([]byte("k"))
		if err != nil {
			return err
		}
		if calls == 1 {
			put(t, db, "k", "2") // commits between our read and our commit
		}
		tx.Set([]byte("copy"), v)
		return nil
	})
	if calls != 2 {
		t.Fatalf("fn ran %d times, want 2", calls)
	}
	if got := get(t, db, "copy"); got != "2" {
		t.Fatalf("copy = %q, want 2 (the value after the conflicting commit)", got)
	}
}

// testRetryLimit: an Update whose every attempt conflicts gives up with
// errs.ErrConflict. Each attempt reads a different key, which a nested
// Update then changes.
func testRetryLimit(t *testing.T, db kv.DB) {
	calls := 0
	err := db.Update(t.Context(), func(tx kv.Txn) error {
		calls++
		key := "k/" + strconv.Itoa(calls)
		if _, err := tx.Get([]byte(key)); !errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("Get(%s) = %v, want ErrNotFound", key, err)
		}
		put(t, db, key, "x") // this attempt loses
		tx.Set([]byte("never"), []byte("x"))
		return nil
	})
	if !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("Update that always conflicts returned %v, want errs.ErrConflict", err)
	}
	if calls < 2 {
		t.Fatalf("fn ran %d times before giving up", calls)
	}
	if got := get(t, db, "never"); got != "<none>" {
		t.Fatalf("a transaction that never committed wrote %q", got)
	}
}

// testBlindWrites: transactions that write a common key without reading it
// do not conflict, even when they overlap in time.
func testBlindWrites(t *testing.T, db kv.DB) {
	put(t, db, "ra", "1", "rb", "1")
	var started sync.WaitGroup
	started.Add(2)
	var calls [2]atomic.Int32
	var wg sync.WaitGroup
	for i, name := range []string{"a", "b"} {
		wg.Go(func() {
			err := db.Update(t.Context(), func(tx kv.Txn) error {
				if calls[i].Add(1) == 1 {
					started.Done()
					started.Wait() // both transactions are open
				}
				if _, err := tx.Get([]byte("r" + name)); err != nil { // disjoint reads
					return err
				}
				tx.Set([]byte("dir-mtime"), []byte(name))
				if v, err := tx.Get([]byte("dir-mtime")); err != nil || string(v) != name {
					return fmt.Errorf("reading back own blind write: %q, %v", v, err)
				}
				tx.Set([]byte("entry/"+name), []byte("1"))
				return nil
			})
			if err != nil {
				t.Errorf("Update %s: %v", name, err)
			}
		})
	}
	wg.Wait()
	for i := range calls {
		if n := calls[i].Load(); n != 1 {
			t.Errorf("blind writer %d ran fn %d times, want 1 (no conflict)", i, n)
		}
	}
	if got := get(t, db, "dir-mtime"); got != "a" && got != "b" {
		t.Errorf("dir-mtime = %q, want a or b", got)
	}
	if a, b := get(t, db, "entry/a"), get(t, db, "entry/b"); a != "1" || b != "1" {
		t.Errorf("entries = %q, %q; want both written", a, b)
	}
}

// testScanConflictRange: a scan that stopped early read only the keys up to
// where it stopped; a scan that ran to the end read the whole range.
func testScanConflictRange(t *testing.T, db kv.DB) {
	tests := []struct {
		name      string
		limit     int
		insert    string
		wantCalls int
	}{
		{"insert beyond the visited part", 1, "c", 1},
		{"insert into the visited part", 1, "a", 2},
		{"change a visited key", 1, "b", 2},
		{"insert into an exhausted range", 0, "e", 2},
		{"insert after an exhausted range", 0, "\xff", 1},
	}
	for i, tc := range tests {
		prefix := fmt.Sprintf("p%d/", i)
		put(t, db, prefix+"b", "1", prefix+"d", "1", fmt.Sprintf("p%d0", i), "after the range")
		calls := 0
		update(t, db, func(tx kv.Txn) error {
			calls++
			end := kv.PrefixEnd([]byte(prefix))
			if tc.insert == "\xff" {
				end = []byte(prefix + "e")
			}
			if _, err := scan(tx, []byte(prefix), end, tc.limit); err != nil {
				return err
			}
			if calls == 1 {
				put(t, db, prefix+tc.insert, "x")
			}
			tx.Set([]byte("out"), []byte(strconv.Itoa(i)))
			return nil
		})
		if calls != tc.wantCalls {
			t.Errorf("%s: fn ran %d times, want %d", tc.name, calls, tc.wantCalls)
		}
	}
}

// testCounter: concurrent read-modify-write increments lose no update.
func testCounter(t *testing.T, db kv.DB) {
	const workers, incs = 8, 25
	var calls atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range incs {
				err := db.Update(t.Context(), func(tx kv.Txn) error {
					calls.Add(1)
					n, err := getInt(tx, "counter")
					if err != nil {
						return err
					}
					setInt(tx, "counter", n+1)
					return nil
				})
				if err != nil {
					t.Errorf("increment: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := get(t, db, "counter"); got != strconv.Itoa(workers*incs) {
		t.Fatalf("counter = %s, want %d", got, workers*incs)
	}
	t.Logf("%d increments took %d attempts", workers*incs, calls.Load())
}

// testBank: random transfers between accounts keep the total, and every
// snapshot sees it.
func testBank(t *testing.T, db kv.DB) {
	const accounts, initial, workers, transfers = 8, 100, 6, 40
	update(t, db, func(tx kv.Txn) error {
		for i := range accounts {
			setInt(tx, fmt.Sprintf("acct/%02d", i), initial)
		}
		return nil
	})
	total := func(tx kv.Txn) (int, error) {
		sum, n := 0, 0
		var err error
		scanErr := tx.Scan([]byte("acct/"), kv.PrefixEnd([]byte("acct/")), 0, func(_, v []byte) bool {
			var b int
			b, err = strconv.Atoi(string(v))
			if b < 0 {
				err = fmt.Errorf("negative balance %d", b)
			}
			sum += b
			n++
			return err == nil
		})
		if scanErr != nil {
			return 0, scanErr
		}
		if n != accounts {
			return 0, fmt.Errorf("saw %d accounts, want %d", n, accounts)
		}
		return sum, err
	}
	done := make(chan struct{})
	var checker sync.WaitGroup
	checker.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			err := db.View(t.Context(), func(tx kv.Txn) error {
				sum, err := total(tx)
				if err == nil && sum != accounts*initial {
					err = fmt.Errorf("snapshot total = %d, want %d", sum, accounts*initial)
				}
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range transfers {
				from, to := r.IntN(accounts), r.IntN(accounts)
				amount := 1 + r.IntN(30)
				err := db.Update(t.Context(), func(tx kv.Txn) error {
					fk, tk := fmt.Sprintf("acct/%02d", from), fmt.Sprintf("acct/%02d", to)
					fb, err := getInt(tx, fk)
					if err != nil {
						return err
					}
					if fb < amount {
						return nil
					}
					setInt(tx, fk, fb-amount)
					tb, err := getInt(tx, tk) // reads our write when from == to
					if err != nil {
						return err
					}
					setInt(tx, tk, tb+amount)
					return nil
				})
				if err != nil {
					t.Errorf("transfer: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	checker.Wait()
	err := db.View(t.Context(), func(tx kv.Txn) error {
		sum, err := total(tx)
		if err == nil && sum != accounts*initial {
			err = fmt.Errorf("final total = %d, want %d", sum, accounts*initial)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// claim inserts prefix+name if no key with the prefix exists.
func claim(tx kv.Txn, prefix, name string, afterScan func()) error {
	empty := true
	err := tx.Scan([]byte(prefix), kv.PrefixEnd([]byte(prefix)), 0, func(_, _ []byte) bool {
		empty = false
		return false
	})
	if err != nil {
		return err
	}
	afterScan()
	if empty {
		tx.Set([]byte(prefix+name), []byte(name))
	}
	return nil
}

// testPhantom: two transactions both find a range empty and insert into it;
// serializability allows only one of them to do so.
func testPhantom(t *testing.T, db kv.DB) {
	put(t, db, "lock", "before the range", "lock0", "after the range")
	var scanned sync.WaitGroup
	scanned.Add(2)
	var calls atomic.Int32
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		wg.Go(func() {
			first := true
			err := db.Update(t.Context(), func(tx kv.Txn) error {
				calls.Add(1)
				return claim(tx, "lock/", name, func() {
					if first { // both have seen the range empty
						first = false
						scanned.Done()
						scanned.Wait()
					}
				})
			})
			if err != nil {
				t.Errorf("claim %s: %v", name, err)
			}
		})
	}
	wg.Wait()
	got := scanView(t, db, []byte("lock/"), kv.PrefixEnd([]byte("lock/")), 0)
	if got != "lock/a=a" && got != "lock/b=b" {
		t.Fatalf("range holds %q, want exactly one claim", got)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("fn ran %d times, want 3 (the loser once more)", n)
	}
}

func testPhantomRandom(t *testing.T, db kv.DB) {
	for round := range 5 {
		prefix := fmt.Sprintf("slot%d/", round)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				err := db.Update(t.Context(), func(tx kv.Txn) error {
					return claim(tx, prefix, strconv.Itoa(w), func() {})
				})
				if err != nil {
					t.Errorf("claim: %v", err)
				}
			})
		}
		wg.Wait()
		got := scanView(t, db, []byte(prefix), kv.PrefixEnd([]byte(prefix)), 0)
		if strings.Count(got, "=") != 1 {
			t.Fatalf("round %d: range holds %q, want exactly one claim", round, got)
		}
	}
}

// testWriteSkew: each transaction reads two keys and clears one of them if
// both are set; serially, at most one can clear.
func testWriteSkew(t *testing.T, db kv.DB) {
	put(t, db, "x", "1", "y", "1")
	var read sync.WaitGroup
	read.Add(2)
	var wg sync.WaitGroup
	for _, mine := range []string{"x", "y"} {
		wg.Go(func() {
			first := true
			err := db.Update(t.Context(), func(tx kv.Txn) error {
				x, err := getInt(tx, "x")
				if err != nil {
					return err
				}
				y, err := getInt(tx, "y")
				if err != nil {
					return err
				}
				if first {
					first = false
					read.Done()
					read.Wait()
				}
				if x+y == 2 {
					setInt(tx, mine, 0)
				}
				return nil
			})
			if err != nil {
				t.Errorf("Update %s: %v", mine, err)
			}
		})
	}
	wg.Wait()
	if x, y := get(t, db, "x"), get(t, db, "y"); x == "0" && y == "0" || x == "1" && y == "1" {
		t.Fatalf("x = %s, y = %s: want exactly one cleared", x, y)
	}
}

func testContext(t *testing.T, db kv.DB) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	err := db.Update(ctx, func(tx kv.Txn) error {
		called = true
		tx.Set([]byte("a"), []byte("1"))
		return nil
	})
	if !errors.Is(err, context.Canceled) || called {
		t.Errorf("Update with a canceled context = %v (fn called: %v), want context.Canceled", err, called)
	}
	err = db.View(ctx, func(tx kv.Txn) error { called = true; return nil })
	if !errors.Is(err, context.Canceled) || called {
		t.Errorf("View with a canceled context = %v (fn called: %v), want context.Canceled", err, called)
	}

	// Canceled while fn runs: the commit is not attempted.
	ctx, cancel = context.WithCancel(t.Context())
	err = db.Update(ctx, func(tx kv.Txn) error {
		tx.Set([]byte("b"), []byte("1"))
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update canceled in fn = %v, want context.Canceled", err)
	}

	// Canceled between retries: no further attempt.
	put(t, db, "k", "0")
	ctx, cancel = context.WithCancel(t.Context())
	calls := 0
	err = db.Update(ctx, func(tx kv.Txn) error {
		calls++
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		put(t, db, "k", strconv.Itoa(calls)) // this attempt will conflict
		tx.Set([]byte("c"), []byte("1"))
		if calls == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 2 {
		t.Errorf("Update canceled during retries = %v after %d calls, want context.Canceled after 2", err, calls)
	}
	if got := scanView(t, db, nil, nil, 0); got != "k=2" {
		t.Errorf("canceled updates left %q, want only k=2", got)
	}
}

func testClose(t *testing.T, db kv.DB) {
	put(t, db, "a", "1")
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	called := false
	err := db.Update(t.Context(), func(tx kv.Txn) error { called = true; return nil })
	if !errors.Is(err, kv.ErrClosed) || called {
		t.Errorf("Update after Close = %v (fn called: %v), want ErrClosed", err, called)
	}
	err = db.View(t.Context(), func(tx kv.Txn) error { called = true; return nil })
	if !errors.Is(err, kv.ErrClosed) || called {
		t.Errorf("View after Close = %v (fn called: %v), want ErrClosed", err, called)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// testSync: Sync succeeds with and without anything to sync, from many
// goroutines beside Updates, and fails with ErrClosed after Close.
func testSync(t *testing.T, db kv.DB) {
	if err := db.Sync(t.Context()); err != nil {
		t.Fatalf("Sync of an empty DB: %v", err)
	}
	put(t, db, "a", "1")
	if err := db.Sync(t.Context()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 10 {
				if err := db.Update(t.Context(), func(tx kv.Txn) error {
					setInt(tx, fmt.Sprintf("s%d", i), j)
					return nil
				}); err != nil {
					t.Errorf("Update: %v", err)
					return
				}
				if err := db.Sync(t.Context()); err != nil {
					t.Errorf("Sync: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := get(t, db, "s7"); got != "9" {
		t.Errorf("s7 = %s after the syncs, want 9", got)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := db.Sync(t.Context()); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Sync after Close = %v, want ErrClosed", err)
	}
}

// testRequireSync: a transaction that requires a sync commits like any
// other; RequireSync in View changes nothing.
func testRequireSync(t *testing.T, db kv.DB) {
	update(t, db, func(tx kv.Txn) error {
		tx.RequireSync()
		tx.Set([]byte("a"), []byte("1"))
		return nil
	})
	if got := get(t, db, "a"); got != "1" {
		t.Errorf("a = %s, want 1", got)
	}
	err := db.View(t.Context(), func(tx kv.Txn) error {
		tx.RequireSync()
		_, err := tx.Get([]byte("a"))
		return err
	})
	if err != nil {
		t.Errorf("View with RequireSync: %v", err)
	}
}

// testCloseWaits: Close lets an Update in progress commit.
func testCloseWaits(t *testing.T, db kv.DB) {
	inFn, release := make(chan struct{}), make(chan struct{})
	updated := make(chan error, 1)
	go func() {
		updated <- db.Update(context.Background(), func(tx kv.Txn) error {
			close(inFn)
			<-release
			tx.Set([]byte("a"), []byte("1"))
			return nil
		})
	}()
	<-inFn
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an Update was running", err)
	case <-time.After(20 * time.Millisecond): // Close is blocked, as it should be
	}
	close(release)
	if err := <-updated; err != nil {
		t.Fatalf("Update running during Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func testValuesAreCopies(t *testing.T, db kv.DB) {
	key, val := []byte("key"), []byte("value")
	update(t, db, func(tx kv.Txn) error {
		tx.Set(key, val)
		key[0], val[0] = 'X', 'X' // after Set: must not change what is written
		v, err := tx.Get([]byte("key"))
		if err != nil || string(v) != "value" {
			return fmt.Errorf("Get after mutating Set's arguments = %q, %v", v, err)
		}
		v[0] = 'Y' // must not change the buffered write
		return nil
	})
	for range 2 {
		err := db.View(t.Context(), func(tx kv.Txn) error {
			v, err := tx.Get([]byte("key"))
			if err != nil || string(v) != "value" {
				return fmt.Errorf("Get = %q, %v; want value", v, err)
			}
			v[0] = 'Z'
			var kept [][]byte
			err = tx.Scan(nil, nil, 0, func(k, v []byte) bool {
				kept = append(kept, k, v)
				k[0], v[0] = 'Q', 'Q'
				return true
			})
			if err != nil {
				return err
			}
			if len(kept) != 2 || string(kept[0]) != "Qey" || string(kept[1]) != "Qalue" {
				return fmt.Errorf("Scan slices kept by the caller changed: %q", kept)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := scanView(t, db, nil, nil, 0); got != "key=value" {
		t.Fatalf("db holds %q, want key=value", got)
	}
}

func testLimits(t *testing.T, db kv.DB) {
	bigKey := bytes.Repeat([]byte("k"), kv.MaxKeySize)
	bigVal := bytes.Repeat([]byte("v"), kv.MaxValueSize)
	update(t, db, func(tx kv.Txn) error {
		tx.Set(bigKey, bigVal)
		return nil
	})
	err := db.View(t.Context(), func(tx kv.Txn) error {
		v, err := tx.Get(bigKey)
		if err != nil || !bytes.Equal(v, bigVal) {
			return fmt.Errorf("largest key and value do not read back (%d bytes, %v)", len(v), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tooBig := []func(tx kv.Txn){
		func(tx kv.Txn) { tx.Set(append(bigKey, 'k'), nil) },
		func(tx kv.Txn) { tx.Set([]byte("k"), append(bigVal, 'v')) },
		func(tx kv.Txn) { tx.Delete(append(bigKey, 'k')) },
	}
	for i, write := range tooBig {
		err := db.Update(t.Context(), func(tx kv.Txn) error {
			tx.Set([]byte("other"), []byte("1"))
			write(tx)
			return nil
		})
		if !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("case %d: Update = %v, want errs.ErrInvalid", i, err)
		}
	}
	if got := get(t, db, "other"); got != "<none>" {
		t.Errorf("a rejected transaction wrote other = %q", got)
	}
}

func testTxnAfterReturn(t *testing.T, db kv.DB) {
	put(t, db, "a", "1")
	var leaked kv.Txn
	update(t, db, func(tx kv.Txn) error {
		leaked = tx
		_, err := tx.Get([]byte("a"))
		return err
	})
	if _, err := leaked.Get([]byte("a")); err == nil {
		t.Error("Get on a transaction whose function returned succeeded")
	}
	if err := leaked.Scan(nil, nil, 0, func(_, _ []byte) bool { return true }); err == nil {
		t.Error("Scan on a transaction whose function returned succeeded")
	}
}
