package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// A chunk request goes to one replica of a chain: writes, syncs and
// truncates to the head, which passes them along the chain; reads to any
// serving replica. Chain t < placement.FirstReplicatedChain is the chain
// of one replica on target t. The request names the chain version the
// client knows; a target that knows another version answers
// errs.ChainChanged, and the client reloads the chain table from the
// metadata service and tries again. A replicated chain's replica that
// cannot be reached is retried the same way (its node may be on its way
// out of the chain) until Options.RetryTimeout has passed.

// attemptTimeout bounds one try of a request to a replicated chain.
const attemptTimeout = 10 * time.Second

// Chunk data is checked end to end between processes (wire version 2.7): a
// write carries the CRC32C of its data, which the targets check before
// they store it or pass it down the chain; a read's reply carries the
// CRC32C of each 64 KiB piece of its data, which chunkCall checks. Data garbled in transit
// (errs.Garbled) is sent again, at most maxGarbled times for one request,
// then the error is returned. Calls in process (a connection to a server
// in this process, wire.ServeLocal) carry no CRC32C: nothing is in transit.
const maxGarbled = 3

// chunkReq is a chunk request to send to one replica of a chain.
type chunkReq struct {
	chain placement.ChainID
	write bool // goes to the head (else: any serving replica)
	op    wire.Op
	// msg returns the request body for the chosen target and chain ref.
	msg  func(target placement.TargetID, ref wire.ChainRef) wire.Message
	data [][]byte
	resp wire.Message
	into []byte
	// paced: the first attempt's bytes already waited for the job's
	// buckets (a direct read of the same target that fell back).
	paced bool
}

// cost is what the targets' schedulers charge r: the bytes of a chunk
// read or write (a pacer waits for them), nothing for the rest.
func (r *chunkReq) cost() int {
	switch r.op {
	case wire.OpChunkWrite:
		n := 0
		for _, d := range r.data {
			n += len(d)
		}
		return n
	case wire.OpChunkRead:
		return len(r.into)
	}
	return 0
}

// route picks the target for a request to chain id, and the chain ref.
// attempt rotates reads over the serving replicas.
func (c *Client) route(id placement.ChainID, write bool, attempt int) (placement.TargetID, wire.ChainRef, error) {
	if id < placement.FirstReplicatedChain {
		return placement.TargetID(id), wire.ChainRef{Chain: id}, nil
	}
	c.mu.Lock()
	ch, ok := c.chains[id]
	c.mu.Unlock()
	if !ok {
		return 0, wire.ChainRef{}, errs.New(errs.ChainChanged, "client: chain %d is not in the chain table", id)
	}
	ref := wire.ChainRef{Chain: id, ChainVer: ch.Version}
	if write {
		h, ok := ch.Head()
		if !ok {
			return 0, ref, errs.New(errs.Unavailable, "client: chain %d has no serving replica", id)
		}
		return h, ref, nil
	}
	rs := ch.Readers()
	if len(rs) == 0 {
		return 0, ref, errs.New(errs.Unavailable, "client: chain %d has no serving replica", id)
	}
	return rs[(int(c.readSeq.Add(1))+attempt)%len(rs)], ref, nil
}

// checkPieces checks the bytes of a chunk read at off against the CRC32Cs
// of its pieces (checksum.Pieces) from the target's reply.
func checkPieces(data []byte, off int64, sums []uint32, ch placement.ChainID, t placement.TargetID) error {
	if len(sums) != checksum.Pieces(off, len(data)) {
		return errs.New(errs.Garbled, "client: read of %d bytes at %d from chain %d on target %d: %d checksums for %d pieces (garbled in transit)", len(data), off, ch, t, len(sums), checksum.Pieces(off, len(data)))
	}
	for i := range sums {
		end := min(len(data), int(checksum.BlockSize-off%checksum.BlockSize))
		if got := checksum.BlockCRC(data[:end]); got != sums[i] {
			return errs.New(errs.Garbled, "client: read of %d bytes at %d from chain %d on target %d: the CRC32C of %d bytes at %d is %08x, the reply says %08x (garbled in transit)",
				len(data), off, ch, t, end, off, got, sums[i])
		}
		data, off = data[end:], off+int64(end)
	}
	return nil
}

