package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/cli"
)

func newTier(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tier",
		Short: "Manage the object tier: S3 buckets below the storage targets",
	}
	cmd.AddCommand(newTierAdd(g), newTierLs(g), newTierRm(g), newTierGC(g), newTierPolicy(g), newTierImport(g))
	return cmd
}

func newTierAdd(g *globals) *cobra.Command {
	var b client.TierBackend
	var creds cli.TierCreds
	var force bool
	cmd := &cobra.Command{
		Use:   "add NAME --endpoint URL --bucket B [--prefix P] [--region R]",
		Short: "Register an S3 bucket as a tier backend (checked first)",
		Long: "Register an S3 bucket as a tier backend. Credentials come from --access-key and\n" +
			"--secret-key, else --credentials FILE (aws_access_key_id / aws_secret_access_key\n" +
			"lines), else $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY. They are never printed.\n" +
			"The bucket is tried first: an unreachable backend or refused credentials fail.",
		Args:   exactArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { b.Name = a[0] },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		var err error
		if b.AccessKey, b.SecretKey, err = creds.Resolve(os.Getenv); err != nil {
			return err
		}
		return e.TierAdd(ctx, b, force)
	})
	f := cmd.Flags()
	f.StringVar(&b.Endpoint, "endpoint", "", "S3 endpoint URL, http(s)://host[:port] (required)")
	f.StringVar(&b.Bucket, "bucket", "", "bucket name (required)")
	f.StringVar(&b.Prefix, "prefix", "", "prefix of every object key")
	f.StringVar(&b.Region, "region", "", "region (default: the endpoint's)")
	f.StringVar(&creds.AccessKey, "access-key", "", "access key ID")
	f.StringVar(&creds.SecretKey, "secret-key", "", "secret access key (visible in ps: prefer --credentials or the environment)")
	f.StringVar(&creds.File, "credentials", "", "file with the access key pair")
	f.BoolVar(&force, "force", false, "register without trying the bucket")
	cmd.MarkFlagRequired("endpoint")
	cmd.MarkFlagRequired("bucket")
	return cmd
}

func newTierLs(g *globals) *cobra.Command {
	var check bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the tier backends (without credentials)",
		Args:  cobra.NoArgs,
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.TierLs(ctx, check) })
	cmd.Flags().BoolVar(&check, "check", false, "try each backend and show its state")
	return cmd
}

func newTierRm(g *globals) *cobra.Command {
	var args []string
	cmd := &cobra.Command{
		Use:    "rm NAME...",
		Short:  "Unregister tier backends",
		Args:   minArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.TierRm(ctx, args) })
	return cmd
}

func newTierGC(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Delete the objects of removed files and replaced archives from the backends",
		Args:  cobra.NoArgs,
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.TierGC(ctx) })
	return cmd
}
