package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/sluice-fs/sluice/internal/dashboard"
	"github.com/sluice-fs/sluice/internal/metrics"
)

// Admin serves the HTTP admin port: /healthz, /metrics (Prometheus), the
// dashboard (/ and /api/; a server's), and /debug/pprof.
type Admin struct {
	srv *http.Server
	ln  net.Listener
}

func startAdmin(addr string, log *slog.Logger, mx *metrics.Metrics) (*Admin, error) {
	return StartAdmin(addr, log, mx, true)
}

// StartAdmin serves the admin port on addr with mx's metrics (and the
// dashboard if dashboard is set: a server's, not a mount's) until Close.
func StartAdmin(addr string, log *slog.Logger, mx *metrics.Metrics, withDashboard bool) (*Admin, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin port: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", mx.Handler())
	if withDashboard {
		dashboard.Register(mux, mx)
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	a := &Admin{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server stopped", "err", err)
		}
	}()
	return a, nil
}

// Addr is the address it serves on.
func (a *Admin) Addr() string { return a.ln.Addr().String() }

// Close stops it.
func (a *Admin) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.srv.Shutdown(ctx)
}
