package wire

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// zeros pads a file range that came up short.
var zeros [64 << 10]byte

// sendFile writes r.N bytes of r.F from r.Off to nc, a socket, with
// sendfile(2): the kernel passes the file's cached pages to the socket
// without a copy into this process. If the file has fewer bytes (cut
// meanwhile) or fails to read, zeros make up the rest: the frame keeps the
// length its header announced, and the receiver's checksums catch it. An
// error is the socket's.
func sendFile(nc net.Conn, head net.Buffers, r *FileRange) error {
	left := r.N
	sc, ok := nc.(syscall.Conn)
	if !ok { // Server offers DataFile only on sockets (Request.SendFile)
		return fmt.Errorf("wire: sendfile to a %T", nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	src := int(r.F.Fd())
	off := r.Off
	var sockErr error
	err = rc.Write(func(fd uintptr) bool {
		for len(head) > 0 {
			// MSG_MORE: the frame's data follows, in the same segments.
			n, err := unix.SendmsgBuffers(int(fd), head, nil, nil, unix.MSG_MORE)
			if errors.Is(err, unix.EAGAIN) {
				return false
			}
			if err != nil && !errors.Is(err, unix.EINTR) {
				sockErr = err
				return true
			}
			for n > 0 && len(head) > 0 {
				k := min(n, len(head[0]))
				head[0], n = head[0][k:], n-k
				if len(head[0]) == 0 {
					head = head[1:]
				}
			}
		}
		for left > 0 {
			n, err := unix.Sendfile(int(fd), src, &off, min(left, 1<<30))
			if n > 0 {
				left -= n
			}
			switch {
			case errors.Is(err, unix.EAGAIN):
				return false // wait until the socket takes more
			case errors.Is(err, unix.EINTR):
			case errors.Is(err, unix.EPIPE), errors.Is(err, unix.ECONNRESET):
				sockErr = err
				return true
			case err != nil || n == 0:
				return true // the file's end or its error: pad below
			}
		}
		return true
	})
	if err == nil {
		err = sockErr
	}
	if err != nil {
		return err
	}
	for left > 0 {
		n, err := nc.Write(zeros[:min(left, len(zeros))])
		if err != nil {
			return err
		}
		left -= n
	}
	return nil
}
