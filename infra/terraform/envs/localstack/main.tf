# Sluice's AWS storage on a local AWS emulator: moto (`localstack/moto.sh up`, what CI uses) or
# LocalStack (`localstack/compose.yml`, for people with Docker). Both serve every AWS API
# on one endpoint, http://127.0.0.1:4566 by default, and accept any credentials.
#
#   terraform -chdir=infra/terraform/envs/localstack init
#   terraform -chdir=infra/terraform/envs/localstack apply
#
# State stays in a local file in this directory (no backend block): the emulator's state is
# throw-away, and moto keeps everything in memory, so after restarting moto delete
# terraform.tfstate* before the next apply.

terraform {
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}

provider "aws" {
  region = "us-east-1"

  # Emulators accept any keys; these are the conventional dummies.
  access_key = "test"
  secret_key = "test"

  # No real AWS behind the endpoint: skip the calls that would go to real STS/IMDS.
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true

  # Virtual-hosted bucket names (sluice-segments.127.0.0.1) do not resolve locally.
  s3_use_path_style = true

  endpoints {
    s3       = var.endpoint
    dynamodb = var.endpoint
    lambda   = var.endpoint
    iam      = var.endpoint
    sts      = var.endpoint
  }

  default_tags {
    tags = {
      project     = "sluice"
      environment = "localstack"
    }
  }
}

module "storage" {
  source = "../../modules/sluice-storage"

  bucket_name = var.bucket_name
  table_name  = var.table_name

  # Throw-away state: let `terraform destroy` remove everything, and skip features that
  # only matter for real data (and that emulators support unevenly).
  force_destroy          = true
  deletion_protection    = false
  point_in_time_recovery = false
}

# The bookkeeping on the local Cassandra (localstack/cassandra.sh): the module in its
# self-managed mode creates nothing and passes the hosts through — Keyspaces, ECS, EC2 and
# EventBridge schedules are what the emulators do not host (README: what runs where).
module "metadata" {
  source = "../../modules/sluice-metadata"

  cassandra_hosts = var.cassandra_hosts
}

output "endpoint" {
  description = "AWS endpoint the services should use (AWS_ENDPOINT_URL)."
  value       = var.endpoint
}

output "bucket_name" {
  description = "Segment bucket."
  value       = module.storage.bucket_name
}

output "table_name" {
  description = "Catalog table."
  value       = module.storage.table_name
}

output "objects_url" {
  description = "Object store URL of the segment bucket (--objects); add &endpoint=<endpoint>&use_path_style=true for the emulator."
  value       = module.storage.objects_url
}

output "cassandra_hosts" {
  description = "The bookkeeping's contact points (--cassandra)."
  value       = module.metadata.cassandra_hosts
}
