package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sluicemq/sluice/pkg/catalog"
	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
)

// dynamoCatalog opens the DynamoDB catalog in table, with the endpoint and
// credentials from the AWS environment (AWS_ENDPOINT_URL, AWS_REGION, ...):
// what `sluice bookie`, `ingest`, `fetch` and `compactor` share. With
// createTable it also creates the table if it does not exist (ingest's
// --create-table, for development).
func dynamoCatalog(ctx context.Context, table string, createTable bool) (*catalog.Catalog, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS config for the catalog: %w", err)
	}
	client, opts := catdynamo.NewClient(awsCfg), catdynamo.Options{Table: table, Clock: catalog.ClockFunc(wallNow)}
	cat, err := catdynamo.New(client, opts)
	if err != nil {
		return nil, err
	}
	if createTable {
		if err := catdynamo.EnsureTable(ctx, client, opts); err != nil {
			return nil, fmt.Errorf("create catalog table %s: %w", table, err)
		}
	}
	return cat, nil
}
