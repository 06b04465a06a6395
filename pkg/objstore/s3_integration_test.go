//go:build integration

package objstore_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/pkg/objstore/objstoretest"
)

func TestIntegrationConformanceS3(t *testing.T) {
	ctx := context.Background()
	endpoint := testenv.AWSEndpoint(t)
	cfg := testenv.AWSConfig(t, endpoint)
	bucket := fmt.Sprintf("sluice-objstore-%d", time.Now().UnixNano())
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	q := url.Values{"endpoint": {endpoint}, "region": {cfg.Region}, "use_path_style": {"true"}}
	b, err := objstore.Open(ctx, "s3://"+bucket+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	objstoretest.Run(t, b)
}
