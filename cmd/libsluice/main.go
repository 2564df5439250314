// Command libsluice is the C ABI over the Sluice client library, built as a
// shared library for the Python package (python/sluice) and any other
// language with a C FFI:
//
//	go build -buildmode=c-shared -o python/sluice/_libsluice.so ./cmd/libsluice
//
// Every function returns an int64: a handle or a count when >= 0, a
// negated errno when < 0, with the error's message written into the
// caller's errbuf (errlen bytes, NUL-terminated). Handles are integers;
// buffers are the caller's memory, read or written only during the call.
// A handle works only in the process that made it: after fork a child must
// connect again (and load its own copy of the library: a Go runtime does
// not survive fork). The logic lives in internal/cabi; this file only
// converts between C and Go.
package main

/*
#include "sluice.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/sluice-fs/sluice/internal/cabi"
)

// ABIVersion changes whenever a function's signature or meaning changes.
const ABIVersion = 4 // 2: the KV-cache store's functions (sluice_kv_*); 3: sluice_connect_config, sluice_staging_{stats,wait,hold}; 4: sluice_staging_metrics

var lib = cabi.New()

func main() {}

// fail writes err's message into errbuf and returns -errno.
func fail(err error, errbuf *C.char, errlen C.int32_t) C.int64_t {
	setErr(err, errbuf, errlen)
	return -C.int64_t(cabi.Errno(err))
}

func setErr(err error, errbuf *C.char, errlen C.int32_t) {
	if errbuf == nil || errlen <= 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(errbuf)), int(errlen))
	n := copy(b[:len(b)-1], err.Error())
	b[n] = 0
}

func ret(v int64, err error, errbuf *C.char, errlen C.int32_t) C.int64_t {
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	return C.int64_t(v)
}

func bytes(p unsafe.Pointer, n C.int64_t) []byte {
	if n <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), int(n))
}

//export sluice_abi_version
func sluice_abi_version() C.int64_t { return ABIVersion }

//export sluice_handles
func sluice_handles() C.int64_t { return C.int64_t(lib.Handles()) }

//export sluice_connect
func sluice_connect(server *C.char, readAhead C.int64_t, conns C.int32_t, timeoutMs C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	h, err := lib.Connect(cabi.Options{Server: C.GoString(server), ReadAhead: int64(readAhead),
		ConnsPerServer: int(conns), Timeout: time.Duration(timeoutMs) * time.Millisecond})
	return ret(h, err, errbuf, errlen)
}

// sluice_connect_config connects with the options of a JSON object
// (cabi.Config: server, timeout_ms, read_ahead, conns_per_server,
// staging_dir, staging_max).
//
//export sluice_connect_config
func sluice_connect_config(config *C.char, errbuf *C.char, errlen C.int32_t) C.int64_t {
	o, err := cabi.ParseConfig([]byte(C.GoString(config)))
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	h, err := lib.Connect(o)
	return ret(h, err, errbuf, errlen)
}

// sluice_staging_stats puts the staging area's counts, as a JSON object,
// into a result handle and stores its size in *size; sluice_take copies
// it out.
//
//export sluice_staging_stats
func sluice_staging_stats(h C.int64_t, size *C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	b, err := lib.StagingStats(int64(h))
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	*size = C.int64_t(len(b))
	return C.int64_t(lib.PutResult(b))
}

// sluice_staging_metrics puts the staging area as Prometheus text into a
// result handle and stores its size in *size; sluice_take copies it out.
//
//export sluice_staging_metrics
func sluice_staging_metrics(h C.int64_t, size *C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	b, err := lib.StagingMetrics(int64(h))
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	*size = C.int64_t(len(b))
	return C.int64_t(lib.PutResult(b))
}

// sluice_staging_wait waits until everything the client staged has
// drained to the targets.
//
//export sluice_staging_wait
func sluice_staging_wait(h C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.StagingWait(int64(h)), errbuf, errlen)
}

// sluice_staging_hold defers the drain of the staging area while a
// checkpoint is saved (hold 1) or releases the latest hold (hold 0).
//
//export sluice_staging_hold
func sluice_staging_hold(h C.int64_t, hold C.int32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.StagingHold(int64(h), hold != 0), errbuf, errlen)
}

//export sluice_disconnect
func sluice_disconnect(h C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Disconnect(int64(h)), errbuf, errlen)
}

//export sluice_open
func sluice_open(h C.int64_t, path *C.char, flags C.int32_t, mode C.uint32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	fh, err := lib.Open(int64(h), C.GoString(path), int(flags), uint32(mode))
	return ret(fh, err, errbuf, errlen)
}

//export sluice_pread
func sluice_pread(fh C.int64_t, buf unsafe.Pointer, n C.int64_t, off C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	got, err := lib.Pread(int64(fh), bytes(buf, n), int64(off))
	return ret(int64(got), err, errbuf, errlen)
}

//export sluice_pwrite
func sluice_pwrite(fh C.int64_t, buf unsafe.Pointer, n C.int64_t, off C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	got, err := lib.Pwrite(int64(fh), bytes(buf, n), int64(off))
	return ret(int64(got), err, errbuf, errlen)
}

//export sluice_fsync
func sluice_fsync(fh C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Fsync(int64(fh)), errbuf, errlen)
}

//export sluice_close
func sluice_close(fh C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Close(int64(fh)), errbuf, errlen)
}

//export sluice_ftruncate
func sluice_ftruncate(fh C.int64_t, size C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Ftruncate(int64(fh), int64(size)), errbuf, errlen)
}

func putStat(st cabi.Stat, out *C.sluice_stat_t) {
	*out = C.sluice_stat_t{
		size: C.int64_t(st.Size), atime_ns: C.int64_t(st.Atime), mtime_ns: C.int64_t(st.Mtime), ctime_ns: C.int64_t(st.Ctime),
		ino: C.uint64_t(st.Ino), mode: C.uint32_t(st.Mode), nlink: C.uint32_t(st.Nlink), uid: C.uint32_t(st.Uid), gid: C.uint32_t(st.Gid),
	}
}

//export sluice_fstat
func sluice_fstat(fh C.int64_t, out *C.sluice_stat_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	st, err := lib.Fstat(int64(fh))
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	putStat(st, out)
	return 0
}

//export sluice_stat
func sluice_stat(h C.int64_t, path *C.char, follow C.int32_t, out *C.sluice_stat_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	st, err := lib.Stat(int64(h), C.GoString(path), follow != 0)
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	putStat(st, out)
	return 0
}

//export sluice_mkdir
func sluice_mkdir(h C.int64_t, path *C.char, mode C.uint32_t, parents C.int32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Mkdir(int64(h), C.GoString(path), uint32(mode), parents != 0), errbuf, errlen)
}

//export sluice_unlink
func sluice_unlink(h C.int64_t, path *C.char, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Unlink(int64(h), C.GoString(path)), errbuf, errlen)
}

//export sluice_rmdir
func sluice_rmdir(h C.int64_t, path *C.char, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Rmdir(int64(h), C.GoString(path)), errbuf, errlen)
}

//export sluice_remove_all
func sluice_remove_all(h C.int64_t, path *C.char, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.RemoveAll(int64(h), C.GoString(path)), errbuf, errlen)
}

//export sluice_rename
func sluice_rename(h C.int64_t, oldpath, newpath *C.char, noReplace C.int32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Rename(int64(h), C.GoString(oldpath), C.GoString(newpath), noReplace != 0), errbuf, errlen)
}

//export sluice_truncate
func sluice_truncate(h C.int64_t, path *C.char, size C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Truncate(int64(h), C.GoString(path), int64(size)), errbuf, errlen)
}

// sluice_listdir lists a directory into a result handle and stores the
// packed listing's size in *size; sluice_take copies it out.
//
//export sluice_listdir
func sluice_listdir(h C.int64_t, path *C.char, plus C.int32_t, size *C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	es, err := lib.ListDir(int64(h), C.GoString(path), plus != 0)
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	b := cabi.PackEntries(es)
	*size = C.int64_t(len(b))
	return C.int64_t(lib.PutResult(b))
}

// sluice_take copies result h into buf (n bytes, at least its size) and
// frees it.
//
//export sluice_take
func sluice_take(h C.int64_t, buf unsafe.Pointer, n C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	got, err := lib.TakeResult(int64(h), bytes(buf, n))
	return ret(int64(got), err, errbuf, errlen)
}

// sluice_free frees a file set, a KV-cache store's handle, or a result
// nobody took.
//
//export sluice_free
func sluice_free(h C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.Free(int64(h)), errbuf, errlen)
}

// sluice_read_batch reads n requests (paths[i], offsets[i], lengths[i]
// bytes into bufs[i]), at most inflight at once, and stores each one's
// result in results[i]: bytes read, or -errno. It returns the number that
// failed (the first one's message in errbuf), or -errno if none could run.
//
//export sluice_read_batch
func sluice_read_batch(h C.int64_t, n C.int64_t, paths **C.char, offsets *C.int64_t, lengths *C.int64_t, bufs *unsafe.Pointer,
	results *C.int64_t, inflight C.int32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	cnt := int(n)
	ps, offs, lens := unsafe.Slice(paths, cnt), unsafe.Slice(offsets, cnt), unsafe.Slice(lengths, cnt)
	bs, res := unsafe.Slice(bufs, cnt), unsafe.Slice(results, cnt)
	reqs := make([]cabi.ReadReq, cnt)
	for i := range reqs {
		reqs[i] = cabi.ReadReq{Path: C.GoString(ps[i]), Off: int64(offs[i]), Buf: bytes(bs[i], lens[i])}
	}
	failed, err := lib.ReadBatch(int64(h), reqs, int(inflight))
	for i, r := range reqs {
		res[i] = itemResult(r.N, r.Err)
	}
	return batchResult(failed, err, errbuf, errlen)
}

func itemResult(n int, err error) C.int64_t {
	if err != nil {
		return -C.int64_t(cabi.Errno(err))
	}
	return C.int64_t(n)
}

func batchResult(failed int, err error, errbuf *C.char, errlen C.int32_t) C.int64_t {
	if err != nil {
		setErr(err, errbuf, errlen)
		if failed == 0 { // the batch itself failed (a bad handle)
			return -C.int64_t(cabi.Errno(err))
		}
	}
	return C.int64_t(failed)
}

// sluice_write_batch writes n files (paths[i] created or truncated to hold
// lengths[i] bytes from bufs[i]; with sync made durable), at most inflight
// at once; results[i] is 0 or -errno. It returns the number that failed.
//
//export sluice_write_batch
func sluice_write_batch(h C.int64_t, n C.int64_t, paths **C.char, lengths *C.int64_t, bufs *unsafe.Pointer,
	results *C.int64_t, inflight C.int32_t, sync C.int32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	cnt := int(n)
	ps, lens, bs, res := unsafe.Slice(paths, cnt), unsafe.Slice(lengths, cnt), unsafe.Slice(bufs, cnt), unsafe.Slice(results, cnt)
	reqs := make([]cabi.WriteReq, cnt)
	for i := range reqs {
		reqs[i] = cabi.WriteReq{Path: C.GoString(ps[i]), Data: bytes(bs[i], lens[i])}
	}
	failed, err := lib.WriteBatch(int64(h), reqs, int(inflight), sync != 0)
	for i, r := range reqs {
		res[i] = itemResult(0, r.Err)
	}
	return batchResult(failed, err, errbuf, errlen)
}

// sluice_fileset_paths opens n paths for reading as a file set and returns
// its handle; results[i] is 0 or -errno for each path.
//
//export sluice_fileset_paths
func sluice_fileset_paths(h C.int64_t, n C.int64_t, paths **C.char, results *C.int64_t, inflight C.int32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	cnt := int(n)
	ps, res := unsafe.Slice(paths, cnt), unsafe.Slice(results, cnt)
	names := make([]string, cnt)
	for i := range names {
		names[i] = C.GoString(ps[i])
	}
	fs, errs, err := lib.FilesetFromPaths(int64(h), names, int(inflight))
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	for i, e := range errs {
		res[i] = itemResult(0, e)
	}
	return C.int64_t(fs)
}

// sluice_fileset_dir opens every regular file in a directory (recursive:
// and below it) as a file set and returns its handle.
//
//export sluice_fileset_dir
func sluice_fileset_dir(h C.int64_t, root *C.char, recursive C.int32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	fs, err := lib.FilesetFromDir(int64(h), C.GoString(root), recursive != 0)
	return ret(fs, err, errbuf, errlen)
}

// sluice_fileset_entries packs a file set's entries into a result handle
// (size in *size) for sluice_take.
//
//export sluice_fileset_entries
func sluice_fileset_entries(fs C.int64_t, size *C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	es, err := lib.FilesetEntries(int64(fs))
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	b := cabi.PackEntries(es)
	*size = C.int64_t(len(b))
	return C.int64_t(lib.PutResult(b))
}

// sluice_fileset_read reads n requests (file indices[i] of the set,
// offsets[i], lengths[i] bytes into bufs[i]) like sluice_read_batch.
//
//export sluice_fileset_read
func sluice_fileset_read(fs C.int64_t, n C.int64_t, indices *C.int64_t, offsets *C.int64_t, lengths *C.int64_t, bufs *unsafe.Pointer,
	results *C.int64_t, inflight C.int32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	cnt := int(n)
	idx, offs, lens := unsafe.Slice(indices, cnt), unsafe.Slice(offsets, cnt), unsafe.Slice(lengths, cnt)
	bs, res := unsafe.Slice(bufs, cnt), unsafe.Slice(results, cnt)
	reqs := make([]cabi.IndexReadReq, cnt)
	for i := range reqs {
		reqs[i] = cabi.IndexReadReq{Index: int(idx[i]), Off: int64(offs[i]), Buf: bytes(bs[i], lens[i])}
	}
	failed, err := lib.FilesetRead(int64(fs), reqs, int(inflight))
	for i, r := range reqs {
		res[i] = itemResult(r.N, r.Err)
	}
	return batchResult(failed, err, errbuf, errlen)
}

// cStrings converts n C strings.
func cStrings(p **C.char, n int) []string {
	cs := unsafe.Slice(p, n)
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(cs[i])
	}
	return out
}

// cBuffers converts n (address, length) pairs into slices of the caller's
// memory.
func cBuffers(p *unsafe.Pointer, lens *C.int64_t, n int) [][]byte {
	ps, ls := unsafe.Slice(p, n), unsafe.Slice(lens, n)
	out := make([][]byte, n)
	for i := range out {
		out[i] = bytes(ps[i], ls[i])
	}
	return out
}

// sluice_kv_create creates the KV-cache store name (docs/kvcache.md):
// capacity bytes over every target, values expiring after ttl_ms (0:
// never), replicas copies of each.
//
//export sluice_kv_create
func sluice_kv_create(h C.int64_t, name *C.char, capacity C.int64_t, ttlMs C.int64_t, replicas C.int32_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	return ret(0, lib.KVCreate(int64(h), C.GoString(name), int64(capacity), time.Duration(ttlMs)*time.Millisecond, int(replicas)), errbuf, errlen)
}

// sluice_kv_open opens the KV-cache store name and returns its handle
// (freed by sluice_free).
//
//export sluice_kv_open
func sluice_kv_open(h C.int64_t, name *C.char, errbuf *C.char, errlen C.int32_t) C.int64_t {
	kh, err := lib.KVOpen(int64(h), C.GoString(name))
	return ret(kh, err, errbuf, errlen)
}

// sluice_kv_put stores n values (bufs[i], lengths[i] bytes) under keys[i],
// in parallel, and sets results[i] to 1 where it stored the value, 0 where
// the key already had one (keys are write-once).
//
//export sluice_kv_put
func sluice_kv_put(kh C.int64_t, n C.int64_t, keys **C.char, bufs *unsafe.Pointer, lengths *C.int64_t, results *C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	cnt := int(n)
	stored, err := lib.KVPut(int64(kh), cStrings(keys, cnt), cBuffers(bufs, lengths, cnt))
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	res := unsafe.Slice(results, cnt)
	for i, ok := range stored {
		res[i] = 0
		if ok {
			res[i] = 1
		}
	}
	return 0
}

// sluice_kv_get reads the values of n keys into bufs[i] (lengths[i]
// bytes), in parallel, and sets results[i] to each one's length, -1 for a
// key without a value. A buffer shorter than its value fails the call
// (-ERANGE).
//
//export sluice_kv_get
func sluice_kv_get(kh C.int64_t, n C.int64_t, keys **C.char, bufs *unsafe.Pointer, lengths *C.int64_t, results *C.int64_t, errbuf *C.char, errlen C.int32_t) C.int64_t {
	cnt := int(n)
	got, err := lib.KVGet(int64(kh), cStrings(keys, cnt), cBuffers(bufs, lengths, cnt))
	if err != nil {
		return fail(err, errbuf, errlen)
	}
	res := unsafe.Slice(results, cnt)
	for i, v := range got {
		res[i] = C.int64_t(v)
	}
	return 0
}

// sluice_kv_exists returns how many of n keys, from the first, have a
// value.
//
//export sluice_kv_exists
func sluice_kv_exists(kh C.int64_t, n C.int64_t, keys **C.char, errbuf *C.char, errlen C.int32_t) C.int64_t {
	v, err := lib.KVExists(int64(kh), cStrings(keys, int(n)))
	return ret(int64(v), err, errbuf, errlen)
}

// sluice_kv_delete removes n keys and returns how many had a value.
//
//export sluice_kv_delete
func sluice_kv_delete(kh C.int64_t, n C.int64_t, keys **C.char, errbuf *C.char, errlen C.int32_t) C.int64_t {
	v, err := lib.KVDelete(int64(kh), cStrings(keys, int(n)))
	return ret(int64(v), err, errbuf, errlen)
}