// chunkCall sends r, retrying as described above. It returns the number of
// data bytes read into r.into.
func (c *Client) chunkCall(ctx context.Context, r chunkReq) (int, error) {
	replicated := r.chain >= placement.FirstReplicatedChain
	var (
		crc    uint32 // of a write's data, once computed
		hasCRC bool
	)
	var deadline time.Time
	garbled := 0
	// A read asks for bytes the target may send unread (with the checksums
	// they were stored with, wire.ReadFlagUnverified) until they once fail
	// the check: then the same replica is asked again for bytes it
	// verifies itself, so that damage on its disk is found and reported
	// there (errs.Corruption) as without the flag.
	verify, again := false, false
	var t placement.TargetID
	var ref wire.ChainRef
	for attempt := 0; ; attempt++ {
		var err error
		if again {
			again = false // t and ref as in the attempt before
		} else {
			t, ref, err = c.route(r.chain, r.write, attempt)
		}
		unverified := false
		if err == nil && c.pace != nil && !(r.paced && attempt == 0) {
			// Outside the attempt's timeout: a wait for the job's
			// bucket is not a replica's silence.
			err = c.pace.wait(ctx, c.targetAddr(t), r.cost())
		}
		var n int
		if err == nil {
			cctx, cancel := ctx, context.CancelFunc(func() {})
			if replicated {
				// A replica cut off the network never answers: give up on
				// it in time to try again once the chain has moved on.
				cctx, cancel = context.WithTimeout(ctx, attemptTimeout)
			}
			var conn *wire.Conn
			if conn, err = c.targetConn(cctx, t); err == nil {
				msg := r.msg(t, ref)
				if w, ok := msg.(*wire.ChunkWriteReq); ok && !conn.InProcess() {
					if !hasCRC {
						crc, hasCRC = checksum.DataCRC(r.data...), true
					}
					w.DataCRC, w.HasDataCRC = crc, true
				}
				if rq, ok := msg.(*wire.ChunkReadReq); ok && !verify && !conn.InProcess() {
					rq.Flags |= wire.ReadFlagUnverified
					unverified = true
				}
				n, err = conn.Call(cctx, r.op, msg, r.data, r.resp, r.into)
				if rr, ok := r.resp.(*wire.ChunkReadResp); ok && err == nil && rr.HasDataSums {
					if rq, ok := msg.(*wire.ChunkReadReq); ok {
						err = checkPieces(r.into[:n], int64(rq.Off), rr.DataSums, r.chain, t)
					}
				}
			}
			// Whether the attempt timed out, read before cancel (after
			// which cctx.Err() is always set): an error the replica
			// answered with (no space, moved, corruption) is not a
			// silence to retry.
			timedOut := cctx.Err() != nil
			cancel()
			if err != nil && ctx.Err() == nil && timedOut {
				err = errs.New(errs.Unavailable, "client: replica %d of chain %d did not answer within %v", t, r.chain, attemptTimeout)
				if conn != nil {
					conn.Close() // maybe dead (a cut link): the pool dials afresh
				}
			}
		}
		if err == nil {
			return n, nil
		}
		code := errs.CodeOf(err)
		if code == errs.Garbled && unverified && ctx.Err() == nil {
			verify, again = true, true // read again from the same replica, verified there
			continue
		}
		if code == errs.Garbled && garbled < maxGarbled && ctx.Err() == nil {
			garbled++ // the same request again, at once (a read: to the next replica)
			continue
		}
		retry := code == errs.ChainChanged || (replicated && code == errs.Unavailable)
		if !retry || ctx.Err() != nil {
			return 0, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(c.opts.RetryTimeout)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("client: chain %d: gave up after %v: %w", r.chain, c.opts.RetryTimeout, err)
		}
		if attempt > 0 {
			if perr := pause.For(ctx, retryPause(attempt)); perr != nil {
				return 0, errors.Join(err, perr)
			}
		}
		if rerr := c.refreshCluster(ctx); rerr != nil && ctx.Err() != nil {
			return 0, err
		}
	}
}

// retryPause is how long a request's attempt-th retry (from 1) waits: a
// growing pause of 20 ms per attempt, at most 500 ms, of which a random
// half, so that clients retrying together spread out.
func retryPause(attempt int) time.Duration {
	d := min(time.Duration(attempt)*20*time.Millisecond, 500*time.Millisecond)
	return d/2 + rand.N(d/2+1)
}
