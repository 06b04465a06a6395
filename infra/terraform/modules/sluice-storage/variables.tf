# Inputs of the sluice-storage module. Defaults are the safe choice for a real account;
# the localstack environment relaxes the ones that only get in the way of throw-away
# emulator state (deletion protection, point-in-time recovery, force_destroy).

variable "bucket_name" {
  description = "Name of the S3 bucket that holds sealed-ledger segment objects (DESIGN.md 2.9). S3 bucket names are global: pick one per account and environment."
  type        = string
}

variable "table_name" {
  description = "Name of the DynamoDB catalog table (DESIGN.md 2.5)."
  type        = string
}

variable "versioning_enabled" {
  description = "Turn on S3 object versioning for the segment bucket. Off by default: segment objects are written once and deleted by the compactor's retention, so old versions would only keep deleted data billable."
  type        = bool
  default     = false
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete the bucket even when it still holds objects. Keep false anywhere the data matters."
  type        = bool
  default     = false
}

variable "abort_incomplete_multipart_upload_days" {
  description = "Abort multipart uploads left incomplete (e.g. by a compactor that crashed mid-upload) after this many days. null leaves them alone."
  type        = number
  default     = 1

  validation {
    condition     = var.abort_incomplete_multipart_upload_days == null ? true : var.abort_incomplete_multipart_upload_days >= 1
    error_message = "abort_incomplete_multipart_upload_days must be null or at least 1."
  }
}

variable "noncurrent_version_expiration_days" {
  description = "When versioning is on, expire noncurrent object versions after this many days. null (the default) keeps them; only meaningful with versioning_enabled = true."
  type        = number
  default     = null

  validation {
    condition     = var.noncurrent_version_expiration_days == null ? true : var.noncurrent_version_expiration_days >= 1
    error_message = "noncurrent_version_expiration_days must be null or at least 1."
  }
}

variable "point_in_time_recovery" {
  description = "Enable DynamoDB point-in-time recovery (continuous backups) on the catalog table."
  type        = bool
  default     = true
}

variable "deletion_protection" {
  description = "Enable DynamoDB deletion protection on the catalog table. While on, `terraform destroy` fails on the table until it is turned off."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags applied to every resource this module creates (in addition to any provider default_tags)."
  type        = map(string)
  default     = {}
}
