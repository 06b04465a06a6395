output "bucket_name" {
  description = "Segment bucket."
  value       = module.storage.bucket_name
}

output "table_name" {
  description = "Catalog table."
  value       = module.storage.table_name
}

output "ingest_address" {
  description = "Where producers connect (host:port, h2c)."
  value       = module.services.ingest_address
}

output "fetch_address" {
  description = "Where consumers connect (host:port, h2c)."
  value       = module.services.fetch_address
}

output "cassandra_hosts" {
  description = "The bookkeeping's contact points."
  value       = module.metadata.cassandra_hosts
}

output "keyspaces_user" {
  description = "IAM user to create the Keyspaces service-specific credential for (null with a self-managed Cassandra)."
  value       = module.metadata.keyspaces_user
}

output "compactor_function" {
  description = "The compactor function."
  value       = module.compactor.function_name
}

output "alarm_topic_arn" {
  description = "SNS topic of the alarms."
  value       = module.observability.alarm_topic_arn
}

output "prometheus_scrape_config" {
  description = "Scrape configuration for a metrics collector in the VPC."
  value       = module.observability.prometheus_scrape_config
}
