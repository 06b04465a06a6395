# sluice-storage: the AWS storage Sluice's stateless services depend on (DESIGN.md 2, 2.5, 2.9).
#
#   - an S3 bucket for segment objects: sealed ledgers that the compactor moves out of the
#     bookies, read back by fetch with ranged GETs;
#   - a DynamoDB table for the catalog: topics, partitions and their ledger lists, writer
#     leases, ledger metadata, bookie registry, schemas and triggers.
#
# Not here, on purpose:
#   - Cassandra (consumer offsets, consumer leases, group membership, producer ids) is
#     provisioned separately — Amazon Keyspaces or a self-managed cluster — and is out of
#     scope of this module for now. Its schema is applied by the services themselves (the
#     .cql migrations embedded in the binary, DESIGN.md 2.5).
#   - Bookies, the services and the compactor Lambda function: added by the environments as
#     those components land.

locals {
  # Lifecycle rules are built from optional inputs; the configuration resource exists only
  # when at least one rule does (S3 rejects an empty lifecycle configuration).
  abort_multipart_days = var.abort_incomplete_multipart_upload_days == null ? [] : [var.abort_incomplete_multipart_upload_days]
  noncurrent_days      = var.versioning_enabled && var.noncurrent_version_expiration_days != null ? [var.noncurrent_version_expiration_days] : []
  lifecycle_enabled    = length(local.abort_multipart_days) + length(local.noncurrent_days) > 0
}

# ---------------------------------------------------------------------------------------
# S3: segment objects
# ---------------------------------------------------------------------------------------

resource "aws_s3_bucket" "segments" {
  bucket        = var.bucket_name
  force_destroy = var.force_destroy
  tags          = var.tags
}

# Segments are private to the services: block every form of public access.
resource "aws_s3_bucket_public_access_block" "segments" {
  bucket = aws_s3_bucket.segments.id

  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# Encrypt at rest with S3-managed keys (SSE-S3). Switching to SSE-KMS later is a change
# here plus kms:Decrypt/GenerateDataKey for the services' roles.
resource "aws_s3_bucket_server_side_encryption_configuration" "segments" {
  bucket = aws_s3_bucket.segments.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

# Versioning is off unless asked for. The resource exists only when it is on: a bucket
# that was never versioned needs no configuration, and removing this resource after
# turning versioning on suspends it (S3 cannot return a bucket to "never versioned").
resource "aws_s3_bucket_versioning" "segments" {
  count  = var.versioning_enabled ? 1 : 0
  bucket = aws_s3_bucket.segments.id

  versioning_configuration {
    status = "Enabled"
  }
}

# Housekeeping only. Current segment objects are never expired by S3: retention is the
# compactor's job (DESIGN.md 2.9), which deletes an object only after the catalog stops
# pointing at it — an S3 expiry rule could remove data the catalog still references.
resource "aws_s3_bucket_lifecycle_configuration" "segments" {
  count  = local.lifecycle_enabled ? 1 : 0
  bucket = aws_s3_bucket.segments.id

  # Multipart uploads abandoned by a crashed compactor are invisible but billed.
  dynamic "rule" {
    for_each = local.abort_multipart_days
    content {
      id     = "abort-incomplete-multipart-uploads"
      status = "Enabled"

      filter {}

      abort_incomplete_multipart_upload {
        days_after_initiation = rule.value
      }
    }
  }

  # With versioning on, a deleted segment leaves a noncurrent version behind.
  dynamic "rule" {
    for_each = local.noncurrent_days
    content {
      id     = "expire-noncurrent-versions"
      status = "Enabled"

      filter {}

      noncurrent_version_expiration {
        noncurrent_days = rule.value
      }
    }
  }

  # Lifecycle rules that touch versions must be applied after versioning is set.
  depends_on = [aws_s3_bucket_versioning.segments]
}

# ---------------------------------------------------------------------------------------
# DynamoDB: the catalog
# ---------------------------------------------------------------------------------------

# The catalog uses a single-table layout: every aggregate (topic, partition, ledger,
# writer lease, bookie, schema, trigger) is an item under a generic partition key `pk` and
# sort key `sk`. The item shapes — key prefixes, attributes, and the conditional writes
# and TransactWriteItems that change them — are defined by the Go catalog package
# (pkg/catalog/dynamodb), not here. If that package needs a secondary index or a TTL
# attribute, it is added to this resource in the same change.
#
# The catalog is off the per-batch path (touched at lease moves and ledger roll-overs,
# DESIGN.md 2.3), so on-demand capacity fits its low, bursty load.
# Encryption at rest is always on in DynamoDB (AWS-owned key by default).
resource "aws_dynamodb_table" "catalog" {
  name                        = var.table_name
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = var.deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }

  attribute {
    name = "sk"
    type = "S"
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  tags = var.tags
}
