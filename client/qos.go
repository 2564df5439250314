package client

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// QosJobLimit is a job's token bucket on every target: Rate bytes per
// second of chunk reads and writes, up to Burst bytes at once.
type QosJobLimit struct {
	Job         string
	Rate, Burst uint64
}

// QosSettings are the cluster's QoS settings (docs/qos.md).
type QosSettings struct {
	Weights map[string]uint32 // by class name, defaults included
	Classes []string          // the class names, most urgent first
	Jobs    []QosJobLimit     // sorted by job
	// MetaJobs are the jobs' limits on the metadata service: Rate
	// namespace requests per second, up to Burst at once. Sorted by job.
	MetaJobs []QosJobLimit
	// ClusterJobs are the jobs' limits in the whole cluster: Rate bytes
	// per second, up to Burst, over all storage nodes together. Sorted by
	// job.
	ClusterJobs []QosJobLimit
}

// QosSettings reads the QoS settings.
func (c *Client) QosSettings(ctx context.Context) (QosSettings, error) {
	var r wire.QosConfig
	if err := c.metaCall(ctx, wire.OpQosList, &wire.Empty{}, &r); err != nil {
		return QosSettings{}, fmt.Errorf("qos ls: %w", err)
	}
	out := QosSettings{Weights: map[string]uint32{}}
	for i, w := range r.Weights {
		name := qos.Class(i).String()
		out.Classes = append(out.Classes, name)
		out.Weights[name] = w
	}
	for _, j := range r.Jobs {
		out.Jobs = append(out.Jobs, QosJobLimit(j))
	}
	for _, j := range r.MetaJobs {
		out.MetaJobs = append(out.MetaJobs, QosJobLimit(j))
	}
	for _, j := range r.ClusterJobs {
		out.ClusterJobs = append(out.ClusterJobs, QosJobLimit(j))
	}
	return out, nil
}

// SetQosWeight gives class (interactive, training, checkpoint, background)
// weight w of a saturated target; 0 restores its default.
func (c *Client) SetQosWeight(ctx context.Context, class string, w uint32) error {
	cl, err := qos.ParseClass(class)
	if err != nil {
		return err
	}
	return c.qosSet(ctx, &wire.QosSetReq{Kind: wire.QosSetWeight, Class: uint8(cl), Weight: w})
}

// SetQosJobLimit limits job to rate bytes per second, up to burst bytes at
// once, on each target.
func (c *Client) SetQosJobLimit(ctx context.Context, job string, rate, burst uint64) error {
	return c.qosSet(ctx, &wire.QosSetReq{Kind: wire.QosSetJob, Job: job, Rate: rate, Burst: burst})
}

// SetQosJobMetaLimit limits job to rate namespace requests per second, up
// to burst at once, on the metadata service.
func (c *Client) SetQosJobMetaLimit(ctx context.Context, job string, rate, burst uint64) error {
	return c.qosSet(ctx, &wire.QosSetReq{Kind: wire.QosSetJobMeta, Job: job, Rate: rate, Burst: burst})
}

// SetQosJobClusterLimit limits job to rate bytes per second, up to burst,
// in the whole cluster: the metadata service splits it among the storage
// nodes by what the job asks of each (docs/qos.md).
func (c *Client) SetQosJobClusterLimit(ctx context.Context, job string, rate, burst uint64) error {
	return c.qosSet(ctx, &wire.QosSetReq{Kind: wire.QosSetJobCluster, Job: job, Rate: rate, Burst: burst})
}

// RemoveQosJobLimit lifts job's limits (on the targets and on the metadata
// service).
func (c *Client) RemoveQosJobLimit(ctx context.Context, job string) error {
	return c.qosSet(ctx, &wire.QosSetReq{Kind: wire.QosRemoveJob, Job: job})
}

func (c *Client) qosSet(ctx context.Context, req *wire.QosSetReq) error {
	if err := c.metaCall(ctx, wire.OpQosSet, req, &wire.Empty{}); err != nil {
		return fmt.Errorf("qos set: %w", err)
	}
	return nil
}
