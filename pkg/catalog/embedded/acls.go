package embedded

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// aclPrefix starts the keys of ACLs: acl/<catalog.ACLKey>, the ACL's six
// fields joined by 0x1f, which none of them may hold ('/' may: the keys
// are only ever scanned by this prefix).
var aclPrefix = []byte("acl/")

func aclKey(a catalog.ACL) []byte { return cat(aclPrefix, []byte(catalog.ACLKey(a))) }

// aclRec is an ACL (key acl/...). Added to value version 1 without a new
// version: it is a new key space, which older binaries never read.
type aclRec struct {
	Principal    string `json:"principal"`
	ResourceType string `json:"resourceType"`
	PatternType  string `json:"patternType"`
	ResourceName string `json:"resourceName"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func (r aclRec) acl() catalog.ACL {
	return catalog.ACL{Principal: r.Principal, ResourceType: catalog.ResourceType(r.ResourceType), PatternType: catalog.PatternType(r.PatternType),
		ResourceName: r.ResourceName, Operation: catalog.Operation(r.Operation), Permission: catalog.Permission(r.Permission)}
}

func toACLRec(a catalog.ACL) aclRec {
	return aclRec{Principal: a.Principal, ResourceType: string(a.ResourceType), PatternType: string(a.PatternType),
		ResourceName: a.ResourceName, Operation: string(a.Operation), Permission: string(a.Permission)}
}

// PutACLs implements catalog.ACLDriver: one batch.
func (c *store) PutACLs(_ context.Context, acls []catalog.ACL) error {
	err := c.write(func() error {
		b := c.db.NewBatch()
		for _, a := range acls {
			set(b, aclKey(a), toACLRec(a))
		}
		return c.commit(b)
	})
	if err != nil {
		return fmt.Errorf("put ACLs: %w", err)
	}
	return nil
}

// RemoveACLs implements catalog.ACLDriver: one batch.
func (c *store) RemoveACLs(_ context.Context, acls []catalog.ACL) error {
	err := c.write(func() error {
		b := c.db.NewBatch()
		for _, a := range acls {
			_ = b.Delete(aclKey(a), nil)
		}
		return c.commit(b)
	})
	if err != nil {
		return fmt.Errorf("remove ACLs: %w", err)
	}
	return nil
}

// AllACLs implements catalog.ACLDriver. A record whose key does not
// match its fields, or whose fields do not validate, is corruption.
func (c *store) AllACLs(_ context.Context) ([]catalog.ACL, error) {
	var out []catalog.ACL
	err := c.read(func() error {
		return c.scanRegistry(aclPrefix, catalog.MaxACLs+catalog.MaxACLsPerCall, func(k, v []byte) error {
			var r aclRec
			if err := decodeValue(k, v, &r); err != nil {
				return err
			}
			a := r.acl()
			if err := catalog.ValidateACL(a); err != nil {
				return corrupt(k, err)
			}
			if string(aclKey(a)) != string(k) {
				return corrupt(k, fmt.Errorf("the record is ACL %q", catalog.ACLKey(a)))
			}
			out = append(out, a)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list ACLs: %w", err)
	}
	return out, nil
}
