package apierr

import (
	"fmt"
	"strconv"

	"connectrpc.com/connect"
)

// Limit is one bound of the public API on what a request may carry: one row
// of the table in services/README.md ("Limits"). A request beyond a limit
// gets TooLarge's INVALID_ARGUMENT, worded from the row — never
// RESOURCE_EXHAUSTED, which tells clients to retry later (throttling) while
// the same request can never succeed.
//
// The values are not here: each service has them in its Config (with the
// topic's max.message.bytes from the catalog), and the message carries the
// one in force.
type Limit struct {
	// Key is the stable name clients may match on: the "limit" metadata of
	// the answer's google.rpc.ErrorInfo (reason ReasonLimitExceeded).
	Key string
	// Name is the limit as the message names it.
	Name string
	// Unit of the sizes: "bytes", "records", ...
	Unit string
	// Remedy says what the caller can do, including how the limit is
	// changed, or that it is fixed.
	Remedy string
}

// ReasonLimitExceeded is the google.rpc.ErrorInfo reason of TooLarge
// answers; the metadata holds "limit" (Limit.Key), "max" and, when known,
// "actual".
const ReasonLimitExceeded = "LIMIT_EXCEEDED"

// The limits of the public API (services/README.md, "Limits").
var (
	// RequestBytes bounds one request message after decompression
	// (internal/rpcserver, Config.MaxRequestBytes); every RPC.
	RequestBytes = Limit{"request_bytes", "the server's request size limit", "bytes",
		"send less per request, or raise the limit with the server's --max-request-bytes flag (sluice dev, ingest, fetch)"}

	// MaxMessageBytes bounds one record batch: the records of one Produce
	// for one partition, or one batch of Produce's batches. The topic
	// config max.message.bytes (default 1048588, Kafka's).
	MaxMessageBytes = Limit{"max.message.bytes", "the topic's max.message.bytes", "bytes",
		"send fewer or smaller records per request, or use a topic created with a larger max.message.bytes (sluice topic create NAME --config max.message.bytes=N)"}
	// ServerBatchBytes caps every topic's max.message.bytes (ingest
	// Config.Limits.MaxBatchBytes, 4 MiB).
	ServerBatchBytes = Limit{"batch_bytes", "the server's batch size limit", "bytes",
		"send fewer or smaller records per request (this server limit caps every topic's max.message.bytes)"}
	// DecompressedBatchBytes bounds a batch's records once decompressed
	// (ingest Config.Limits.MaxDecompressedBytes, 16 MiB).
	DecompressedBatchBytes = Limit{"decompressed_batch_bytes", "the server's decompressed batch size limit", "bytes",
		"send fewer or smaller records per batch (a server limit)"}
	// RecordsPerBatch bounds the records of one batch (ingest
	// Config.Limits.MaxRecords, 10,000).
	RecordsPerBatch = Limit{"records_per_batch", "the server's records-per-batch limit", "records",
		"send fewer records per batch (a server limit)"}
	// KeyBytes bounds a record key (ingest Config.Limits.MaxKeyBytes, 64 KiB).
	KeyBytes = Limit{"key_bytes", "the server's record key size limit", "bytes",
		"use a smaller key (a server limit)"}
	// ValueBytes bounds a record value (ingest Config.Limits.MaxValueBytes,
	// 1 MiB), whatever the topic's max.message.bytes.
	ValueBytes = Limit{"value_bytes", "the server's record value size limit", "bytes",
		"use a smaller value, e.g. store a large payload elsewhere and send its address (a server limit, whatever the topic's max.message.bytes)"}
	// HeadersPerRecord bounds a record's headers (ingest
	// Config.Limits.MaxHeaders, 64).
	HeadersPerRecord = Limit{"headers_per_record", "the server's headers-per-record limit", "headers",
		"send fewer headers per record (a server limit)"}
	// HeaderKeyBytes bounds a header key (ingest
	// Config.Limits.MaxHeaderKeyBytes, 256).
	HeaderKeyBytes = Limit{"header_key_bytes", "the server's header key size limit", "bytes",
		"use a shorter header key (a server limit)"}
	// HeaderValueBytes bounds a header value (ingest
	// Config.Limits.MaxHeaderValueBytes, 16 KiB).
	HeaderValueBytes = Limit{"header_value_bytes", "the server's header value size limit", "bytes",
		"use a smaller header value (a server limit)"}
	// RecordsPerRequest bounds the records of one Produce (ingest
	// Config.MaxRecords, 10,000).
	RecordsPerRequest = Limit{"records_per_request", "the server's records-per-request limit", "records",
		"send fewer records per request (a server limit)"}
	// BatchesPerRequest bounds the batches of one Produce (ingest
	// Config.MaxBatches, 1,000).
	BatchesPerRequest = Limit{"batches_per_request", "the server's batches-per-request limit", "batches",
		"send fewer batches per request (a server limit)"}
	// ClientIDBytes bounds the Sluice-Client-Id header (255).
	ClientIDBytes = Limit{"client_id_bytes", "the Sluice-Client-Id size limit", "bytes",
		"use a shorter client id (a server limit)"}

	// OffsetsPerCommit bounds the offsets of one Commit (fetch
	// MaxCommitOffsets, 10,000).
	OffsetsPerCommit = Limit{"offsets_per_commit", "the server's offsets-per-commit limit", "offsets",
		"commit fewer partitions per call (a server limit)"}
	// CommitMetadataBytes bounds the metadata stored with one offset
	// (bookkeeping MaxMetadataBytes).
	CommitMetadataBytes = Limit{"commit_metadata_bytes", "the server's commit metadata size limit", "bytes",
		"store less metadata with the offset (a server limit)"}
	// TopicsPerSession bounds the topics of one Subscribe (fetch
	// MaxTopicsPerSession, 100).
	TopicsPerSession = Limit{"topics_per_session", "the server's topics-per-session limit", "topics",
		"subscribe to fewer topics per session (a server limit)"}
	// ClientInfoBytes bounds Subscribe's client_info (fetch
	// MaxClientInfoBytes).
	ClientInfoBytes = Limit{"client_info_bytes", "the server's client_info size limit", "bytes",
		"send a shorter client_info (a server limit)"}
)

// TooLarge is the INVALID_ARGUMENT of a request beyond l: got against max,
// worded as
//
//	FIELD: GOT UNIT is over LIMIT NAME of MAX UNIT; REMEDY
//	FIELD: over LIMIT NAME of MAX UNIT; REMEDY   (got < 0: size unknown)
//
// with an ErrorInfo (ReasonLimitExceeded) saying which limit and the
// numbers.
func TooLarge(field string, l Limit, got, max int64) *connect.Error {
	size := fmt.Sprintf("%d %s is over", got, l.Unit)
	if got < 0 {
		size = "over"
	}
	ce := connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %s %s of %d %s; %s", field, size, l.Name, max, l.Unit, l.Remedy))
	md := map[string]string{"limit": l.Key, "max": strconv.FormatInt(max, 10)}
	if got >= 0 {
		md["actual"] = strconv.FormatInt(got, 10)
	}
	return WithReason(ce, ReasonLimitExceeded, md)
}
