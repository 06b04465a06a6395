output "cassandra_hosts" {
  description = "Contact points for the services' --cassandra: the Keyspaces endpoint (host:9142), or var.cassandra_hosts."
  value       = local.keyspaces ? [local.keyspaces_endpoint] : var.cassandra_hosts
}

output "keyspace_name" {
  description = "The keyspace (the services' --keyspace)."
  value       = var.keyspace_name
}

output "keyspaces" {
  description = "Whether the bookkeeping is on Amazon Keyspaces (true: connect with TLS, --cassandra-tls-ca, and the keyspaces_user's service-specific credential)."
  value       = local.keyspaces
}

output "keyspaces_user" {
  description = "IAM user whose service-specific credential (user name and password) the services log in to Keyspaces with; null for a self-managed Cassandra."
  value       = local.keyspaces ? aws_iam_user.keyspaces[0].name : null
}

output "keyspace_arn" {
  description = "ARN of the Keyspaces keyspace; null for a self-managed Cassandra."
  value       = local.keyspaces ? aws_keyspaces_keyspace.this[0].arn : null
}
