# Sluice on real AWS.
#
# Today this environment holds the storage tier only (segment bucket + catalog table).
# The services — ingest, fetch and compactor on ECS, the compactor's scheduled Lambda
# function, bookies, and their IAM roles — will be added here as they land. Cassandra is
# provisioned separately (see modules/sluice-storage).
#
#   terraform -chdir=infra/terraform/envs/aws init
#   terraform -chdir=infra/terraform/envs/aws plan -var bucket_name=<globally-unique-name>

terraform {
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }

  # State backend. Without one, state is a local file — fine for a trial, wrong for a shared
  # environment. Uncomment and fill in (the state bucket is created outside this
  # configuration); pass values at init time with -backend-config if you prefer not to
  # commit them. `use_lockfile` needs Terraform >= 1.10; on older versions lock with a
  # DynamoDB table (`dynamodb_table = "..."`) instead.
  #
  # backend "s3" {
  #   bucket       = "my-terraform-state"
  #   key          = "sluice/aws/terraform.tfstate"
  #   region       = "us-east-1"
  #   encrypt      = true
  #   use_lockfile = true
  # }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = merge({
      project     = "sluice"
      environment = var.environment
    }, var.tags)
  }
}

module "storage" {
  source = "../../modules/sluice-storage"

  bucket_name = var.bucket_name
  table_name  = var.table_name

  # Module defaults are the production choices: public access blocked, SSE-S3, versioning
  # off, incomplete multipart uploads aborted after 1 day, point-in-time recovery and
  # deletion protection on.
}

output "bucket_name" {
  description = "Segment bucket."
  value       = module.storage.bucket_name
}

output "bucket_arn" {
  description = "Segment bucket ARN."
  value       = module.storage.bucket_arn
}

output "table_name" {
  description = "Catalog table."
  value       = module.storage.table_name
}

output "table_arn" {
  description = "Catalog table ARN."
  value       = module.storage.table_arn
}
