package checker

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// The exactly-once copy check (issue 24): workers copy topic A to topic B
// in transactions (`sluice copy --tag-transactions`); a read_committed
// reader of B must see every record of A exactly once, each key's records
// in A's order, every transaction whole or not at all, and nothing a
// fenced session wrote after its successor.

// CopyRecord is a record read back from A (Tag "") or from B (Tag: the
// writing transaction, "TRANSACTIONAL-ID:EPOCH:N").
type CopyRecord struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
	Tag       string
}

// Classes of copy anomalies.
const (
	// CopyLost: a record of A is not in B.
	CopyLost Kind = "copy-lost"
	// CopyDuplicate: a record of A is in B twice, written by one
	// transaction, or by transactions of different producers.
	CopyDuplicate Kind = "copy-duplicate"
	// CopyAbortedRead: a record of A is in B twice, written by two
	// transactions of one producer: the later re-did the earlier's work,
	// which it does only when the earlier aborted — so an aborted
	// transaction's records are visible.
	CopyAbortedRead Kind = "copy-aborted-read"
	// CopyTorn: some of a transaction's records are visible, not all.
	CopyTorn Kind = "copy-torn-transaction"
	// CopyZombie: a producer's records of an older epoch follow, in a
	// partition of B, records of a newer epoch of the same producer: a
	// fenced session wrote after its successor.
	CopyZombie Kind = "copy-zombie-write"
	// CopyOrder: a key's records are in B in another order than in A.
	CopyOrder Kind = "copy-order"
	// CopyUnknown: a record of B is no record of A, or carries no valid
	// transaction tag.
	CopyUnknown Kind = "copy-unknown"
)

// CopyKinds lists the classes in report order.
var CopyKinds = []Kind{CopyLost, CopyDuplicate, CopyAbortedRead, CopyTorn, CopyZombie, CopyOrder, CopyUnknown}

// CopyResult is the verdict of CheckCopy.
type CopyResult struct {
	Source, Copied int // records of A, records of B
	Transactions   int // distinct transaction tags in B
	Anomalies      map[Kind]int
	// Examples holds up to a few descriptions per class.
	Examples map[Kind][]string
}

// Failures is the number of anomalies of every class.
func (r CopyResult) Failures() int {
	n := 0
	for _, c := range r.Anomalies {
		n += c
	}
	return n
}

// maxCopyExamples bounds the examples kept per class.
const maxCopyExamples = 5

func (r *CopyResult) add(k Kind, format string, args ...any) {
	r.Anomalies[k]++
	if len(r.Examples[k]) < maxCopyExamples {
		r.Examples[k] = append(r.Examples[k], fmt.Sprintf(format, args...))
	}
}

// copyTag is a parsed transaction tag.
type copyTag struct {
	tid   string
	epoch int
	n     int
}

func parseCopyTag(s string) (copyTag, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return copyTag{}, false
	}
	j := strings.LastIndexByte(s[:i], ':')
	if j < 0 {
		return copyTag{}, false
	}
	epoch, err1 := strconv.Atoi(s[j+1 : i])
	n, err2 := strconv.Atoi(s[i+1:])
	if err1 != nil || err2 != nil || n < 1 || s[:j] == "" {
		return copyTag{}, false
	}
	return copyTag{tid: s[:j], epoch: epoch, n: n}, true
}

