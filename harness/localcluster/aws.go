package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// awsConfig is the SDK's default chain pointed at cfg's endpoint.
func awsConfig(ctx context.Context, cfg Config) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithRegion(cfg.Region)}
	if cfg.AWSEndpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(cfg.AWSEndpoint))
	}
	return config.LoadDefaultConfig(ctx, opts...)
}

// ensureBucket creates the bucket the compactor offloads to, if it does
// not exist (Terraform's sluice-storage module does it in a deployment).
func ensureBucket(ctx context.Context, cfg Config) error {
	if cfg.Compactors == 0 && cfg.Fetches == 0 {
		return nil
	}
	ac, err := awsConfig(ctx, cfg)
	if err != nil {
		return err
	}
	c := s3.NewFromConfig(ac, func(o *s3.Options) { o.UsePathStyle = true })
	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(cfg.Bucket)})
	var owned *s3types.BucketAlreadyOwnedByYou
	var exists *s3types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("create bucket %s at %s: %w", cfg.Bucket, cfg.AWSEndpoint, err)
	}
	return nil
}

// Wipe stops the cluster recorded in dir and removes what it stored: the
// catalog table, the keyspace, the bookies' data, the logs and the state.
// (Objects the compactor wrote stay in the bucket; their keys are unique
// to the topics that are gone.)
func Wipe(ctx context.Context, dir string, grace time.Duration) error {
	st, err := LoadState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := Down(dir, grace, nil); err != nil {
		return err
	}
	cfg := st.Config
	var errs []error
	if ac, err := awsConfig(ctx, cfg); err != nil {
		errs = append(errs, err)
	} else {
		_, err := dynamodb.NewFromConfig(ac).DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(cfg.Table)})
		var missing *ddbtypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &missing) {
			errs = append(errs, fmt.Errorf("delete catalog table %s: %w", cfg.Table, err))
		}
	}
	if err := dropKeyspace(cfg); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // keep the state: the next Wipe tries again
	}
	for _, p := range []string{"data", "log"} {
		if err := os.RemoveAll(dir + "/" + p); err != nil {
			return err
		}
	}
	return os.Remove(statePath(dir))
}

func dropKeyspace(cfg Config) error {
	cl := gocql.NewCluster(cfg.Cassandra)
	cl.Timeout, cl.ConnectTimeout = 30*time.Second, 20*time.Second
	s, err := cl.CreateSession()
	if err != nil {
		return fmt.Errorf("drop keyspace %s: %w", cfg.Keyspace, err)
	}
	defer s.Close()
	if err := s.Query("DROP KEYSPACE IF EXISTS " + cfg.Keyspace).Exec(); err != nil {
		return fmt.Errorf("drop keyspace %s: %w", cfg.Keyspace, err)
	}
	return nil
}
