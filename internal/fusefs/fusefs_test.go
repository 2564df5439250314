package fusefs

import (
	"os"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	var o Options
	if err := o.setDefaults(); err == nil {
		t.Fatal("no mountpoint: want an error")
	}
	o = Options{Mountpoint: "/mnt", AttrTimeout: -1}
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	if o.EntryTimeout != time.Second || o.AttrTimeout != 0 || o.OpTimeout != 30*time.Second ||
		o.MaxWrite != 1<<20 || o.AllowOther == nil || o.Logger == nil {
		t.Errorf("defaults: %+v", o)
	}
	o = Options{Mountpoint: "/mnt", MaxWrite: 2 << 20}
	if err := o.setDefaults(); err == nil {
		t.Error("MaxWrite 2 MiB: want an error")
	}
}

func TestOrphanDead(t *testing.T) {
	t.Parallel()
	o := &orphans{host: "node-1", grace: time.Hour}
	fresh := &client.InodeAttr{Mtime: time.Now().UnixNano()}
	old := &client.InodeAttr{Mtime: time.Now().Add(-2 * time.Hour).UnixNano()}
	tests := []struct {
		name string
		attr *client.InodeAttr
		want bool
	}{
		{"node-1-1-abcd", fresh, false},                         // pid 1 is alive
		{"node-1-" + itoa(os.Getpid()) + "-abcd", fresh, false}, // this process
		{"node-1-999999999-abcd", fresh, true},                  // no such process on this host
		{"other-999999999-abcd", fresh, false},                  // another host: wait for the grace
		{"other-999999999-abcd", old, true},                     // heartbeat stopped
		{"garbage", fresh, false},
	}
	for _, tc := range tests {
		if got := o.dead(tc.name, tc.attr); got != tc.want {
			t.Errorf("dead(%q, fresh=%v) = %v, want %v", tc.name, tc.attr == fresh, got, tc.want)
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestKernelStampsFeedCovers: the feed skips its invalidation of an
// inode's attributes only for changes an open's invalidation came after:
// of the same epoch, before the cursor the open's attributes reflect.
func TestKernelStampsFeedCovers(t *testing.T) {
	t.Parallel()
	var k kernelStamps
	if k.covers(1, 7, 10) {
		t.Error("an empty table covers changes")
	}
	k.fresh(1, 0, 50) // no position (an older service, or no watcher)
	if k.covers(1, 0, 10) || k.covers(1, 7, 10) {
		t.Error("a zero position covers changes")
	}
	k.fresh(1, 7, 50)
	for _, c := range []struct {
		ino, epoch, cursor uint64
		want               bool
	}{
		{1, 7, 10, true},  // an earlier batch
		{1, 7, 50, true},  // the batch that ends where the open read
		{1, 7, 51, false}, // a batch with a change after the open read
		{1, 8, 10, false}, // another epoch: the service restarted
		{2, 7, 10, false}, // another inode
	} {
		if got := k.covers(c.ino, c.epoch, c.cursor); got != c.want {
			t.Errorf("covers(%d, %d, %d) = %v, want %v", c.ino, c.epoch, c.cursor, got, c.want)
		}
	}
	k.fresh(1, 7, 40) // an older open's position answered late
	if !k.covers(1, 7, 50) {
		t.Error("an older position lowered the cursor")
	}
	k.fresh(1, 8, 5) // a new epoch replaces the old one
	if k.covers(1, 7, 10) || !k.covers(1, 8, 5) {
		t.Error("a new epoch's position did not replace the old one")
	}
	k.invalidated(1, time.Unix(1000, 0)) // the mount's own invalidation keeps it
	if !k.covers(1, 8, 5) {
		t.Error("an invalidation dropped the position")
	}
	k.drop(1)
	if k.covers(1, 8, 5) {
		t.Error("a forgotten inode still covers changes")
	}
}

func TestKernelStamps(t *testing.T) {
	t.Parallel()
	var k kernelStamps
	has := func(ino uint64, st stamp) bool { ks, ok := k.get(ino); return ok && ks.toldOf(st) }
	sizeBound := func(ino uint64) (uint64, bool) { ks, ok := k.get(ino); return ks.bound, ok }
	now := time.Unix(1000, 0)
	st := stamp{mtime: 5, size: 10}
	if has(1, st) {
		t.Error("an empty table has a stamp")
	}
	if _, ok := sizeBound(1); ok {
		t.Error("an empty table bounds a size")
	}
	k.put(1, st, now, false)
	if !has(1, st) || has(1, stamp{5, 11}) || has(2, st) {
		t.Error("has after put: want only the stamp put, of that inode")
	}
	k.put(1, stamp{6, 10}, now, false)
	if has(1, st) {
		t.Error("a later put does not replace the stamp")
	}
	if b, ok := sizeBound(1); !ok || b != 10 {
		t.Errorf("bound after puts far from any invalidation = %d, %v; want 10", b, ok)
	}
	// An invalidation: what was told is no longer known, and a reply
	// crossing it may have been dropped, so the bound only rises.
	k.invalidated(1, now)
	if has(1, stamp{6, 10}) {
		t.Error("has after an invalidation")
	}
	k.put(1, stamp{7, 4}, now.Add(quietAfter/2), false)
	if b, _ := sizeBound(1); b != 10 {
		t.Errorf("bound after a smaller size told just after an invalidation = %d, want 10 (the kernel may have dropped it)", b)
	}
	k.put(1, stamp{8, 30}, now.Add(quietAfter/2), false)
	if b, _ := sizeBound(1); b != 30 {
		t.Errorf("bound after a larger size told = %d, want 30", b)
	}
	k.put(1, stamp{9, 4}, now.Add(2*quietAfter), false)
	if b, _ := sizeBound(1); b != 4 {
		t.Errorf("bound after a reply far from the invalidation = %d, want 4", b)
	}
	k.invalidated(1, now.Add(2*quietAfter))
	k.put(1, stamp{10, 2}, now.Add(2*quietAfter), true)
	if b, _ := sizeBound(1); b != 2 || !has(1, stamp{10, 2}) {
		t.Errorf("bound after a setattr's reply = %d, want 2 (the kernel always applies it)", b)
	}
	// A write through the mount moves the kernel's size itself.
	k.grew(1, 100)
	k.grew(1, 50)
	if b, _ := sizeBound(1); b != 100 {
		t.Errorf("bound after writes to 100 and 50 = %d, want 100", b)
	}
	k.grew(3, 7)
	if b, ok := sizeBound(3); !ok || b != 7 {
		t.Errorf("bound of an inode first seen in a write = %d, %v; want 7", b, ok)
	}
	k.drop(1)
	if _, ok := sizeBound(1); ok || has(1, stamp{10, 2}) {
		t.Error("the table knows an inode after drop")
	}
	// A full shard starts over instead of growing.
	for i := range uint64(maxSeen/stampShards + 1) {
		k.put(i*stampShards, st, now, false)
	}
	if n := len(k.shard(0).m); n > maxSeen/stampShards {
		t.Errorf("shard holds %d stamps, more than %d", n, maxSeen/stampShards)
	}
}

func TestOpenCaching(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                     string
		keep, created, told      bool
		size, bound              uint64
		known                    bool
		wantKeep, wantNot, wantD bool
	}{
		{"unchanged since the last open", true, false, false, 10, 99, true, true, false, false},
		{"created by this open", false, true, false, 0, 50, true, false, false, false},
		{"changed, the kernel told this state", false, false, true, 10, 10, true, false, false, false},
		{"changed, the kernel holds older attributes", false, false, false, 10, 5, true, false, true, false},
		{"grown: the kernel's size is smaller", false, false, false, 20, 10, true, false, true, false},
		{"cut by another client", false, false, false, 10, 20, true, false, true, true},
		{"cut, reply told but maybe dropped", false, false, true, 10, 20, true, false, false, true},
		{"no bound known", false, false, false, 10, 0, false, false, true, true},
	} {
		k, n, d := openCaching(c.keep, c.created, c.told, c.size, c.bound, c.known)
		if k != c.wantKeep || n != c.wantNot || d != c.wantD {
			t.Errorf("%s: keep %v, notify %v, direct %v; want %v, %v, %v", c.name, k, n, d, c.wantKeep, c.wantNot, c.wantD)
		}
	}
}

func TestSetIDKill(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, want uint32 }{
		{0o755, 0},
		{0o4755, 0o4000},
		{0o2755, 0o2000},   // group-executable: cleared
		{0o2745, 0},        // no group execute: mandatory locking, kept
		{0o6775, 0o6000},   //
		{0o6745, 0o4000},   // set-user-ID only
		{0o100644, 0},      // with the file type
		{0o106710, 0o6000}, //
	} {
		if got := setIDKill(c.mode); got != c.want {
			t.Errorf("setIDKill(%o) = %o, want %o", c.mode, got, c.want)
		}
	}
}

// TestRetireOnce replays the release race: the last handle's release drops
// its reference and sends the data outside the lock; meanwhile an
// operation takes a reference and drops it, and also finds it held the
// last one. Only one of them may take the file out of the table: a second
// decrement of nopen left it 0 with files open, and every later setattr
// skipped the flush of buffered writes (cp -a lost its mtimes).
func TestRetireOnce(t *testing.T) {
	t.Parallel()
	fs := &fileSystem{}
	fs.mu.files = map[uint64]*openFile{}
	fs.mu.seen = map[uint64]stamp{}
	open := func(ino uint64) *openFile {
		of := &openFile{ino: ino, refs: 1}
		fs.mu.files[ino] = of
		fs.nopen.Add(1)
		return of
	}
	a := open(7)
	open(8) // another file stays open throughout
	if !fs.drop(a) {
		t.Fatal("drop of the only reference: want last")
	}
	// An operation on the same inode while the release sends the data.
	if got := fs.ref(7); got != a {
		t.Fatalf("ref during the release: got %p, want the open file %p", got, a)
	}
	if !fs.drop(a) {
		t.Fatal("the operation's drop: want last")
	}
	if !fs.retire(a, true) {
		t.Fatal("first retire: want true")
	}
	if fs.retire(a, true) {
		t.Error("second retire of the same open file: want false")
	}
	if n := fs.nopen.Load(); n != 1 {
		t.Errorf("nopen = %d, want 1 (file 8 is open)", n)
	}
	if fs.ref(8) == nil {
		t.Error("ref of the file still open: nil")
	}
	// A reference taken again before the retire keeps the file.
	b := fs.mu.files[8]
	fs.drop(b) // the ref above
	if !fs.drop(b) {
		t.Fatal("drop of file 8's last reference: want last")
	}
	fs.ref(8)
	if fs.retire(b, true) {
		t.Error("retire of a file referenced again: want false")
	}
	if fs.mu.files[8] != b || fs.nopen.Load() != 1 {
		t.Errorf("file 8 left the table (nopen %d)", fs.nopen.Load())
	}
}
