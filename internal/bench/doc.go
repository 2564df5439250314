// Package bench is Sluice's yardstick: `sluice bench`. It runs phases
// modelled on IO500 (ior-easy, ior-hard, mdtest-easy, mdtest-hard, find)
// and AI phases (training emulation in the spirit of MLPerf Storage, and
// checkpoint/restore) against an FS: a local directory (a Sluice FUSE
// mount, a local disk, any other file system) or Sluice natively through
// the client library, so that systems can be compared in one run.
//
// Every byte written carries a stamp (writer and offset) that the read
// phases check, so a phase that claims to have read another worker's data
// has. Workers are goroutines; each phase starts when all workers of the
// previous one are done (a barrier, like IO500's MPI ranks).
package bench
