package fusefs

import (
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

func TestDirAttrs(t *testing.T) {
	var d dirAttrs
	t0 := time.Unix(1000, 0)
	ttl := time.Second
	d.put(client.InodeAttr{Ino: 5, Ctime: 20, Mode: 1}, t0)
	d.put(client.InodeAttr{Ino: 5, Ctime: 10, Mode: 2}, t0) // an older reply arriving late
	a, left, ok := d.get(5, ttl, t0.Add(300*time.Millisecond))
	if !ok || a.Mode != 1 || left != 700*time.Millisecond {
		t.Fatalf("take = %+v, %v, %v; want the later ctime's attributes with 700ms left", a, left, ok)
	}
	// It answers again while young enough, with less time left.
	if a, left, ok := d.get(5, ttl, t0.Add(600*time.Millisecond)); !ok || a.Mode != 1 || left != 400*time.Millisecond {
		t.Fatalf("second get = %+v, %v, %v; want the same attributes with 400ms left", a, left, ok)
	}
	if _, _, ok := d.get(5, ttl, t0.Add(ttl)); ok {
		t.Fatal("an entry answered past the attribute timeout")
	}
	d.mu.Lock()
	_, kept := d.m[5]
	d.mu.Unlock()
	if kept {
		t.Fatal("an entry too old was kept")
	}
	d.put(client.InodeAttr{Ino: 6}, t0)
	if _, _, ok := d.get(6, ttl, t0.Add(ttl)); ok {
		t.Fatal("an entry as old as the attribute timeout was used")
	}
	d.put(client.InodeAttr{Ino: 7}, t0)
	d.put(client.InodeAttr{Ino: 8}, t0)
	d.drop(7)
	if _, _, ok := d.get(7, ttl, t0); ok {
		t.Fatal("a dropped entry was used")
	}
	d.clear()
	if _, _, ok := d.get(8, ttl, t0); ok {
		t.Fatal("an entry survived clear")
	}
	for i := range maxDirAttrs + 1 {
		d.put(client.InodeAttr{Ino: uint64(100 + i)}, t0)
	}
	d.mu.Lock()
	n := len(d.m)
	d.mu.Unlock()
	if n > maxDirAttrs {
		t.Fatalf("%d entries, over the bound of %d", n, maxDirAttrs)
	}
}
