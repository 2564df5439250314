package tier

import (
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

// TestShortBody: a ranged GET whose body ends early is unavailable when
// the response announced every byte asked for (the connection was cut),
// corruption when it announced fewer (the object is not the archived one).
func TestShortBody(t *testing.T) {
	t.Parallel()
	if err := shortBody("b", "k", 0, 10, 100, 100); errs.CodeOf(err) != errs.Unavailable {
		t.Errorf("a cut response: %v; want unavailable", err)
	}
	if err := shortBody("b", "k", 0, 10, 100, 10); errs.CodeOf(err) != errs.Corruption {
		t.Errorf("a short object: %v; want corruption", err)
	}
	if err := shortBody("b", "k", 0, 10, 100, -1); errs.CodeOf(err) != errs.Corruption {
		t.Errorf("no length announced: %v; want corruption", err)
	}
}
