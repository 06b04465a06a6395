package journal

import (
	"errors"
	"fmt"
)

var (
	errSeq      = errors.New("record sequence out of order")
	errSyncedTo = errors.New("record synced-to offset inconsistent with its groups")
	// errTerminator is not damage: the file's records end at a terminator.
	errTerminator = errors.New("group terminator")
)

// ReplayFunc receives one replayed record. rec is only valid during the call.
// An error stops recovery and makes Open fail with it.
type ReplayFunc func(seq uint64, rec []byte) error

// scanResult is what scanning one journal file found.
type scanResult struct {
	lastSeq  uint64 // last valid record's sequence number, or firstSeq-1 if none
	validEnd int64  // offset just past the last valid record
	bad      error  // why the record at validEnd does not decode; nil if the file ended there
}

// terminated reports whether the bytes at validEnd are a group terminator
// of a version 2 file, where a write of the journal ended (what follows, if
// anything, is stale or an unsynced write that never completed).
func (r scanResult) terminated() bool { return r.bad == errTerminator }

// scanFile reads every record of a file in order, calls deliver for each
// valid one, and stops at a group terminator (version 2 files) or at the
// first record that is not valid where it is:
// it must decode with a matching checksum, carry the next sequence number,
// and its synced-to must either repeat the previous record's (same group) or
// equal its own offset (first record of the next group; groups are
// contiguous and the first one starts right after the header).
//
// The returned error is an I/O error or deliver's error; damage is reported
// in scanResult.bad for the caller to judge (see recoverDir).
func scanFile(r *fileReader, h fileHeader, deliver func(seq uint64, rec []byte) error) (scanResult, error) {
	off := int64(FileHeaderSize)
	res := scanResult{lastSeq: h.firstSeq - 1, validEnd: off}
	prevSynced := uint64(FileHeaderSize)
	for off < r.size {
		b, err := r.at(off, RecordHeaderSize)
		if err != nil {
			return res, err
		}
		rh, err := peekRecordHeader(b)
		if err != nil {
			res.bad = err
			return res, nil
		}
		if h.version >= 2 && isTerminator(b) {
			res.bad = errTerminator
			return res, nil
		}
		if b, err = r.at(off, RecordHeaderSize+int(rh.length)); err != nil {
			return res, err
		}
		rh, payload, n, err := decodeRecord(b, h.seed())
		switch {
		case err != nil:
		case rh.seq != res.lastSeq+1:
			err = fmt.Errorf("%w: seq %d, want %d", errSeq, rh.seq, res.lastSeq+1)
		case rh.syncedTo != prevSynced && rh.syncedTo != uint64(off):
			err = fmt.Errorf("%w: %d at offset %d after a record synced to %d", errSyncedTo, rh.syncedTo, off, prevSynced)
		}
		if err != nil {
			res.bad = err
			return res, nil
		}
		if err := deliver(rh.seq, payload); err != nil {
			return res, err
		}
		prevSynced = rh.syncedTo
		res.lastSeq = rh.seq
		off += int64(n)
		res.validEnd = off
	}
	return res, nil
}

// provesSyncedBefore reports whether the region at offset x (where a record
// failed to decode, and seq expect was due) had been fsynced before some
// later data was written: that is the case when a record after x decodes
// with a valid checksum, a sequence number of at least expect (so it was
// written after x by this journal, not stale bytes) and a synced-to offset
// beyond x. Such a record was only written once the fsync covering x had
// returned, so the bad bytes at x are corruption, not a torn write.
//
// It tries every byte offset, since the damage may have destroyed the
// framing; cheap header checks come before any checksum.
func provesSyncedBefore(r *fileReader, h fileHeader, x int64, expect uint64) (bool, error) {
	p := x + 1
	for p+RecordHeaderSize <= r.size {
		wOff := p
		w, err := r.at(wOff, readWindow)
		if err != nil {
			return false, err
		}
		// Try each position whose header lies wholly inside the window.
		for ; p+RecordHeaderSize <= wOff+int64(len(w)); p++ {
			rh, err := peekRecordHeader(w[p-wOff:])
			if err != nil || rh.seq < expect || rh.syncedTo <= uint64(x) || rh.syncedTo > uint64(p) ||
				p+RecordHeaderSize+int64(rh.length) > r.size {
				continue
			}
			b, err := r.at(p, RecordHeaderSize+int(rh.length))
			if err != nil {
				return false, err
			}
			if _, _, _, err := decodeRecord(b, h.seed()); err == nil {
				return true, nil
			}
			// r.at moved the window: go on from the next offset with a fresh one.
			p++
			break
		}
	}
	return false, nil
}
