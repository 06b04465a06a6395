package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// pkACLs is the partition key of the ACLs; an ACL's sort key is its
// identity, catalog.ACLKey (its six fields joined by 0x1f).
const pkACLs = "acls"

// batchWriteMax is the most items one BatchWriteItem takes.
const batchWriteMax = 25

func aclItem(a catalog.ACL) map[string]av {
	it := item(pkACLs, catalog.ACLKey(a))
	it["principal"] = s(a.Principal)
	it["rtype"] = s(string(a.ResourceType))
	it["ptype"] = s(string(a.PatternType))
	it["rname"] = s(a.ResourceName)
	it["op"] = s(string(a.Operation))
	it["perm"] = s(string(a.Permission))
	return it
}

// decodeACL reads an ACL item; one whose fields do not validate, or do not
// make its sort key, is corrupt.
func decodeACL(it map[string]av) (catalog.ACL, error) {
	r := read(it)
	a := catalog.ACL{Principal: r.str("principal"), ResourceType: catalog.ResourceType(r.str("rtype")), PatternType: catalog.PatternType(r.str("ptype")),
		ResourceName: r.str("rname"), Operation: catalog.Operation(r.str("op")), Permission: catalog.Permission(r.str("perm"))}
	sk := r.str(attrSK)
	if err := r.err(); err != nil {
		return catalog.ACL{}, err
	}
	err := catalog.ValidateACL(a)
	if err == nil && catalog.ACLKey(a) != sk {
		err = fmt.Errorf("its fields make the key %q", catalog.ACLKey(a))
	}
	if err != nil {
		return catalog.ACL{}, fmt.Errorf("%w: ACL item %q: %v", ErrCorrupt, sk, err)
	}
	return a, nil
}

// PutACLs implements catalog.ACLDriver: batches of puts (an ACL put twice
// is the same item).
func (c *store) PutACLs(ctx context.Context, acls []catalog.ACL) error {
	reqs := make([]types.WriteRequest, len(acls))
	for i, a := range acls {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: aclItem(a)}}
	}
	if err := c.batchWriteAll(ctx, reqs); err != nil {
		return fmt.Errorf("put ACLs: %w", err)
	}
	return nil
}

// RemoveACLs implements catalog.ACLDriver: batches of deletes.
func (c *store) RemoveACLs(ctx context.Context, acls []catalog.ACL) error {
	reqs := make([]types.WriteRequest, len(acls))
	for i, a := range acls {
		reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key(pkACLs, catalog.ACLKey(a))}}
	}
	if err := c.batchWriteAll(ctx, reqs); err != nil {
		return fmt.Errorf("remove ACLs: %w", err)
	}
	return nil
}

// batchWriteAll sends reqs in batches DynamoDB takes.
func (c *store) batchWriteAll(ctx context.Context, reqs []types.WriteRequest) error {
	for len(reqs) > 0 {
		n := min(len(reqs), batchWriteMax)
		if err := c.batchWrite(ctx, reqs[:n]); err != nil {
			return err
		}
		reqs = reqs[n:]
	}
	return nil
}

// AllACLs implements catalog.ACLDriver: one query of the ACL collection.
func (c *store) AllACLs(ctx context.Context) ([]catalog.ACL, error) {
	items, err := c.queryAll(ctx, pkACLs, catalog.MaxACLs+catalog.MaxACLsPerCall)
	if err != nil {
		return nil, fmt.Errorf("list ACLs: %w", err)
	}
	out := make([]catalog.ACL, 0, len(items))
	for _, it := range items {
		a, err := decodeACL(it)
		if err != nil {
			return nil, fmt.Errorf("list ACLs: %w", err)
		}
		out = append(out, a)
	}
	return out, nil
}
