output "bucket_name" {
  description = "Name of the segment bucket (the compactor's and fetch's S3 bucket setting)."
  value       = aws_s3_bucket.segments.id
}

output "bucket_arn" {
  description = "ARN of the segment bucket, for IAM policies of the services that read or write segments."
  value       = aws_s3_bucket.segments.arn
}

output "table_name" {
  description = "Name of the catalog table (the services' DynamoDB catalog table setting)."
  value       = aws_dynamodb_table.catalog.name
}

output "table_arn" {
  description = "ARN of the catalog table, for IAM policies of the services that use the catalog."
  value       = aws_dynamodb_table.catalog.arn
}

output "objects_url" {
  description = "Object store URL of the segment bucket, as the compactor's --objects / SLUICE_OBJECTS and fetch's --objects take it (pkg/objstore)."
  value       = "s3://${aws_s3_bucket.segments.id}?region=${aws_s3_bucket.segments.region}"
}
