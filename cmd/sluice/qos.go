package main

import (
	"context"
	"time"

	"github.com/sluice-fs/sluice/client"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newQos(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "qos",
		Short: "Quality of service: class weights and job limits on the storage targets and the metadata service",
		Long: "Clients name a job and a priority class (--qos-job, --qos-class, or $SLUICE_QOS_JOB and\n" +
			"$SLUICE_QOS_CLASS); a saturated target or metadata service serves the classes interactive,\n" +
			"training, checkpoint and background by weight, and each limited job at most at its rate. See docs/qos.md.",
	}
	var o cli.QosSetOptions
	set := &cobra.Command{Use: "set", Short: "Set a class's weight (--class C --weight W) or a job's limits (--job J --rate R --burst B, --meta-rate N --meta-burst M, --cluster-rate R --cluster-burst B)", Args: exactArgs(0)}
	set.Flags().StringVar(&o.Class, "class", "", "priority class: interactive, training, checkpoint or background")
	set.Flags().Int64Var(&o.Weight, "weight", -1, "the class's weight (0 restores the default)")
	set.Flags().StringVar(&o.Job, "job", "", "job name")
	set.Flags().StringVar(&o.Rate, "rate", "", "the job's rate in bytes per second on each target (e.g. 100M)")
	set.Flags().StringVar(&o.Burst, "burst", "", "the job's burst in bytes (default: one second of --rate)")
	set.Flags().StringVar(&o.MetaRate, "meta-rate", "", "the job's rate in namespace requests per second on the metadata service")
	set.Flags().StringVar(&o.MetaBurst, "meta-burst", "", "the job's burst in namespace requests (default: a tenth of a second of --meta-rate)")
	set.Flags().StringVar(&o.ClusterRate, "cluster-rate", "", "the job's rate in bytes per second in the whole cluster, split among the storage nodes by demand (e.g. 1G)")
	set.Flags().StringVar(&o.ClusterBurst, "cluster-burst", "", "the job's burst in bytes in the whole cluster (default: one second of --cluster-rate)")
	set.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.QosSet(ctx, o) })
	var job string
	rm := &cobra.Command{Use: "rm", Short: "Remove a job's limits (--job J)", Args: exactArgs(0)}
	rm.Flags().StringVar(&job, "job", "", "job name")
	rm.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.QosRemove(ctx, job) })
	ls := &cobra.Command{Use: "ls", Short: "List the class weights and job limits", Args: exactArgs(0)}
	ls.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.QosList(ctx) })
	cmd.AddCommand(set, rm, ls)
	return cmd
}

// qosFlags adds --qos-job and --qos-class, the client's QoS identity; when
// not given the client reads $SLUICE_QOS_JOB and $SLUICE_QOS_CLASS.
func qosFlags(cmd *cobra.Command, job, class *string) {
	cmd.Flags().StringVar(job, "qos-job", "", "job name the client's chunk I/O and namespace requests are scheduled and limited as (default $"+client.EnvQosJob+")")
	cmd.Flags().StringVar(class, "qos-class", "", "priority class of the client's chunk I/O and namespace requests: interactive, training, checkpoint or background (default $"+client.EnvQosClass+", else training)")
}

// qosEnv passes a QoS identity given by flags to a child process.
func qosEnv(job, class string) []string {
	var env []string
	if job != "" {
		env = append(env, client.EnvQosJob+"="+job)
	}
	if class != "" {
		env = append(env, client.EnvQosClass+"="+class)
	}
	return env
}

// qosReserveFlag adds --qos-cpu-reserve: the CPUs a server keeps free of
// checkpoint and background requests while interactive ones come.
func qosReserveFlag(cmd *cobra.Command, n *int) {
	cmd.Flags().IntVar(n, "qos-cpu-reserve", 1, "CPUs (Go Ps) kept free of checkpoint and background requests for a second after each interactive one, "+
		"so that its frame is read at once (0: none; docs/qos.md)")
}

// precreateFlag adds --precreate: empty chunk files each target keeps
// made ahead of need.
func noDirectReadsFlag(cmd *cobra.Command, off *bool) {
	cmd.Flags().BoolVar(off, "no-direct-reads", false, "do not hand unreplicated chunks' files to clients on this machine "+
		"(DATA/direct.sock; clients that ask, SLUICE_DIRECT_READ=1, then read them through the network; docs/adr/0025-direct-reads.md)")
}

func fenceGraceFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "chunk-fence-grace", DefaultFenceGrace, "how long a moved chunk's fence outlives the chunk: "+
		"clients renew the layouts they use every minute, so keep it well above that (0: keep fences for good; docs/adr/0023-release-fences.md)")
}

func layoutLeaseFlag(cmd *cobra.Command, d *time.Duration, prefix string) {
	cmd.Flags().DurationVar(d, "layout-lease", client.DefaultLayoutLease, prefix+"how long an open file uses a layout it learnt before asking for it again: "+
		"keep it well below the targets' --chunk-fence-grace (docs/adr/0023-release-fences.md)")
}

// DefaultFenceGrace is the default of --chunk-fence-grace: ten times the
// clients' layout lease (client.DefaultLayoutLease), which leaves the op
// timeout (30 s) and a paused client a wide margin.
const DefaultFenceGrace = 10 * time.Minute

func precreateFlag(cmd *cobra.Command, n *int) {
	cmd.Flags().IntVar(n, "precreate", 0, "empty chunk files each target keeps made ahead of need (0 to 4096; 0: none), "+
		"so that a burst of new small files renames them instead of creating files (docs/fuse.md)")
}
