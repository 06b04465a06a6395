# Inputs of the sluice-bookies module.

variable "name_prefix" {
  description = "Prefix of every name this module creates."
  type        = string
  default     = "sluice"
}

variable "vpc_id" {
  description = "VPC of the bookies (the services' and the compactor's)."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets, one per availability zone: the group spreads the bookies over them. Three zones for ensembles of three."
  type        = list(string)
}

variable "client_security_group_ids" {
  description = "Security groups allowed to reach the bookie port: the ingest and fetch tasks' and the compactor function's."
  type        = list(string)
}

variable "bookie_count" {
  description = "Number of bookies (instances). At least the largest ensemble a topic uses (3 by default), plus spares so that a lost bookie's ledgers can be re-replicated."
  type        = number
  default     = 4

  validation {
    condition     = var.bookie_count >= 3
    error_message = "bookie_count must be at least 3 (the default ensemble)."
  }
}

variable "instance_type" {
  description = "EC2 instance type; it must have NVMe instance storage (i4i, i3en, im4gn, is4gen, c6id/m6id/r6id, ...). Two instance-store volumes give the journal a disk of its own."
  type        = string
  default     = "i4i.xlarge"
}

variable "architecture" {
  description = "CPU architecture of the default AMI (Amazon Linux 2023) and of the sluice binary: x86_64 or arm64. Must match instance_type."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture must be x86_64 or arm64."
  }
}

variable "ami_id" {
  description = "AMI of the bookies; null: the latest Amazon Linux 2023 for var.architecture (the user data needs bash, curl, lsblk, mkfs.xfs and systemd)."
  type        = string
  default     = null
}

variable "sluice_binary_url" {
  description = "HTTPS URL the instances download the sluice binary from at first boot (a release asset, or a presigned S3 URL valid long enough for the group's replacements)."
  type        = string
}

variable "sluice_binary_sha256" {
  description = "SHA-256 of the binary at sluice_binary_url (hex); boot fails on a mismatch."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.sluice_binary_sha256))
    error_message = "sluice_binary_sha256 must be 64 lower-case hex digits."
  }
}

variable "port" {
  description = "Bookie port (--addr; sluice.bookie.v1.BookieService over h2c, or mTLS)."
  type        = number
  default     = 3181
}

variable "catalog_table_name" {
  description = "DynamoDB catalog table the bookies register in (--catalog-table), from sluice-storage."
  type        = string
}

variable "catalog_table_arn" {
  description = "ARN of the catalog table, for the bookie role."
  type        = string
}

variable "cluster_instance" {
  description = "Cluster instance id recorded in every bookie's cookie (--instance): a bookie refuses disks of another cluster."
  type        = string
  default     = "sluice"
}

variable "insecure" {
  description = "Pass --insecure: serve the bookie port without mTLS. Bookies refuse a non-loopback address otherwise; set false only with --tls-ca/--tls-cert/--tls-key in extra_args and the files on the instances."
  type        = bool
}

variable "extra_args" {
  description = "More flags for sluice bookie (sluice bookie --help), e.g. [\"--journal-max-group-wait\", \"1ms\"]."
  type        = list(string)
  default     = []
}

variable "ssm_access" {
  description = "Attach AmazonSSMManagedInstanceCore to the bookie role, for shell access with Session Manager (no SSH keys, no open port)."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags applied to every resource this module creates (in addition to any provider default_tags); propagated to the instances."
  type        = map(string)
  default     = {}
}
