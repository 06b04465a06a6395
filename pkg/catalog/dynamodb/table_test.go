package dynamodb

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const terraformModule = "../../../infra/terraform/modules/sluice-storage/main.tf"

// TestTableDefinitionMatchesTerraform keeps TableDefinition and the
// sluice-storage Terraform module from drifting apart: same key names and
// types, same billing mode. It reads the HCL with regular expressions — the
// resource block is simple, and a full HCL parser is not worth a dependency.
func TestTableDefinitionMatchesTerraform(t *testing.T) {
	src, err := os.ReadFile(terraformModule)
	if err != nil {
		t.Fatalf("read the Terraform module: %v", err)
	}
	block := resourceBlock(t, string(src), "aws_dynamodb_table", "catalog")
	attr := func(name string) string {
		m := regexp.MustCompile(`(?m)^\s*` + name + `\s*=\s*"([^"]*)"`).FindStringSubmatch(block)
		if m == nil {
			t.Fatalf("the catalog table in %s has no %s", terraformModule, name)
		}
		return m[1]
	}
	def := TableDefinition("x")
	var wantHash, wantRange string
	for _, k := range def.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			wantHash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			wantRange = aws.ToString(k.AttributeName)
		}
	}
	if got := attr("hash_key"); got != wantHash {
		t.Errorf("Terraform hash_key = %q, Go = %q", got, wantHash)
	}
	if got := attr("range_key"); got != wantRange {
		t.Errorf("Terraform range_key = %q, Go = %q", got, wantRange)
	}
	if got := attr("billing_mode"); got != string(def.BillingMode) {
		t.Errorf("Terraform billing_mode = %q, Go = %q", got, def.BillingMode)
	}

	var tfAttrs, goAttrs []string
	for _, m := range regexp.MustCompile(`attribute\s*\{\s*name\s*=\s*"([^"]+)"\s*type\s*=\s*"([^"]+)"\s*\}`).FindAllStringSubmatch(block, -1) {
		tfAttrs = append(tfAttrs, m[1]+":"+m[2])
	}
	for _, a := range def.AttributeDefinitions {
		goAttrs = append(goAttrs, aws.ToString(a.AttributeName)+":"+string(a.AttributeType))
	}
	slices.Sort(tfAttrs)
	slices.Sort(goAttrs)
	if !slices.Equal(tfAttrs, goAttrs) {
		t.Errorf("attribute definitions: Terraform %v, Go %v", tfAttrs, goAttrs)
	}
	// Secondary indexes would need attribute definitions of their own; the
	// Go side has none, so Terraform must have none either.
	if regexp.MustCompile(`(global|local)_secondary_index`).MatchString(block) || len(def.GlobalSecondaryIndexes)+len(def.LocalSecondaryIndexes) > 0 {
		t.Errorf("secondary indexes differ between Terraform and Go")
	}
}

// resourceBlock returns the body of resource "typ" "name", matching braces.
func resourceBlock(t *testing.T, src, typ, name string) string {
	t.Helper()
	loc := regexp.MustCompile(`resource\s+"` + typ + `"\s+"` + name + `"\s*\{`).FindStringIndex(src)
	if loc == nil {
		t.Fatalf("no resource %q %q in %s", typ, name, terraformModule)
	}
	depth := 0
	for i := loc[1] - 1; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return src[loc[1]:i]
			}
		}
	}
	t.Fatalf("resource %q %q in %s is not closed", typ, name, terraformModule)
	return ""
}

func TestValidateTableName(t *testing.T) {
	for _, ok := range []string{"sluice-catalog", "abc", "a.b_c-1"} {
		if err := validateTableName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "ab", "has space", "a/b"} {
		if err := validateTableName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestTableDefinitionMatchesInitScript keeps the table the local init hook
// (localstack/init/ready.d) creates from localstack/init/catalog-table.json
// equal to TableDefinition: the JSON uses the DynamoDB API's field names,
// which are also the SDK input struct's, so it decodes straight into it.
func TestTableDefinitionMatchesInitScript(t *testing.T) {
	const path = "../../../localstack/init/catalog-table.json"
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the init script's table definition: %v", err)
	}
	var got dynamodb.CreateTableInput
	if err := json.Unmarshal(src, &got); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	want := TableDefinition(aws.ToString(got.TableName))
	if aws.ToString(got.TableName) != "sluice-catalog" {
		t.Errorf("%s: TableName = %q, want the default sluice-catalog", path, aws.ToString(got.TableName))
	}
	if got.BillingMode != want.BillingMode {
		t.Errorf("%s: BillingMode = %q, Go = %q", path, got.BillingMode, want.BillingMode)
	}
	if !reflect.DeepEqual(got.AttributeDefinitions, want.AttributeDefinitions) {
		t.Errorf("%s: AttributeDefinitions = %+v, Go = %+v", path, got.AttributeDefinitions, want.AttributeDefinitions)
	}
	if !reflect.DeepEqual(got.KeySchema, want.KeySchema) {
		t.Errorf("%s: KeySchema = %+v, Go = %+v", path, got.KeySchema, want.KeySchema)
	}
}

// flakyCreate answers CreateTable with an error that hides what happened
// (as the emulator's closed connection did) and DescribeTable as exists
// says.
type flakyCreate struct {
	API
	exists bool
}

func (f *flakyCreate) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return nil, errors.New("deserialization failed, failed to copy error response body: use of closed network connection")
}

func (f *flakyCreate) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if !f.exists {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no table")}
	}
	def := TableDefinition(aws.ToString(in.TableName))
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableName: in.TableName, TableStatus: types.TableStatusActive,
		KeySchema: def.KeySchema, AttributeDefinitions: def.AttributeDefinitions}}, nil
}

// A create whose answer cannot be read is fine when the table exists (a
// restarted ingest copy with --create-table failed so in CI), and the
// error when it does not.
func TestEnsureTableLooksWhenCreateIsUnclear(t *testing.T) {
	ctx := context.Background()
	if err := EnsureTable(ctx, &flakyCreate{exists: true}, Options{Table: "sluice-t"}); err != nil {
		t.Fatalf("the table exists: %v", err)
	}
	if err := EnsureTable(ctx, &flakyCreate{}, Options{Table: "sluice-t"}); err == nil || !strings.Contains(err.Error(), "closed network connection") {
		t.Fatalf("no table: %v; want the create's error", err)
	}
}
