# Sluice on real AWS: every module of ../../modules, wired together.
#
#   storage        S3 segment bucket, DynamoDB catalog table
#   metadata       Amazon Keyspaces keyspace and tables (or a self-managed Cassandra)
#   bookies        EC2 Auto Scaling group on NVMe instance storage, one bookie per instance
#   services       ingest and fetch on ECS Fargate behind a Network Load Balancer
#   compactor      the compactor as a scheduled Lambda function
#   triggers       the fetch role's permission to invoke the triggers' functions
#   observability  CloudWatch alarms, an SNS topic, a Prometheus workspace
#
# The network (VPC, private subnets in three zones, NAT or VPC endpoints for DynamoDB,
# S3, ECR, CloudWatch Logs and Secrets Manager) is an input: most accounts already have
# one. README.md walks through a deployment.
#
#   terraform -chdir=infra/terraform/envs/aws init
#   terraform -chdir=infra/terraform/envs/aws plan -var-file=prod.tfvars

terraform {
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.40"
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

locals {
  name = "sluice-${var.environment}"
}

module "storage" {
  source = "../../modules/sluice-storage"

  bucket_name = var.bucket_name
  table_name  = var.table_name

  # Module defaults are the production choices: public access blocked, SSE-S3, versioning
  # off, incomplete multipart uploads aborted after 1 day, point-in-time recovery and
  # deletion protection on.
}

module "metadata" {
  source = "../../modules/sluice-metadata"

  name_prefix = local.name
  # Empty: Amazon Keyspaces. Hosts: a self-managed Cassandra 4.1+, nothing created.
  cassandra_hosts = var.cassandra_hosts
  keyspace_name   = var.keyspace_name
}

module "services" {
  source = "../../modules/sluice-services"

  name_prefix        = local.name
  image              = var.image
  vpc_id             = var.vpc_id
  subnet_ids         = var.private_subnet_ids
  client_cidr_blocks = var.client_cidr_blocks

  # h2c inside the VPC (internal load balancer, security groups). Turn off only with TLS
  # and authentication flags in *_extra_args (DESIGN.md 2.12).
  insecure          = true
  ingest_extra_args = var.ingest_extra_args
  fetch_extra_args  = var.fetch_extra_args
  ingest            = var.ingest
  fetch             = var.fetch

  catalog_table_name = module.storage.table_name
  catalog_table_arn  = module.storage.table_arn
  bucket_arn         = module.storage.bucket_arn
  objects_url        = module.storage.objects_url

  cassandra_hosts               = module.metadata.cassandra_hosts
  keyspace                      = module.metadata.keyspace_name
  cassandra_tls_ca_file         = module.metadata.keyspaces ? var.cassandra_tls_ca_file : ""
  cassandra_username            = var.cassandra_username
  cassandra_password_secret_arn = var.cassandra_password_secret_arn
}

module "bookies" {
  source = "../../modules/sluice-bookies"

  name_prefix          = local.name
  vpc_id               = var.vpc_id
  subnet_ids           = var.private_subnet_ids
  bookie_count         = var.bookie_count
  instance_type        = var.bookie_instance_type
  architecture         = var.bookie_architecture
  sluice_binary_url    = var.sluice_binary_url
  sluice_binary_sha256 = var.sluice_binary_sha256
  catalog_table_name   = module.storage.table_name
  catalog_table_arn    = module.storage.table_arn
  insecure             = true

  client_security_group_ids = [
    module.services.task_security_group_id,
    module.compactor.security_group_id,
  ]
}

module "compactor" {
  source = "../../modules/sluice-compactor"

  name_prefix        = local.name
  function_name      = "${local.name}-compactor"
  zip_path           = var.compactor_zip_path
  vpc_id             = var.vpc_id
  subnet_ids         = var.private_subnet_ids
  catalog_table_name = module.storage.table_name
  catalog_table_arn  = module.storage.table_arn
  objects_url        = module.storage.objects_url
  bucket_arn         = module.storage.bucket_arn
}

module "triggers" {
  source = "../../modules/sluice-triggers"

  name_prefix     = local.name
  fetch_role_name = module.services.task_role_names["fetch"]
  function_arns   = var.trigger_function_arns
}

module "observability" {
  source = "../../modules/sluice-observability"

  name_prefix                   = local.name
  alarm_emails                  = var.alarm_emails
  bookie_autoscaling_group_name = module.bookies.autoscaling_group_name
  bookie_count                  = module.bookies.bookie_count
  bookie_port                   = module.bookies.port
  lb_arn_suffix                 = module.services.lb_arn_suffix
  target_group_arn_suffixes     = module.services.target_group_arn_suffixes
  ecs_cluster_name              = module.services.cluster_name
  service_names                 = module.services.service_names
  discovery_names               = module.services.discovery_names
  service_ports                 = module.services.ports
  compactor_function_name       = module.compactor.function_name
  catalog_table_name            = module.storage.table_name
  alert_rules_file              = var.alert_rules_file
}
