package tfcheck

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
)

// TestCatalogTableMatchesCode holds the catalog table of sluice-storage
// against the table the DynamoDB catalog defines for itself
// (catdynamo.TableDefinition, which EnsureTable creates in development):
// billing mode, hash and range keys, attribute definitions, secondary
// indexes, and no TTL (the catalog writes no TTL attribute; its doc says
// so under "Not yet").
func TestCatalogTableMatchesCode(t *testing.T) {
	m := loadModule(t, modulesDir+"/sluice-storage")
	tf := m.one(t, "resource", "aws_dynamodb_table", "catalog")
	def := catdynamo.TableDefinition("x")

	if got := literal(t, tf, "billing_mode").AsString(); got != string(def.BillingMode) {
		t.Errorf("billing_mode: Terraform %q, code %q", got, def.BillingMode)
	}
	for _, k := range def.KeySchema {
		attr := map[types.KeyType]string{types.KeyTypeHash: "hash_key", types.KeyTypeRange: "range_key"}[k.KeyType]
		if got := literal(t, tf, attr).AsString(); got != aws.ToString(k.AttributeName) {
			t.Errorf("%s: Terraform %q, code %q", attr, got, aws.ToString(k.AttributeName))
		}
	}
	if len(def.KeySchema) == 1 {
		if _, ok := tf.Body.Attributes["range_key"]; ok {
			t.Errorf("Terraform has a range_key; the code's table has none")
		}
	}

	var tfAttrs, goAttrs []string
	for _, a := range nested(tf, "attribute") {
		tfAttrs = append(tfAttrs, literal(t, a, "name").AsString()+":"+literal(t, a, "type").AsString())
	}
	for _, a := range def.AttributeDefinitions {
		goAttrs = append(goAttrs, aws.ToString(a.AttributeName)+":"+string(a.AttributeType))
	}
	slices.Sort(tfAttrs)
	slices.Sort(goAttrs)
	if !slices.Equal(tfAttrs, goAttrs) {
		t.Errorf("attribute definitions: Terraform %v, code %v", tfAttrs, goAttrs)
	}

	var tfGSI, goGSI []string
	for _, g := range nested(tf, "global_secondary_index") {
		tfGSI = append(tfGSI, literal(t, g, "name").AsString())
	}
	for _, g := range def.GlobalSecondaryIndexes {
		goGSI = append(goGSI, aws.ToString(g.IndexName))
	}
	slices.Sort(tfGSI)
	slices.Sort(goGSI)
	if !slices.Equal(tfGSI, goGSI) {
		t.Errorf("global secondary indexes: Terraform %v, code %v", tfGSI, goGSI)
	}
	if n, want := len(nested(tf, "local_secondary_index")), len(def.LocalSecondaryIndexes); n != want {
		t.Errorf("local secondary indexes: Terraform %d, code %d", n, want)
	}

	// TableDefinition cannot say TTL (it is a separate UpdateTimeToLive call);
	// the catalog sets none, so an enabled ttl block would expire nothing at
	// best and items the catalog still needs at worst.
	for _, ttl := range nested(tf, "ttl") {
		if v, ok := ttl.Body.Attributes["enabled"]; ok {
			if val, diags := v.Expr.Value(nil); diags.HasErrors() || val.True() {
				t.Errorf("%s: the catalog table has TTL enabled; pkg/catalog/dynamodb writes no TTL attribute", ttl.DefRange())
			}
		}
	}
}
