package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"

	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
)

// dynamoCatalog opens the DynamoDB catalog in table, with the endpoint and
// credentials from the AWS environment (AWS_ENDPOINT_URL, AWS_REGION, ...):
// what `sluice bookie`, `ingest`, `fetch` and `compactor` share.
func dynamoCatalog(ctx context.Context, table string) (*catdynamo.Catalog, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS config for the catalog: %w", err)
	}
	return catdynamo.New(catdynamo.NewClient(awsCfg), catdynamo.Options{Table: table})
}
