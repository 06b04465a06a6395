# Inputs of the sluice-observability module.

variable "name_prefix" {
  description = "Prefix of every name this module creates (alarms, topic, workspace)."
  type        = string
  default     = "sluice"
}

variable "alarm_emails" {
  description = "E-mail addresses subscribed to the alarm topic (each must confirm the subscription)."
  type        = list(string)
  default     = []
}

variable "bookie_autoscaling_group_name" {
  description = "The bookies' Auto Scaling group (sluice-bookies' autoscaling_group_name)."
  type        = string
}

variable "bookie_count" {
  description = "The bookies' group size: fewer in service raises bookie-down."
  type        = number
}

variable "bookie_port" {
  description = "Bookie port, where the scraper finds each bookie's /metrics."
  type        = number
  default     = 3181
}

variable "lb_arn_suffix" {
  description = "The services' load balancer (sluice-services' lb_arn_suffix)."
  type        = string
}

variable "target_group_arn_suffixes" {
  description = "Target groups by service (sluice-services' target_group_arn_suffixes)."
  type        = map(string)
}

variable "ecs_cluster_name" {
  description = "ECS cluster of the services (sluice-services' cluster_name)."
  type        = string
}

variable "service_names" {
  description = "ECS service names by service (sluice-services' service_names)."
  type        = map(string)
}

variable "service_cpu_alarm_percent" {
  description = "Average CPU over 15 minutes above which a service alarms; above the autoscaling target, so it fires only when scaling cannot keep up."
  type        = number
  default     = 85
}

variable "discovery_names" {
  description = "DNS names with one A record per task, by service (sluice-services' discovery_names)."
  type        = map(string)
}

variable "service_ports" {
  description = "The services' ports by service (sluice-services' ports), where /metrics is served."
  type        = map(number)
}

variable "compactor_function_name" {
  description = "The compactor function (sluice-compactor's function_name)."
  type        = string
}

variable "catalog_table_name" {
  description = "The DynamoDB catalog table (sluice-storage's table_name)."
  type        = string
}

variable "prometheus" {
  description = "Create an Amazon Managed Service for Prometheus workspace, the collector policy and the scrape configuration."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags applied to every resource this module creates (in addition to any provider default_tags)."
  type        = map(string)
  default     = {}
}

variable "scrape_interval" {
  description = "How often the collector scrapes each target. The Prometheus workspace bills per sample ingested, so this sets most of its cost (README: cost)."
  type        = string
  default     = "30s"
}

variable "alert_rules_file" {
  description = "Path of a Prometheus alerting rules file (groups: ...) for the workspace to evaluate, e.g. the repository's infra/observability/prometheus/sluice-alerts.yml; its alerts go to the alarm topic. null: no rules."
  type        = string
  default     = null
}
