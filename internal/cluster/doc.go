// Package cluster is Sluice's cluster manager: the registry of storage
// nodes and their targets, the nodes' heartbeats, and the table of
// replication chains over the targets (forming chains, taking the replicas
// of silent nodes out of them, putting returning replicas back as syncing).
//
// The state lives in the metadata service's kv.DB, so that every metadata
// service sharing that DB agrees on it; Manager caches it and reloads it
// every Options.Refresh while Run runs. The metadata service
// (internal/meta) uses a Manager only through its Targets and
// ClusterManager interfaces and never imports this package; internal/server
// wires the two together.
//
// # Keys, in the metadata service's DB
//
//	"Cnext-target"            u64: next target ID to give out
//	"Cnext-chain"             u64: next replicated chain ID (from 2^31)
//	"Cchains"                 u64: chain table version
//	"T" u32 id                target: 0x01 | u16 n | node name | address
//	"N" node                  node: its last heartbeat (wire encoding) | u64 unix ns
//	"R" u32 chain             replicated chain (wire encoding)
//	"P" name                  pool: u16 n | n × u32 target
//	"W" u32 target            u8 1: the target drains, 2: it was removed
//	"V" u32 chain             u32 old | u32 new: a draining replica's move under way
//
// # Invariants
//
//   - Every transaction that changes what storage nodes act on (target IDs,
//     chains, replica states) requires a sync: it becomes visible only once
//     durable, so a power loss cannot take back a target ID or a chain
//     version that a node has seen.
//   - A chain's replicas change state (serving, offline, syncing), and
//     re-replication replaces an offline replica by a new syncing one
//     (never a serving one); each change bumps the chain's version and the
//     table's. A chain keeps its ID and replica count for life, except
//     while a draining target's replica moves: the new replica joins as
//     syncing (one member more, recorded under "V"), and the draining one
//     leaves in the transaction that makes the new one serving, so the
//     chain never has fewer serving replicas than before.
//   - Every target that may take data is in at least r chains of each
//     replica count r in use (topUpChains), in the cluster and in each
//     pool.
package cluster
