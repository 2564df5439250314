package fusefs

import "testing"

func TestCompleteDirs(t *testing.T) {
	var c completeDirs
	if c.absent(1, "a") {
		t.Fatal("an untracked directory answered absent")
	}
	c.added(1, "a") // untracked: ignored
	c.made(1)
	if !c.absent(1, "a") {
		t.Fatal("a new directory holds a name")
	}
	c.added(1, "a")
	c.added(1, "a")
	c.added(1, "b")
	if c.absent(1, "a") || c.absent(1, "b") || !c.absent(1, "c") {
		t.Fatal("added names not held, or another one held")
	}
	c.removed(1, "a")
	if !c.absent(1, "a") || c.names != 2 {
		t.Fatalf("after a removal: absent %v, names %d (want 2: b and the directory)", c.absent(1, "a"), c.names)
	}
	c.made(2)
	c.drop(1)
	if c.absent(1, "a") || c.tracked() != 1 || c.names != 1 {
		t.Fatalf("after dropping 1: tracked %d, names %d", c.tracked(), c.names)
	}
	c.clear()
	if c.absent(2, "x") || c.tracked() != 0 || c.names != 0 {
		t.Fatal("clear kept a directory")
	}
	// The bound: past it no directory is made and a name added drops its
	// directory (whose lookups then ask the service).
	c.names = maxCompleteNames - 1
	c.made(3)
	c.made(4)
	if c.tracked() != 1 || !c.absent(3, "x") || c.absent(4, "x") {
		t.Fatalf("at the bound: tracked %d", c.tracked())
	}
	c.added(3, "x")
	if c.absent(3, "y") || c.tracked() != 0 {
		t.Fatal("a name past the bound kept its directory tracked")
	}
}
