#!/bin/sh
# Creates the AWS resources Sluice needs on a local AWS endpoint (moto or LocalStack). Idempotent.
#
# It runs in three places, always against the same names:
#   - LocalStack: mounted into /etc/localstack/init/ready.d, run once LocalStack is ready;
#   - compose's one-shot `aws-init` service (aws-cli image) against the moto container;
#   - the host: localstack/moto.sh runs it after moto starts (no aws-cli needed: curl fallback).
#
# Endpoint: $AWS_ENDPOINT_URL (default http://localhost:4566). Credentials are dummies unless set.
set -eu

ENDPOINT=${AWS_ENDPOINT_URL:-http://localhost:4566}
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_DEFAULT_REGION="${AWS_REGION:-${AWS_DEFAULT_REGION:-us-east-1}}"

# S3: the bucket that holds sealed log segments.
SEGMENTS_BUCKET=${SLUICE_SEGMENTS_BUCKET:-sluice-segments}

create_bucket() {
  if command -v aws >/dev/null 2>&1; then
    if ! aws --endpoint-url "$ENDPOINT" s3api head-bucket --bucket "$1" >/dev/null 2>&1; then
      aws --endpoint-url "$ENDPOINT" s3api create-bucket --bucket "$1" >/dev/null
    fi
  else
    # Plain REST call; moto and LocalStack accept it unsigned. 409 = the bucket exists already.
    code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "$ENDPOINT/$1")
    case $code in
      200 | 409) ;;
      *) echo "sluice init: creating bucket $1 on $ENDPOINT failed: HTTP $code" >&2; exit 1 ;;
    esac
  fi
  echo "sluice init: bucket $1 ready on $ENDPOINT"
}

create_bucket "$SEGMENTS_BUCKET"

# DynamoDB: the catalog table. Its definition is catalog-table.json beside this folder, which
# a Go test (pkg/catalog/dynamodb) keeps equal to the catalog's own TableDefinition and to the
# Terraform module, so the three never drift. Sluice can also create it at start-up (EnsureTable).
HERE=$(cd "$(dirname "$0")/.." && pwd)
TABLE_JSON=$HERE/catalog-table.json
CATALOG_TABLE=$(sed -n 's/.*"TableName": *"\([^"]*\)".*/\1/p' "$TABLE_JSON")

create_table() {
  if command -v aws >/dev/null 2>&1; then
    if ! aws --endpoint-url "$ENDPOINT" dynamodb describe-table --table-name "$CATALOG_TABLE" >/dev/null 2>&1; then
      aws --endpoint-url "$ENDPOINT" dynamodb create-table --cli-input-json "file://$TABLE_JSON" >/dev/null
    fi
  else
    # The JSON API by hand; emulators accept a syntactically valid, unverified signature.
    auth="AWS4-HMAC-SHA256 Credential=$AWS_ACCESS_KEY_ID/20260101/$AWS_DEFAULT_REGION/dynamodb/aws4_request, SignedHeaders=host, Signature=0"
    out=$(curl -s -w '\n%{http_code}' -X POST "$ENDPOINT/" \
      -H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: DynamoDB_20120810.CreateTable' \
      -H "Authorization: $auth" --data-binary "@$TABLE_JSON")
    code=$(printf '%s' "$out" | tail -n 1)
    case $code in
      200) ;;
      400) printf '%s' "$out" | grep -q ResourceInUseException || {
        echo "sluice init: creating table $CATALOG_TABLE on $ENDPOINT failed: $out" >&2; exit 1; } ;;
      *) echo "sluice init: creating table $CATALOG_TABLE on $ENDPOINT failed: HTTP $code" >&2; exit 1 ;;
    esac
  fi
  echo "sluice init: table $CATALOG_TABLE ready on $ENDPOINT"
}

create_table
