output "lb_dns_name" {
  description = "DNS name of the Network Load Balancer: producers use <name>:<ingest_port>, consumers <name>:<fetch_port>."
  value       = aws_lb.this.dns_name
}

output "lb_arn_suffix" {
  description = "ARN suffix of the load balancer (the LoadBalancer dimension of its CloudWatch metrics)."
  value       = aws_lb.this.arn_suffix
}

output "target_group_arn_suffixes" {
  description = "ARN suffixes of the ingest and fetch target groups (the TargetGroup dimension of their CloudWatch metrics), by service."
  value       = { for k, tg in aws_lb_target_group.this : k => tg.arn_suffix }
}

output "ingest_address" {
  description = "The ingest listener, host:port."
  value       = "${aws_lb.this.dns_name}:${var.ingest_port}"
}

output "fetch_address" {
  description = "The fetch listener, host:port."
  value       = "${aws_lb.this.dns_name}:${var.fetch_port}"
}

output "cluster_name" {
  description = "ECS cluster of the services."
  value       = aws_ecs_cluster.this.name
}

output "service_names" {
  description = "ECS service names, by service (ingest, fetch)."
  value       = { for k, s in aws_ecs_service.this : k => s.name }
}

output "task_security_group_id" {
  description = "Security group of the tasks: the bookies admit it on their port."
  value       = aws_security_group.tasks.id
}

output "task_role_names" {
  description = "Task role names, by service; sluice-triggers attaches its invoke policy to the fetch one."
  value       = { for k, r in aws_iam_role.task : k => r.name }
}

output "discovery_names" {
  description = "DNS names with an A record per task, by service (Prometheus dns_sd_configs)."
  value       = { for k, s in aws_service_discovery_service.this : k => "${s.name}.${var.discovery_namespace}" }
}

output "ports" {
  description = "The services' ports, by service."
  value       = { ingest = var.ingest_port, fetch = var.fetch_port }
}
