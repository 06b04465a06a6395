package record

import (
	"errors"
	"fmt"
)

// Limits bound every batch this package decodes or builds. A zero field means
// its default (see DefaultLimits, which matches the limits documented in
// proto/sluice/v1/record.proto); negative fields are invalid.
type Limits struct {
	// MaxBatchBytes bounds the encoded batch, header included. Default 4 MiB.
	MaxBatchBytes int
	// MaxRecords bounds the records in one batch. Default 10,000.
	MaxRecords int
	// MaxDecompressedBytes bounds the records section after decompression
	// (the decompression-bomb guard); uncompressed batches are held to it
	// too. Default 16 MiB.
	MaxDecompressedBytes int
	// MaxKeyBytes bounds a record key. Default 64 KiB.
	MaxKeyBytes int
	// MaxValueBytes bounds a record value. Default 1 MiB.
	MaxValueBytes int
	// MaxHeaders bounds the headers of one record. Default 64.
	MaxHeaders int
	// MaxHeaderKeyBytes bounds a header key. Default 256.
	MaxHeaderKeyBytes int
	// MaxHeaderValueBytes bounds a header value. Default 16 KiB.
	MaxHeaderValueBytes int
}

// Upper bounds on the Limits themselves: no configuration may ask this
// package to hold more than this in memory for one batch.
const (
	MaxMaxBatchBytes        = 256 << 20
	MaxMaxDecompressedBytes = 1 << 30
	maxMaxRecords           = 1 << 24
	maxMaxHeaders           = 1 << 16
)

// MaxLimits returns the widest Limits that Check accepts: for reading
// batches that were checked against their own limits when they were
// stored (a consumer of the batches a server sends), so that no batch the
// server holds is refused.
func MaxLimits() Limits {
	return Limits{
		MaxBatchBytes:        MaxMaxBatchBytes,
		MaxRecords:           maxMaxRecords,
		MaxDecompressedBytes: MaxMaxDecompressedBytes,
		MaxKeyBytes:          MaxMaxDecompressedBytes,
		MaxValueBytes:        MaxMaxDecompressedBytes,
		MaxHeaders:           maxMaxHeaders,
		MaxHeaderKeyBytes:    MaxMaxDecompressedBytes,
		MaxHeaderValueBytes:  MaxMaxDecompressedBytes,
	}
}

// DefaultLimits returns the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{
		MaxBatchBytes:        4 << 20,
		MaxRecords:           10_000,
		MaxDecompressedBytes: 16 << 20,
		MaxKeyBytes:          64 << 10,
		MaxValueBytes:        1 << 20,
		MaxHeaders:           64,
		MaxHeaderKeyBytes:    256,
		MaxHeaderValueBytes:  16 << 10,
	}
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&l.MaxBatchBytes, d.MaxBatchBytes)
	set(&l.MaxRecords, d.MaxRecords)
	set(&l.MaxDecompressedBytes, d.MaxDecompressedBytes)
	set(&l.MaxKeyBytes, d.MaxKeyBytes)
	set(&l.MaxValueBytes, d.MaxValueBytes)
	set(&l.MaxHeaders, d.MaxHeaders)
	set(&l.MaxHeaderKeyBytes, d.MaxHeaderKeyBytes)
	set(&l.MaxHeaderValueBytes, d.MaxHeaderValueBytes)
	return l
}

// Check reports every invalid field (after defaults are applied), joined.
func (l Limits) Check() error {
	l = l.WithDefaults()
	var errs []error
	check := func(name string, v, maxV int) {
		if v < 0 || v > maxV {
			errs = append(errs, fmt.Errorf("record limits: %s = %d, want 0 (default) or 1..%d", name, v, maxV))
		}
	}
	check("MaxBatchBytes", l.MaxBatchBytes, MaxMaxBatchBytes)
	check("MaxRecords", l.MaxRecords, maxMaxRecords)
	check("MaxDecompressedBytes", l.MaxDecompressedBytes, MaxMaxDecompressedBytes)
	check("MaxKeyBytes", l.MaxKeyBytes, MaxMaxDecompressedBytes)
	check("MaxValueBytes", l.MaxValueBytes, MaxMaxDecompressedBytes)
	check("MaxHeaders", l.MaxHeaders, maxMaxHeaders)
	check("MaxHeaderKeyBytes", l.MaxHeaderKeyBytes, MaxMaxDecompressedBytes)
	check("MaxHeaderValueBytes", l.MaxHeaderValueBytes, MaxMaxDecompressedBytes)
	if l.MaxBatchBytes > 0 && l.MaxBatchBytes < HeaderSize+minRecordSize {
		errs = append(errs, fmt.Errorf("record limits: MaxBatchBytes = %d cannot hold one record (%d)", l.MaxBatchBytes, HeaderSize+minRecordSize))
	}
	return errors.Join(errs...)
}
