package client

import (
	"testing"

	"github.com/sluice-fs/sluice/internal/wire"
)

// TestOwnChain: the chain follows answers that say the file was unchanged,
// asks nothing before it starts, and breaks for good on an answer that
// does not say so, on an unchecked change and on a lost answer.
func TestOwnChain(t *testing.T) {
	var o ownChain
	if m, s := o.ifState(); m != 0 || s != 0 {
		t.Fatalf("before start: if %d/%d, want no check", m, s)
	}
	o.start(100, 10)
	if m, s := o.ifState(); m != 100 || s != 10 {
		t.Fatalf("after start: if %d/%d, want 100/10", m, s)
	}
	o.answer(100, &wire.Attr{Mtime: 200, Size: 20, Flags: wire.AttrUnchanged})
	if m, s := o.ifState(); m != 200 || s != 20 {
		t.Fatalf("after an unchanged answer: if %d/%d, want 200/20", m, s)
	}

	for name, breakIt := range map[string]func(o *ownChain){
		"changed":   func(o *ownChain) { o.answer(200, &wire.Attr{Mtime: 300, Size: 30}) },
		"unchecked": func(o *ownChain) { o.answer(0, &wire.Attr{Mtime: 300, Size: 30, Flags: wire.AttrUnchanged}) },
		"lost":      func(o *ownChain) { o.brk() },
	} {
		var o ownChain
		o.start(200, 20)
		breakIt(&o)
		o.answer(200, &wire.Attr{Mtime: 400, Size: 40, Flags: wire.AttrUnchanged}) // too late
		if m, s := o.ifState(); m != 0 || s != 0 {
			t.Errorf("%s: if %d/%d after the chain broke, want no check", name, m, s)
		}
		o.mu.Lock()
		broken := o.broken
		o.mu.Unlock()
		if !broken {
			t.Errorf("%s: the chain is not broken", name)
		}
	}
}
