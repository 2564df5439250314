package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/profile"
	"github.com/sluice-fs/sluice/internal/s3"
	"github.com/sluice-fs/sluice/internal/server"
)

// DefaultS3Addr is where `sluice gateway` listens by default.
const DefaultS3Addr = "127.0.0.1:9000"

// s3Flags are the S3 gateway's flags, shared by `sluice gateway` and
// `sluice serve --s3`.
type s3Flags struct {
	listen    string
	accessKey string
	secretKey string
	credFile  string
	region    string
	domains   []string
	tlsCert   string
	tlsKey    string

	lifecycleEvery time.Duration
	lifecycleDay   time.Duration
	transitionTier string
}

// register adds the flags to cmd; listenFlag names the listen address
// flag ("s3" for serve, "listen" for gateway).
func (s *s3Flags) register(cmd *cobra.Command, listenFlag, listenDefault string) {
	f := cmd.Flags()
	usage := "serve the S3 API on this address (host:port)"
	if listenFlag == "s3" {
		usage = "also serve the S3 API on this address (host:port); off if empty"
	}
	f.StringVar(&s.listen, listenFlag, listenDefault, usage)
	f.StringVar(&s.accessKey, "s3-access-key", "", "S3 access key ID (with --s3-secret-key)")
	f.StringVar(&s.secretKey, "s3-secret-key", "", "S3 secret key")
	f.StringVar(&s.credFile, "s3-credentials", "", "file of S3 key pairs, one \"ACCESS_KEY SECRET_KEY\" per line (mode 0600)")
	f.StringVar(&s.region, "s3-region", "us-east-1", "region the S3 gateway reports")
	f.StringSliceVar(&s.domains, "s3-domain", nil, "domain for virtual-hosted-style requests (BUCKET.DOMAIN); repeatable")
	f.StringVar(&s.tlsCert, "s3-tls-cert", "", "serve S3 over HTTPS with this PEM certificate (with --s3-tls-key)")
	f.StringVar(&s.tlsKey, "s3-tls-key", "", "PEM private key for --s3-tls-cert")
	f.DurationVar(&s.lifecycleEvery, "s3-lifecycle-every", time.Hour, "how often the gateway applies the buckets' lifecycle rules")
	f.StringVar(&s.transitionTier, "s3-transition-tier", "", "tier backend (sluice tier add) that lifecycle transitions move objects to, whatever their storage class (default: the only one registered)")
	f.DurationVar(&s.lifecycleDay, "s3-lifecycle-day", 24*time.Hour, "length of a day in lifecycle rules (for tests)")
	f.MarkHidden("s3-lifecycle-day")
}

func (s *s3Flags) validate() error {
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return fmt.Errorf("%w: --s3-tls-cert and --s3-tls-key go together", errUsage)
	}
	return nil
}

// loadCredentials finds the gateway's keys; dataDir (serve) allows
// generating a key pair there on first start.
func (s *s3Flags) loadCredentials(dataDir string) (map[string]string, error) {
	creds, where, generated, err := s3.LoadCredentials(s3.CredentialOptions{
		AccessKey: s.accessKey, SecretKey: s.secretKey, File: s.credFile, DataDir: dataDir,
	})
	if err != nil {
		return nil, err
	}
	if generated {
		fmt.Printf("sluice: generated S3 credentials in %s\n", where)
	} else {
		fmt.Printf("sluice: S3 credentials from %s\n", where)
	}
	return creds, nil
}

// run serves the S3 API for the file system at serverAddr until ctx ends.
func (s *s3Flags) run(ctx context.Context, serverAddr string, creds map[string]string, log *slog.Logger) error {
	c, err := client.New(ctx, client.Options{Server: serverAddr, Via: profile.ViaS3})
	if err != nil {
		return err
	}
	defer c.Close()
	gw, err := s3.New(s3.Options{Client: c, Credentials: creds, Region: s.region, Domains: s.domains, Logger: log,
		LifecycleSweepEvery: s.lifecycleEvery, LifecycleDay: s.lifecycleDay, TransitionTier: s.transitionTier})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		return fmt.Errorf("s3: listen on %s: %w", s.listen, err)
	}
	scheme := "http"
	if s.tlsCert != "" {
		scheme = "https"
	}
	fmt.Printf("sluice: s3 gateway on %s://%s\n", scheme, ln.Addr())
	return gw.Run(ctx, ln, s.tlsCert, s.tlsKey)
}

func newLogger(verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func newGateway(g *globals) *cobra.Command {
	var s s3Flags
	var verbose bool
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Serve the S3 API for a Sluice file system",
		Long: "gateway serves an S3-compatible API over the file system at --server: buckets are\n" +
			"top-level directories and keys are paths below them (see docs/s3.md). It prints\n" +
			"\"sluice: s3 gateway on URL\" when ready. Credentials come from --s3-access-key and\n" +
			"--s3-secret-key, --s3-credentials FILE, or $" + s3.EnvAccessKey + " and $" + s3.EnvSecretKey + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.validate(); err != nil {
				return err
			}
			creds, err := s.loadCredentials("")
			if err != nil {
				return err
			}
			addr := g.server
			if addr == "" {
				addr = os.Getenv("SLUICE_SERVER")
			}
			if addr == "" {
				addr = DefaultAddr
			}
			return s.run(cmd.Context(), addr, creds, newLogger(verbose))
		},
	}
	s.register(cmd, "listen", DefaultS3Addr)
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every request")
	return cmd
}

// serveWithS3 is `sluice serve` with the gateway flags: run is how serve
// runs the system (server.Run, or with a FUSE mount); if --s3 is set, the
// gateway starts in the same process once the system is ready (after
// o.Ready) and stops first on shutdown, so that requests in flight finish
// while the system still runs.
func serveWithS3(ctx context.Context, o server.Options, s *s3Flags, run func(context.Context, server.Options) error) error {
	if strings.TrimSpace(s.listen) == "" {
		return run(ctx, o)
	}
	if err := s.validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return fmt.Errorf("serve: create data dir: %w", err)
	}
	creds, err := s.loadCredentials(o.DataDir)
	if err != nil {
		return err
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSrv()
	ready := make(chan string, 1)
	prev := o.Ready
	o.Ready = func(addr string) {
		if prev != nil {
			prev(addr)
		}
		ready <- addr
	}
	var srvErr error
	srvDone := make(chan struct{})
	go func() {
		defer close(srvDone)
		srvErr = run(srvCtx, o)
	}()
	var gwErr error
	select {
	case addr := <-ready:
		gwCtx, stopGw := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			select {
			case <-srvDone: // the system stopped by itself: stop the gateway too
				stopGw()
			case <-gwCtx.Done():
			}
		})
		gwErr = s.run(gwCtx, addr, creds, log)
		stopGw()
		wg.Wait()
	case <-srvDone:
		return srvErr
	case <-ctx.Done():
	}
	stopSrv()
	<-srvDone
	if gwErr != nil && !errors.Is(gwErr, context.Canceled) {
		return errors.Join(gwErr, srvErr)
	}
	return srvErr
}
