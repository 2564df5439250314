package pause

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestForWaits(t *testing.T) {
	start := time.Now()
	if err := For(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatalf("For: %v", err)
	}
	if got := time.Since(start); got < 20*time.Millisecond {
		t.Fatalf("For returned after %v, before the 20ms it was asked to wait", got)
	}
}

func TestForEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if err := For(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("For on a canceled context: %v, want context.Canceled", err)
	}
}

func TestForZero(t *testing.T) {
	if err := For(context.Background(), 0); err != nil {
		t.Fatalf("For(0): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := For(ctx, -time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("For(-1s) on an ended context: %v, want context.Canceled", err)
	}
}
