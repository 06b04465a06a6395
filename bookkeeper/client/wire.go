package client

import (
	"fmt"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// The RPC edge: bookie answers become state machine events here, and only
// here, following "Actions and events on the wire" in bookkeeper/ledger's
// package doc. connect codes are read nowhere else.

// addEvent maps one AddEntries answer: OK → AddAcked, FENCED →
// FailFenced, UNAUTHORIZED → FailUnauthorized, anything else (REJECTED,
// BAD_CHECKSUM, ERROR, unknown) → FailUnavailable.
func addEvent(bookie string, entry int64, st bookiev1.AddStatus) ledger.Event {
	switch st {
	case bookiev1.AddStatus_ADD_STATUS_OK:
		return ledger.AddAcked{Bookie: bookie, Entry: entry}
	case bookiev1.AddStatus_ADD_STATUS_FENCED:
		return ledger.AddFailed{Bookie: bookie, Entry: entry, Reason: ledger.FailFenced}
	case bookiev1.AddStatus_ADD_STATUS_UNAUTHORIZED:
		return ledger.AddFailed{Bookie: bookie, Entry: entry, Reason: ledger.FailUnauthorized}
	default:
		return ledger.AddFailed{Bookie: bookie, Entry: entry, Reason: ledger.FailUnavailable}
	}
}

// addMessage builds the add of a SendAdd for an AddEntries message, with
// its checksum (wire.EntryChecksum: the one the bookie verifies and
// stores).
func addMessage(ledgerID int64, a ledger.SendAdd) *bookiev1.Add {
	return &bookiev1.Add{
		EntryId: a.Entry, Lac: a.LAC, Payload: a.Payload,
		Crc32C: wire.EntryChecksum(ledgerID, a.Entry, a.LAC, a.Payload), Recovery: a.Recovery,
	}
}

// readAnswer is a single-entry ReadEntries answer as the machines take it,
// with the LACs it carried (bookie's and the entry's; -1 when none).
type readAnswer struct {
	ev       ledger.Event
	lac      int64
	checkErr error // the entry failed verification (ev is then ReadFailed)
}

// readEvent maps the answer to ReadEntries{entry, entry}: the entry,
// verified → ReadOK; NOT_FOUND → ReadNoEntry (the bookie proves it never
// had it); anything else — another error, an empty answer, another entry,
// a checksum mismatch — → ReadFailed, with checkErr set for a checksum
// mismatch, another entry, or DATA_LOSS (the bookie found it corrupt).
func readEvent(ledgerID int64, bookie string, entry int64, resp *bookiev1.ReadEntriesResponse, err error) readAnswer {
	failed := readAnswer{ev: ledger.ReadFailed{Bookie: bookie, Entry: entry}, lac: -1}
	if err != nil {
		switch connect.CodeOf(err) {
		case connect.CodeNotFound:
			return readAnswer{ev: ledger.ReadNoEntry{Bookie: bookie, Entry: entry}, lac: -1}
		case connect.CodeDataLoss:
			// The bookie's own verification failed: as bad a copy as one
			// whose checksum fails here.
			failed.checkErr = fmt.Errorf("%w: bookie %s reports entry %d/%d corrupt: %v", ErrChecksum, bookie, ledgerID, entry, err)
		}
		return failed
	}
	lac := resp.GetLac()
	ents := resp.GetEntries()
	if len(ents) == 0 {
		failed.lac = lac
		return failed
	}
	return entryAnswer(ledgerID, bookie, entry, ents[0], lac)
}

// entryAnswer maps one entry of a ReadEntries answer, expected to be entry
// (lac: the bookie's LAC in that answer): verified → ReadOK; another entry
// or a checksum mismatch → ReadFailed with checkErr.
func entryAnswer(ledgerID int64, bookie string, entry int64, e *bookiev1.Entry, lac int64) readAnswer {
	failed := readAnswer{ev: ledger.ReadFailed{Bookie: bookie, Entry: entry}, lac: lac}
	if e.GetEntryId() != entry {
		failed.checkErr = fmt.Errorf("%w: bookie %s answered entry %d/%d with entry %d", ErrChecksum, bookie, ledgerID, entry, e.GetEntryId())
		return failed
	}
	if got := wire.EntryChecksum(ledgerID, entry, e.GetLac(), e.GetPayload()); got != e.GetCrc32C() {
		failed.checkErr = fmt.Errorf("%w: bookie %s, entry %d/%d: stored %08x, computed %08x", ErrChecksum, bookie, ledgerID, entry, e.GetCrc32C(), got)
		return failed
	}
	return readAnswer{ev: ledger.ReadOK{Bookie: bookie, Entry: entry, Payload: e.GetPayload()}, lac: max(lac, e.GetLac())}
}

// unavailable reports whether an RPC error suggests the bookie is not at
// its address any more (so the cached address should be re-read).
func unavailable(err error) bool {
	return connect.CodeOf(err) == connect.CodeUnavailable
}
