# Inputs of the sluice-services module.

variable "name_prefix" {
  description = "Prefix of every name this module creates (cluster, load balancer, roles, log groups)."
  type        = string
  default     = "sluice"
}

variable "image" {
  description = "Container image holding the sluice binary, /bin/sh and hostname, and CA certificates (README: the image). E.g. <account>.dkr.ecr.<region>.amazonaws.com/sluice:<version>."
  type        = string
}

variable "sluice_path" {
  description = "Path of the sluice binary inside the image."
  type        = string
  default     = "/usr/local/bin/sluice"
}

variable "cpu_architecture" {
  description = "CPU architecture of the tasks and of the image: X86_64 or ARM64."
  type        = string
  default     = "ARM64"

  validation {
    condition     = contains(["X86_64", "ARM64"], var.cpu_architecture)
    error_message = "cpu_architecture must be X86_64 or ARM64."
  }
}

variable "vpc_id" {
  description = "VPC of the tasks, the load balancer and the bookies."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets of the tasks, one per availability zone (at least two)."
  type        = list(string)
}

variable "lb_subnet_ids" {
  description = "Subnets of the load balancer; null: subnet_ids. Public subnets only with internal = false."
  type        = list(string)
  default     = null
}

variable "internal" {
  description = "Make the Network Load Balancer internal (reachable from the VPC and what is peered or routed to it). The ports are h2c without TLS unless TLS flags are added; keep this true unless they are."
  type        = bool
  default     = true
}

variable "client_cidr_blocks" {
  description = "IPv4 CIDR blocks of the clients (producers, consumers, the CLI) allowed to reach the load balancer's two ports."
  type        = list(string)
}

variable "metrics_security_group_ids" {
  description = "Security groups (e.g. a Prometheus scraper's) allowed to reach the tasks' ports directly, for /metrics."
  type        = list(string)
  default     = []
}

variable "ingest_port" {
  description = "Port of ingest (ProducerService and the topic admin API; h2c): the task's --addr port and the load balancer's listener."
  type        = number
  default     = 7421
}

variable "fetch_port" {
  description = "Port of fetch (ConsumerService and the group admin API; h2c): the task's --addr port and the load balancer's listener."
  type        = number
  default     = 7422
}

variable "ingest" {
  description = "Size of the ingest service: Fargate cpu units and memory (MiB) per task, and the autoscaling bounds (min is also the initial count)."
  type        = object({ cpu = number, memory = number, min = number, max = number })
  default     = { cpu = 1024, memory = 2048, min = 2, max = 6 }
}

variable "fetch" {
  description = "Size of the fetch service: Fargate cpu units and memory (MiB) per task (its entry cache is --cache-mib, 64 by default), and the autoscaling bounds (min is also the initial count)."
  type        = object({ cpu = number, memory = number, min = number, max = number })
  default     = { cpu = 1024, memory = 2048, min = 2, max = 6 }
}

variable "cpu_target_percent" {
  description = "Average CPU utilization the autoscaling keeps each service at."
  type        = number
  default     = 60
}

variable "insecure" {
  description = "Pass --insecure: serve h2c on the task address without TLS and authentication. The services refuse a non-loopback address otherwise; set false only with TLS and --auth required flags in ingest_extra_args/fetch_extra_args (and the certificate files in the image)."
  type        = bool
}

variable "ingest_extra_args" {
  description = "More flags for sluice ingest (sluice ingest --help), e.g. [\"--auth\", \"required\", \"--auth-jwks\", \"https://...\"]."
  type        = list(string)
  default     = []
}

variable "fetch_extra_args" {
  description = "More flags for sluice fetch (sluice fetch --help), e.g. [\"--cache-mib\", \"512\"]."
  type        = list(string)
  default     = []
}

variable "fetch_triggers" {
  description = "Run the catalog's function triggers on the fetch copies (false passes --no-triggers). Invoking functions needs the sluice-triggers module's policy on the fetch role."
  type        = bool
  default     = true
}

variable "catalog_table_name" {
  description = "DynamoDB catalog table (--catalog-table), from sluice-storage."
  type        = string
}

variable "catalog_table_arn" {
  description = "ARN of the catalog table, for the task roles."
  type        = string
}

variable "bucket_arn" {
  description = "ARN of the segment bucket, for the fetch role (reads of offloaded ledgers)."
  type        = string
}

variable "objects_url" {
  description = "Object store URL of the segments for fetch's --objects, s3://BUCKET?region=REGION (sluice-storage's objects_url)."
  type        = string
}

variable "cassandra_hosts" {
  description = "Cassandra contact points host[:port] (--cassandra), from sluice-metadata."
  type        = list(string)
}

variable "keyspace" {
  description = "Cassandra keyspace (--keyspace), from sluice-metadata."
  type        = string
  default     = "sluice"
}

variable "cassandra_tls_ca_file" {
  description = "CA bundle inside the image for --cassandra-tls-ca (TLS to Cassandra; required by Keyspaces), e.g. /etc/ssl/certs/ca-certificates.crt. Empty: no TLS."
  type        = string
  default     = ""
}

variable "cassandra_username" {
  description = "User for --cassandra-username (Keyspaces: the service-specific credential's user name). Empty: no authentication."
  type        = string
  default     = ""
}

variable "cassandra_password_secret_arn" {
  description = "Secrets Manager secret holding the Cassandra password, given to the tasks as $SLUICE_CASSANDRA_PASSWORD. Empty: none."
  type        = string
  default     = ""
}

variable "discovery_namespace" {
  description = "Private DNS namespace (Cloud Map) where each task has an A record under ingest.<namespace> and fetch.<namespace>, for Prometheus' DNS discovery."
  type        = string
  default     = "sluice.internal"
}

variable "container_insights" {
  description = "Turn on CloudWatch Container Insights for the ECS cluster (per-task CPU and memory metrics; billed as custom metrics)."
  type        = bool
  default     = false
}

variable "log_retention_days" {
  description = "Retention of the services' CloudWatch log groups, in days."
  type        = number
  default     = 30
}

variable "tags" {
  description = "Tags applied to every resource this module creates (in addition to any provider default_tags)."
  type        = map(string)
  default     = {}
}
