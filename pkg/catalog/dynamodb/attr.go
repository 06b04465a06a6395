package dynamodb

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrCorrupt reports an item that is not what the catalog writes: a missing
// or mistyped attribute, an unknown format version, or a record that fails
// the catalog's validation. It is never papered over.
var ErrCorrupt = errors.New("dynamodb catalog: corrupt item")

type av = types.AttributeValue

func s(v string) av { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) av  { return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)} }
func b(v bool) av   { return &types.AttributeValueMemberBOOL{Value: v} }

func strMap(m map[string]string) av {
	out := make(map[string]av, len(m))
	for k, v := range m {
		out[k] = s(v)
	}
	return &types.AttributeValueMemberM{Value: out}
}

func strList(l []string) av {
	out := make([]av, len(l))
	for i, v := range l {
		out[i] = s(v)
	}
	return &types.AttributeValueMemberL{Value: out}
}

// reader decodes an item, remembering the first problem so decoding code
// reads straight through; err() reports it as ErrCorrupt.
type reader struct {
	item map[string]av
	bad  error
}

func (r *reader) fail(name, format string, args ...any) {
	if r.bad == nil {
		r.bad = fmt.Errorf("attribute %q: %s", name, fmt.Sprintf(format, args...))
	}
}

func (r *reader) err() error {
	if r.bad == nil {
		return nil
	}
	return fmt.Errorf("%w: item %s/%s: %v", ErrCorrupt, keyString(r.item, attrPK), keyString(r.item, attrSK), r.bad)
}

func keyString(item map[string]av, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return "?"
}

func (r *reader) str(name string) string {
	v, ok := r.item[name].(*types.AttributeValueMemberS)
	if !ok {
		r.fail(name, "want a string, have %T", r.item[name])
		return ""
	}
	return v.Value
}

// optStr reads an attribute that is absent when empty.
func (r *reader) optStr(name string) string {
	if _, ok := r.item[name]; !ok {
		return ""
	}
	return r.str(name)
}

func (r *reader) num(name string) int64 {
	return r.numOf(name, r.item[name])
}

func (r *reader) numOf(name string, a av) int64 {
	v, ok := a.(*types.AttributeValueMemberN)
	if !ok {
		r.fail(name, "want a number, have %T", a)
		return 0
	}
	i, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		r.fail(name, "%q is not an int64", v.Value)
	}
	return i
}

// optNum reads a number that is absent when 0.
func (r *reader) optNum(name string) int64 {
	if _, ok := r.item[name]; !ok {
		return 0
	}
	return r.num(name)
}

func (r *reader) boolean(name string) bool {
	v, ok := r.item[name].(*types.AttributeValueMemberBOOL)
	if !ok {
		r.fail(name, "want a bool, have %T", r.item[name])
	}
	return ok && v.Value
}

// optBool reads a bool that is absent when false.
func (r *reader) optBool(name string) bool {
	if _, ok := r.item[name]; !ok {
		return false
	}
	return r.boolean(name)
}

func (r *reader) list(name string, max int) []av {
	v, ok := r.item[name].(*types.AttributeValueMemberL)
	if !ok {
		r.fail(name, "want a list, have %T", r.item[name])
		return nil
	}
	if len(v.Value) > max {
		r.fail(name, "%d elements, more than %d", len(v.Value), max)
		return nil
	}
	return v.Value
}

func (r *reader) strMap(name string) map[string]string {
	v, ok := r.item[name].(*types.AttributeValueMemberM)
	if !ok {
		r.fail(name, "want a map, have %T", r.item[name])
		return nil
	}
	out := make(map[string]string, len(v.Value))
	for k, e := range v.Value {
		sv, ok := e.(*types.AttributeValueMemberS)
		if !ok {
			r.fail(name, "key %q: want a string, have %T", k, e)
			return nil
		}
		out[k] = sv.Value
	}
	return out
}

// sub returns a reader over a map element of a list attribute.
func (r *reader) sub(name string, a av) *reader {
	m, ok := a.(*types.AttributeValueMemberM)
	if !ok {
		r.fail(name, "element: want a map, have %T", a)
		return &reader{item: map[string]av{}, bad: r.bad}
	}
	return &reader{item: m.Value}
}

// adopt takes over a sub-reader's first problem.
func (r *reader) adopt(name string, sub *reader) {
	if sub.bad != nil {
		r.fail(name, "%v", sub.bad)
	}
}
