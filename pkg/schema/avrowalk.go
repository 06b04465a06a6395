package schema

import (
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
)

// Validating an Avro datum walks the schema and the bytes together without
// building values: nothing is allocated per value, and the work is bounded
// by the payload, not by what the payload claims. (A decoder that trusts a
// block count loops that many times: 5 bytes can claim 2^31 array items,
// and hamba's generic reader then spins; the registry's fuzz target found
// it.) Bounds:
//
//   - a block of items that take at least one byte each may claim no
//     more items than bytes are left;
//   - every value costs one step, and a datum gets walkSteps(len) steps,
//     so items of zero bytes (null, an empty record) are bounded too;
//   - values nest at most maxAvroDepth deep (a recursive schema).

const (
	maxAvroDepth   = 256
	minAvroStepCap = 1 << 16
)

var (
	errAvroShort = errors.New("the payload ends inside a value")
	errAvroSteps = errors.New("more values than the payload can hold")
	errAvroDepth = fmt.Errorf("values nest more than %d deep", maxAvroDepth)
)

// avroWalker is one datum's walk.
type avroWalker struct {
	b     []byte
	pos   int
	steps int
}

func walkSteps(n int) int { return max(minAvroStepCap, 8*n) }

// validateAvro returns nil if b is exactly one datum of s.
func validateAvro(s avro.Schema, b []byte) error {
	w := &avroWalker{b: b, steps: walkSteps(len(b))}
	if err := w.value(s, 0); err != nil {
		return fmt.Errorf("%w: at byte %d: %v", ErrInvalidPayload, w.pos, err)
	}
	if w.pos != len(b) {
		return fmt.Errorf("%w: %d bytes left after the datum (%d bytes in all)", ErrInvalidPayload, len(b)-w.pos, len(b))
	}
	return nil
}

func (w *avroWalker) skip(n int64) error {
	if n < 0 || n > int64(len(w.b)-w.pos) {
		return errAvroShort
	}
	w.pos += int(n)
	return nil
}

// varint reads a zig-zag varint of at most maxBytes bytes (5: int, 10: long).
func (w *avroWalker) varint(maxBytes int) (int64, error) {
	var u uint64
	for i := range maxBytes {
		if w.pos >= len(w.b) {
			return 0, errAvroShort
		}
		c := w.b[w.pos]
		w.pos++
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, fmt.Errorf("a varint longer than %d bytes", maxBytes)
}

func (w *avroWalker) value(s avro.Schema, depth int) error {
	if w.steps--; w.steps < 0 {
		return errAvroSteps
	}
	if depth > maxAvroDepth {
		return errAvroDepth
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return w.value(s.Schema(), depth)
	case *avro.NullSchema:
		return nil
	case *avro.PrimitiveSchema:
		return w.primitive(s.Type())
	case *avro.RecordSchema:
		for _, f := range s.Fields() {
			if err := w.value(f.Type(), depth+1); err != nil {
				return fmt.Errorf("field %s: %w", f.Name(), err)
			}
		}
		return nil
	case *avro.EnumSchema:
		i, err := w.varint(5)
		if err == nil && (i < 0 || i >= int64(len(s.Symbols()))) {
			err = fmt.Errorf("enum %s has no symbol %d", s.FullName(), i)
		}
		return err
	case *avro.FixedSchema:
		return w.skip(int64(s.Size()))
	case *avro.UnionSchema:
		i, err := w.varint(10)
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(s.Types())) {
			return fmt.Errorf("union has no branch %d", i)
		}
		return w.value(s.Types()[i], depth+1)
	case *avro.ArraySchema:
		return w.blocks(depth, func() error { return w.value(s.Items(), depth+1) }, minBytes(s.Items()))
	case *avro.MapSchema:
		return w.blocks(depth, func() error {
			if err := w.primitive(avro.String); err != nil {
				return fmt.Errorf("map key: %w", err)
			}
			return w.value(s.Values(), depth+1)
		}, 1+minBytes(s.Values()))
	}
	return fmt.Errorf("schema type %s cannot be validated", s.Type())
}

func (w *avroWalker) primitive(t avro.Type) error {
	switch t {
	case avro.Null:
		return nil
	case avro.Boolean:
		if w.pos >= len(w.b) {
			return errAvroShort
		}
		if c := w.b[w.pos]; c > 1 {
			return fmt.Errorf("boolean byte %d", c)
		}
		w.pos++
		return nil
	case avro.Int:
		_, err := w.varint(5)
		return err
	case avro.Long:
		_, err := w.varint(10)
		return err
	case avro.Float:
		return w.skip(4)
	case avro.Double:
		return w.skip(8)
	case avro.String, avro.Bytes:
		n, err := w.varint(10)
		if err != nil {
			return err
		}
		if n < 0 {
			return fmt.Errorf("negative length %d", n)
		}
		return w.skip(n)
	}
	return fmt.Errorf("primitive type %s cannot be validated", t)
}

// blocks walks an array's or a map's blocks: a count (negative: its
// absolute value, then the block's byte size), that many items, until a
// count of 0. minItem is the fewest bytes one item takes.
func (w *avroWalker) blocks(depth int, item func() error, minItem int) error {
	for {
		n, err := w.varint(10)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			if n == -1<<63 {
				return fmt.Errorf("block count %d", n)
			}
			n = -n
			size, err := w.varint(10)
			if err != nil {
				return err
			}
			if size < 0 || size > int64(len(w.b)-w.pos) {
				return fmt.Errorf("block size %d with %d bytes left", size, len(w.b)-w.pos)
			}
		}
		if minItem > 0 && n > int64(len(w.b)-w.pos)/int64(minItem) {
			return fmt.Errorf("a block of %d items with %d bytes left", n, len(w.b)-w.pos)
		}
		if n > int64(w.steps) {
			return errAvroSteps
		}
		for range n {
			if err := item(); err != nil {
				return err
			}
		}
	}
}

// minBytes is the fewest bytes a value of s takes: 0 for null, an empty
// record or a fixed of size 0; a union, enum, array or map takes at least
// its one varint byte.
func minBytes(s avro.Schema) int {
	return minBytesDepth(s, 0)
}

func minBytesDepth(s avro.Schema, depth int) int {
	if depth > 8 {
		return 0 // deep or recursive: the step budget bounds it
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return minBytesDepth(s.Schema(), depth+1)
	case *avro.NullSchema:
		return 0
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Null:
			return 0
		case avro.Float:
			return 4
		case avro.Double:
			return 8
		}
		return 1
	case *avro.RecordSchema:
		n := 0
		for _, f := range s.Fields() {
			n += minBytesDepth(f.Type(), depth+1)
		}
		return n
	case *avro.FixedSchema:
		return s.Size()
	}
	return 1 // enum, union, array, map: at least one varint byte
}
