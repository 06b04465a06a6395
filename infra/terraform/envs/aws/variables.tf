variable "region" {
  description = "AWS region to deploy into."
  type        = string
  default     = "us-east-1"
}

variable "environment" {
  description = "Environment name, used in names and the default tags (e.g. staging, prod)."
  type        = string
  default     = "prod"
}

variable "tags" {
  description = "Extra tags for every resource (merged into the provider's default_tags)."
  type        = map(string)
  default     = {}
}

variable "bucket_name" {
  description = "Segment bucket name. S3 bucket names are global across all AWS accounts, so there is no default: choose one, e.g. sluice-segments-<account-id>-<region>."
  type        = string
}

variable "table_name" {
  description = "Catalog table name (unique per account and region)."
  type        = string
  default     = "sluice-catalog"
}

variable "vpc_id" {
  description = "VPC to run in."
  type        = string
}

variable "private_subnet_ids" {
  description = "Private subnets, one in each of three availability zones, with routes to DynamoDB, S3, ECR, CloudWatch Logs and Secrets Manager (NAT or VPC endpoints)."
  type        = list(string)
}

variable "client_cidr_blocks" {
  description = "CIDR blocks of the producers and consumers allowed to reach the load balancer."
  type        = list(string)
}

variable "image" {
  description = "Container image of the services (README: the image)."
  type        = string
}

variable "ingest" {
  description = "Size of the ingest service: cpu units, memory MiB, autoscaling min and max."
  type        = object({ cpu = number, memory = number, min = number, max = number })
  default     = { cpu = 1024, memory = 2048, min = 2, max = 6 }
}

variable "fetch" {
  description = "Size of the fetch service: cpu units, memory MiB, autoscaling min and max."
  type        = object({ cpu = number, memory = number, min = number, max = number })
  default     = { cpu = 1024, memory = 2048, min = 2, max = 6 }
}

variable "ingest_extra_args" {
  description = "More flags for sluice ingest."
  type        = list(string)
  default     = []
}

variable "fetch_extra_args" {
  description = "More flags for sluice fetch."
  type        = list(string)
  default     = []
}

variable "cassandra_hosts" {
  description = "Self-managed Cassandra contact points; empty (the default): Amazon Keyspaces."
  type        = list(string)
  default     = []
}

variable "keyspace_name" {
  description = "Bookkeeping keyspace."
  type        = string
  default     = "sluice"
}

variable "cassandra_tls_ca_file" {
  description = "CA bundle inside the image for TLS to Keyspaces."
  type        = string
  default     = "/etc/ssl/certs/ca-certificates.crt"
}

variable "cassandra_username" {
  description = "Cassandra user (Keyspaces: the service-specific credential's user name, README: Keyspaces credentials). Empty: none."
  type        = string
  default     = ""
}

variable "cassandra_password_secret_arn" {
  description = "Secrets Manager secret with the Cassandra password. Empty: none."
  type        = string
  default     = ""
}

variable "bookie_count" {
  description = "Number of bookies."
  type        = number
  default     = 4
}

variable "bookie_instance_type" {
  description = "Bookie instance type (must have NVMe instance storage)."
  type        = string
  default     = "i4i.xlarge"
}

variable "bookie_architecture" {
  description = "Bookie CPU architecture (x86_64 or arm64), matching the instance type and the binary."
  type        = string
  default     = "x86_64"
}

variable "sluice_binary_url" {
  description = "HTTPS URL of the sluice binary for the bookie instances."
  type        = string
}

variable "sluice_binary_sha256" {
  description = "SHA-256 (hex) of that binary."
  type        = string
}

variable "compactor_zip_path" {
  description = "Path of the compactor function's zip (README: the compactor function)."
  type        = string
}

variable "trigger_function_arns" {
  description = "ARNs of the Lambda functions the fetch service may invoke for triggers."
  type        = list(string)
  default     = []
}

variable "alarm_emails" {
  description = "E-mail addresses notified of alarms."
  type        = list(string)
  default     = []
}

variable "alert_rules_file" {
  description = "Prometheus alerting rules for the workspace, e.g. \"../../../observability/prometheus/sluice-alerts.yml\" (relative to envs/aws). null: none."
  type        = string
  default     = null
}
