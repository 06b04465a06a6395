package partition

// AckedEnd is the partition's end as readers may see it, its high
// watermark as this writer knows it: the offset after the last record
// stored for good, either acknowledged on an ack quorum or in a ledger
// sealed before the one being written. It only rises, and it is never
// beyond what a reader can read. NextOffset, by contrast, counts batches
// accepted and not yet acknowledged, and moves back when a failed ledger's
// recovery ends it before them.
//
// (Kept out of writer.go while the writer is rewritten: it reads two
// fields, the dedup state's committed end, which settled and the ledger
// replacement raise, and ledgerFirst, which covers what Open recovered.)
func (w *Writer) AckedEnd() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(w.producers.CommittedEnd(), w.ledgerFirst)
}