// CheckCopy judges B (read_committed, every partition to its end) against
// A. Values of A must be distinct (the harness writes unique ones). live
// are records a read_committed reader saw while the copy ran: each must be
// in B at its offset in the end — one that is not was read before its
// transaction ended and then aborted (an aborted read: the reader did not
// stop at the last stable offset, or showed an aborted transaction).
func CheckCopy(source, copied, live []CopyRecord) CopyResult {
	r := CopyResult{Source: len(source), Copied: len(copied), Anomalies: map[Kind]int{}, Examples: map[Kind][]string{}}
	type at struct {
		p int32
		o int64
	}
	final := make(map[at]CopyRecord, len(copied))
	for _, b := range copied {
		final[at{b.Partition, b.Offset}] = b
	}
	for _, l := range live {
		if b, ok := final[at{l.Partition, l.Offset}]; !ok || b.Value != l.Value || b.Tag != l.Tag {
			r.add(CopyAbortedRead, "%d/%d: %q (%s) was read while the copy ran, and is not in the final log: it never committed", l.Partition, l.Offset, l.Value, l.Tag)
		}
	}
	// A: each value's position in its key's sequence.
	type pos struct {
		key string
		idx int
	}
	inA := make(map[string]pos, len(source))
	perKey := map[string]int{}
	srcSorted := append([]CopyRecord(nil), source...)
	sort.Slice(srcSorted, func(i, j int) bool {
		a, b := srcSorted[i], srcSorted[j]
		return a.Partition < b.Partition || a.Partition == b.Partition && a.Offset < b.Offset
	})
	for _, s := range srcSorted {
		inA[s.Value] = pos{s.Key, perKey[s.Key]}
		perKey[s.Key]++
	}
	// B in (partition, offset) order.
	out := append([]CopyRecord(nil), copied...)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Partition < b.Partition || a.Partition == b.Partition && a.Offset < b.Offset
	})
	seen := map[string][]copyTag{} // value → the transactions that wrote it
	txnCount := map[copyTag]int{}
	lastIdx := map[string]int{}              // key → index in A of its last record seen in B
	newest := map[int32]map[string]copyTag{} // partition → producer → newest transaction seen
	for _, b := range out {
		tag, ok := parseCopyTag(b.Tag)
		p, known := inA[b.Value]
		if !ok || !known {
			r.add(CopyUnknown, "%d/%d: value %q tag %q is no record of the source, or no transaction", b.Partition, b.Offset, b.Value, b.Tag)
			continue
		}
		txnCount[tag]++
		seen[b.Value] = append(seen[b.Value], tag)
		if nw, ok := newest[b.Partition][tag.tid]; ok && tag.epoch < nw.epoch {
			r.add(CopyZombie, "%d/%d: %q written by %s epoch %d after epoch %d of the same producer", b.Partition, b.Offset, b.Value, tag.tid, tag.epoch, nw.epoch)
		} else {
			if newest[b.Partition] == nil {
				newest[b.Partition] = map[string]copyTag{}
			}
			newest[b.Partition][tag.tid] = tag
		}
		if len(seen[b.Value]) == 1 { // order of first copies only
			if last, ok := lastIdx[p.key]; ok && p.idx < last {
				r.add(CopyOrder, "%d/%d: key %q: record %d of the source after record %d", b.Partition, b.Offset, p.key, p.idx, last)
			}
			lastIdx[p.key] = max(lastIdx[p.key], p.idx)
		}
	}
	r.Transactions = len(txnCount)
	for tag, n := range txnCount {
		if n != tag.n {
			r.add(CopyTorn, "%s epoch %d: %d of its %d records visible", tag.tid, tag.epoch, n, tag.n)
		}
	}
	for _, s := range srcSorted {
		tags := seen[s.Value]
		switch {
		case len(tags) == 0:
			r.add(CopyLost, "%d/%d: %q (key %q) is not in the copy", s.Partition, s.Offset, s.Value, s.Key)
		case len(tags) > 1:
			aborted := false
			for _, t := range tags[1:] {
				if t.tid == tags[0].tid && t.epoch != tags[0].epoch {
					aborted = true
				}
			}
			if aborted {
				r.add(CopyAbortedRead, "%q copied by %s at epochs %s: one of them aborted", s.Value, tags[0].tid, epochs(tags))
			} else {
				r.add(CopyDuplicate, "%q copied %d times (%v)", s.Value, len(tags), tags)
			}
		}
	}
	return r
}

func epochs(tags []copyTag) string {
	s := make([]string, len(tags))
	for i, t := range tags {
		s[i] = strconv.Itoa(t.epoch)
	}
	return strings.Join(s, ",")
}

// Report writes a human-readable verdict.
func (r CopyResult) Report(w io.Writer) error {
	fmt.Fprintf(w, "source records %d, copied records %d, transactions %d\n", r.Source, r.Copied, r.Transactions)
	for _, k := range CopyKinds {
		fmt.Fprintf(w, "%-24s %d\n", k, r.Anomalies[k])
		for _, e := range r.Examples[k] {
			fmt.Fprintf(w, "    %s\n", e)
		}
	}
	if r.Failures() == 0 {
		_, err := fmt.Fprintln(w, "OK: every source record copied exactly once")
		return err
	}
	_, err := fmt.Fprintf(w, "FAIL: %d anomalies\n", r.Failures())
	return err
}
