# Inputs of the sluice-compactor module.

variable "name_prefix" {
  description = "Prefix of the names of the role and security group this module creates."
  type        = string
  default     = "sluice"
}

variable "function_name" {
  description = "Name of the Lambda function."
  type        = string
  default     = "sluice-compactor"
}

variable "zip_path" {
  description = "Path of the function's zip: a file named bootstrap built from ./services/compactor/lambda (see this module's header)."
  type        = string
}

variable "architecture" {
  description = "Lambda architecture the bootstrap binary was built for: arm64 (GOARCH=arm64) or x86_64 (GOARCH=amd64)."
  type        = string
  default     = "arm64"

  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture must be arm64 or x86_64."
  }
}

variable "memory_mb" {
  description = "Function memory in MiB (Lambda gives CPU in proportion). Segment uploads buffer SLUICE_COMPACTOR_WORKERS x the upload part size."
  type        = number
  default     = 1024
}

variable "timeout_seconds" {
  description = "Function timeout in seconds (at most 900); a pass is given 30 s less (SLUICE_COMPACTOR_PASS_TIMEOUT)."
  type        = number
  default     = 300

  validation {
    condition     = var.timeout_seconds >= 60 && var.timeout_seconds <= 900
    error_message = "timeout_seconds must be within 60..900."
  }
}

variable "schedule_expression" {
  description = "EventBridge schedule of the passes, e.g. rate(1 minute) (sluice compactor's default interval is 30 s)."
  type        = string
  default     = "rate(1 minute)"
}

variable "environment" {
  description = "More environment variables of the function: SLUICE_COMPACTOR_* settings (services/compactor/env.go, e.g. SLUICE_COMPACTOR_OFFLOAD_AGE = \"5m\") and SLUICE_TLS_CA/CERT/KEY for bookies with mTLS."
  type        = map(string)
  default     = {}
}

variable "vpc_id" {
  description = "VPC of the bookies, where the function runs."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets of the function; they need a route to DynamoDB and S3 (gateway endpoints or NAT)."
  type        = list(string)
}

variable "catalog_table_name" {
  description = "DynamoDB catalog table (SLUICE_CATALOG_TABLE), from sluice-storage."
  type        = string
}

variable "catalog_table_arn" {
  description = "ARN of the catalog table, for the function's role."
  type        = string
}

variable "objects_url" {
  description = "Object store URL of the segments (SLUICE_OBJECTS), s3://BUCKET?region=REGION, from sluice-storage."
  type        = string
}

variable "bucket_arn" {
  description = "ARN of the segment bucket, for the function's role."
  type        = string
}

variable "log_retention_days" {
  description = "Retention of the function's CloudWatch log group, in days."
  type        = number
  default     = 30
}

variable "tags" {
  description = "Tags applied to every resource this module creates (in addition to any provider default_tags)."
  type        = map(string)
  default     = {}
}
