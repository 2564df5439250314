package target

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/chunk"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Direct reads (docs/adr/0025-direct-reads.md): the service passes the
// files of its unreplicated targets' chunks to clients on its machine over
// a Unix socket, and they read them with chunk.DirectReader. Replicated
// chains are not offered: their replicas change with chain versions and
// resyncs that a direct reader would not see.

// direct is the Unix socket of a Service.
type direct struct {
	mu    sync.Mutex
	path  string
	boot  string
	ln    *net.UnixListener
	conns map[*net.UnixConn]struct{}
	wg    sync.WaitGroup
}

// ServeDirect starts handing out chunks' files on a Unix socket at path
// (replacing a stale one), readable and writable by this process's user
// only. It returns the function that stops it and removes the socket.
func (s *Service) ServeDirect(path string) (stop func(), err error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("target: direct socket %s: %w", path, err)
	}
	// The mode is set before the socket exists (a socket's permission
	// bits are those of its creation, under the umask).
	old := unix.Umask(0o077)
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("target: direct socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	d := &direct{path: path, boot: wire.BootID(), ln: ln, conns: map[*net.UnixConn]struct{}{}}
	s.direct.Store(d)
	d.wg.Go(func() { s.acceptDirect(d) })
	return func() {
		s.direct.Store(nil)
		ln.Close()
		d.mu.Lock()
		for c := range d.conns {
			c.Close()
		}
		d.mu.Unlock()
		d.wg.Wait()
	}, nil
}

func (s *Service) acceptDirect(d *direct) {
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			return
		}
		d.mu.Lock()
		d.conns[c] = struct{}{}
		d.mu.Unlock()
		d.wg.Go(func() {
			defer func() {
				d.mu.Lock()
				delete(d.conns, c)
				d.mu.Unlock()
				c.Close()
			}()
			s.serveDirectConn(c)
		})
	}
}

// serveDirectConn answers one client's requests, one message each.
func (s *Service) serveDirectConn(c *net.UnixConn) {
	buf := make([]byte, 64)
	for {
		n, _, _, _, err := c.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			return
		}
		var req wire.DirectOpenReq
		var resp wire.DirectOpenResp
		var oob []byte
		var files []*os.File
		if err := wire.Unmarshal(buf[:n], &req); err != nil {
			resp = wire.DirectOpenResp{Code: uint16(errs.Protocol), Msg: err.Error()}
		} else if req.Data {
			// FUSE passthrough of a separate mount: the data file alone,
			// checked whole, marked never to be recycled.
			if data, size, err := s.openShared(req); err != nil {
				resp = wire.DirectOpenResp{Code: uint16(errs.CodeOf(err)), Msg: err.Error()}
				if resp.Code == 0 {
					resp.Code = uint16(errs.Internal)
				}
			} else {
				resp = wire.DirectOpenResp{Data: true, Len: uint64(size)}
				files = []*os.File{data}
				oob = unix.UnixRights(int(data.Fd()))
			}
		} else if data, sum, err := s.openDirect(req); err != nil {
			resp = wire.DirectOpenResp{Code: uint16(errs.CodeOf(err)), Msg: err.Error()}
			if resp.Code == 0 {
				resp.Code = uint16(errs.Internal)
			}
		} else {
			files = []*os.File{data, sum}
			oob = unix.UnixRights(int(data.Fd()), int(sum.Fd()))
		}
		_, _, err = c.WriteMsgUnix(wire.Marshal(&resp), oob, nil)
		// The receiver has its own descriptors now (or none, if the
		// write failed): these are this process's.
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			return
		}
	}
}

// openDirect opens a chunk of an unreplicated target hosted here.
func (s *Service) openDirect(req wire.DirectOpenReq) (data, sum *os.File, err error) {
	st, err := s.directStore(req)
	if err != nil {
		return nil, nil, err
	}
	return st.OpenDirect(chunk.ID{Ino: req.Ino, Slot: req.Slot})
}

// openShared opens the data file of a chunk of an unreplicated target
// hosted here for another process's FUSE passthrough.
func (s *Service) openShared(req wire.DirectOpenReq) (*os.File, int64, error) {
	st, err := s.directStore(req)
	if err != nil {
		return nil, 0, err
	}
	return st.OpenShared(chunk.ID{Ino: req.Ino, Slot: req.Slot})
}

// directStore is the store of the target a socket request names.
func (s *Service) directStore(req wire.DirectOpenReq) (*chunk.Store, error) {
	st, ok := s.Store(req.Target)
	if !ok {
		return nil, errs.New(errs.NotFound, "target: target %d is not served here", req.Target)
	}
	return st, nil
}

func (s *Service) handleDirectInfo(context.Context, *wire.Request) (wire.Response, error) {
	var resp wire.DirectInfoResp
	if d := s.direct.Load(); d != nil {
		resp = wire.DirectInfoResp{Socket: d.path, Boot: d.boot}
	}
	return wire.Response{Msg: &resp}, nil
}
