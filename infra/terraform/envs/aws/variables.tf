variable "region" {
  description = "AWS region to deploy into."
  type        = string
  default     = "us-east-1"
}

variable "environment" {
  description = "Environment name, used in the default tags (e.g. staging, prod)."
  type        = string
  default     = "prod"
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

variable "tags" {
  description = "Extra tags for every resource (merged into the provider's default_tags)."
  type        = map(string)
  default     = {}
}
