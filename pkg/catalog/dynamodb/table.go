package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The table's key attributes. infra/terraform/modules/sluice-storage defines
// the same table; table_test.go fails if the two drift apart.
const (
	attrPK = "pk"
	attrSK = "sk"
)

// TableDefinition is the catalog table: one table, generic string keys
// (single-table design, see the package doc), on-demand capacity because
// the catalog's load is low and bursty (ownership moves, roll-overs).
func TableDefinition(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
	}
}

var tableNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// validateTableName applies DynamoDB's table-name rule up front, so a typo
// is a clear error at construction rather than on the first call.
func validateTableName(name string) error {
	if !tableNameRE.MatchString(name) {
		return fmt.Errorf("dynamodb catalog: table name %q: want 3..255 of [a-zA-Z0-9_.-]", name)
	}
	return nil
}

// tableReadyTimeout bounds how long EnsureTable waits for a new table.
const tableReadyTimeout = 2 * time.Minute

// EnsureTable creates the catalog table opts.Table if it does not exist and
// waits until it is ACTIVE; if it exists, it checks that its key schema is
// the catalog's. client and opts are New's (opts.Retry paces throttling
// retries). Deployments create the table with Terraform and call this only
// in development (the services' create-table flag); it never alters a
// table.
func EnsureTable(ctx context.Context, client API, opts Options) error {
	c, err := newStore(client, opts)
	if err != nil {
		return err
	}
	return c.ensureTable(ctx)
}

func (c *store) ensureTable(ctx context.Context) error {
	_, err := c.api.CreateTable(ctx, TableDefinition(c.table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		// An answer that could not be read (a connection closed under
		// the error's body, seen against the emulator) may hide "it
		// exists": a table that exists is what was asked for.
		if _, derr := c.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.table)}); derr != nil {
			return fmt.Errorf("create table %s: %w", c.table, err)
		}
	}
	w := dynamodb.NewTableExistsWaiter(c.api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 2*time.Second
	})
	out, err := w.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.table)}, tableReadyTimeout)
	if err != nil {
		return fmt.Errorf("wait for table %s: %w", c.table, err)
	}
	return checkKeySchema(out.Table)
}

// checkKeySchema refuses a table whose keys are not (pk S, sk S).
func checkKeySchema(t *types.TableDescription) error {
	want := TableDefinition(aws.ToString(t.TableName))
	keyEq := func(a, b types.KeySchemaElement) bool {
		return aws.ToString(a.AttributeName) == aws.ToString(b.AttributeName) && a.KeyType == b.KeyType
	}
	if !slices.EqualFunc(t.KeySchema, want.KeySchema, keyEq) {
		return fmt.Errorf("table %s has key schema %v, want pk (HASH), sk (RANGE)", aws.ToString(t.TableName), t.KeySchema)
	}
	for _, d := range want.AttributeDefinitions {
		if !slices.ContainsFunc(t.AttributeDefinitions, func(a types.AttributeDefinition) bool {
			return aws.ToString(a.AttributeName) == aws.ToString(d.AttributeName) && a.AttributeType == d.AttributeType
		}) {
			return fmt.Errorf("table %s: key attribute %s is not of type %s", aws.ToString(t.TableName), aws.ToString(d.AttributeName), d.AttributeType)
		}
	}
	return nil
}
