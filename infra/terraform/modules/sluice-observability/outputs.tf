output "alarm_topic_arn" {
  description = "SNS topic the alarms notify."
  value       = aws_sns_topic.alarms.arn
}

output "prometheus_workspace_id" {
  description = "Amazon Managed Service for Prometheus workspace id (Grafana's data source); null without var.prometheus."
  value       = var.prometheus ? aws_prometheus_workspace.this[0].id : null
}

output "prometheus_endpoint" {
  description = "The workspace's Prometheus-compatible endpoint (query under api/v1/query); null without var.prometheus."
  value       = var.prometheus ? aws_prometheus_workspace.this[0].prometheus_endpoint : null
}

output "prometheus_scrape_config" {
  description = "Prometheus configuration (YAML) for a collector in the VPC: scrapes ingest, fetch and the bookies, remote-writes to the workspace."
  value       = local.scrape_config
}

output "collector_policy_arn" {
  description = "IAM policy for the collector's role (remote write, EC2 discovery); null without var.prometheus."
  value       = var.prometheus ? aws_iam_policy.collector[0].arn : null
}
