// Package dynamodb is the catalog on Amazon DynamoDB (aws-sdk-go-v2), for
// deployments; in tests it runs against moto. It passes the conformance
// suite in catalogtest.
//
// It is a catalog.Driver: New returns the *catalog.Catalog over it, which
// checks every argument before this package sees it. Here are only storage
// and the catalog's rules applied to what was read, plus the page tokens,
// whose format is this package's. EnsureTable creates the table (in
// development; deployments use Terraform).
//
// # Table and items
//
// One table (TableDefinition; Terraform's sluice-storage module defines the
// same, checked by a test) with string keys pk and sk. Every item carries
// fv, its format version (1; readers refuse others), and versioned records
// carry v, their CAS version. Times are Unix milliseconds.
//
//	pk                                     sk              item
//	topics                                 <name>          live topic: id, parts, cfg (map), created, v
//	deleted-topics                         <topic id>      deleted topic, same attributes + deleted
//	partitions#<topic id>                  <index %05d>    owner?, epoch, ledgers [{id, first}], lso, v
//	owners                                 <owner id>      addr, exp
//	bookies                                <bookie id>     addr, free, total, ro, exp
//	ledger#<id %020d>                      ledger          ledger metadata (state, ens, last, ...), v
//	ledgers-by-partition#<topic id>#<p>    <id %020d>      index item (keys only)
//	ledgers-by-state#<STATE>               <id %020d>      index item (keys only)
//	counters                               ledger-id       last: the last ledger id allocated (ADD)
//	triggers                               <name>          trigger: topic, tid, fn, on, start, batch, ..., v
//	acls                                   <catalog.ACLKey> ACL: principal, rtype, ptype, rname, op, perm
//
// Topics, deleted topics, owners, bookies and triggers each share one partition key,
// so listing them is one Query in key order, and they are small, rarely
// written collections (heartbeats: one write per owner or bookie every few
// seconds). Partition items of a topic share a key, so ListPartitions is a
// range query; a partition's item is written only once it is first
// acquired. Index items change in the same transaction as their ledger,
// so no GSI (and no eventually consistent index read) is needed.
//
// # Consistency
//
// Every read is strongly consistent (ConsistentRead), because reads here
// either decide a conditional write or back a Get that must reflect the
// caller's own writes; the catalog is off the data path, so the doubled
// read cost does not matter. Every write is conditional: puts on
// attribute_not_exists (creates) or on the version read (CAS). Where one
// decision rests on several items, TransactWriteItems commits it together
// with ConditionChecks on the others — AcquireWriter checks the topic
// incarnation, the caller's heartbeat (exp > now) and, when stealing, the
// old owner's (missing or exp <= now); AppendLedger checks the topic and
// the ledger. A canceled transaction is mapped to the typed error of the
// item whose condition failed (cancellationError); a conflict with another
// in-flight transaction is a lost race, ErrVersionConflict.
//
// List pages are consistent reads but not snapshots: ListLedgersBy* read an
// index page and then the ledgers, leaving out those that moved or went
// away in between.
//
// # Retries
//
// Build the client with NewClient (the SDK's retries off). New wraps it in
// Retrying, which retries writes on throttling errors only, with bounded
// jittered backoff: a throttled request was not applied, so resending it
// is safe. A write's timeouts and 5xx are returned, because a conditional
// write may have been applied before the error and a blind resend would
// then fail its own condition — the caller re-reads and decides. Reads
// also retry transient failures (5xx, dropped connections, unreadable
// responses): they change nothing.
//
// # Not yet
//
// No DynamoDB TTL on heartbeat items (it would need the attribute enabled in
// Terraform); expired owners and bookies stay until removed, bounded by
// MaxOwners/MaxBookies.
package dynamodb
