# sluice-observability: where an operator looks (DESIGN.md 2.13).
#
#   - CloudWatch alarms on what AWS measures without any agent: a bookie instance down,
#     no healthy ingest or fetch copy behind the load balancer, a service pinned at its
#     autoscaling maximum, the compactor failing or not running, the catalog table
#     throttled; and on what the compactor function reports of each pass: ledgers
#     under-replicated, passes with errors. They notify an SNS topic (var.alarm_emails
#     subscribe to it).
#   - Optionally (var.prometheus) an Amazon Managed Service for Prometheus workspace, and
#     the scrape configuration for a collector in the VPC that scrapes the services' and
#     bookies' /metrics (Prometheus text) and remote-writes to the workspace: the
#     `prometheus_scrape_config` output, for a Prometheus in agent mode or an AWS
#     Distro for OpenTelemetry collector (README: metrics). The collector itself is not
#     created here.

data "aws_region" "current" {}

resource "aws_sns_topic" "alarms" {
  name = "${var.name_prefix}-alarms"
  tags = var.tags
}

resource "aws_sns_topic_subscription" "email" {
  for_each = toset(var.alarm_emails)

  topic_arn = aws_sns_topic.alarms.arn
  protocol  = "email"
  endpoint  = each.value
}

locals {
  alarm_actions = [aws_sns_topic.alarms.arn]
}

# A bookie down: the group has fewer instances in service than it should. (A bookie
# process that died on a running instance is the Prometheus rules' job: its /metrics
# target is down.)
resource "aws_cloudwatch_metric_alarm" "bookie_down" {
  alarm_name          = "${var.name_prefix}-bookie-down"
  alarm_description   = "Fewer bookie instances in service than the group's size: ledgers on the missing one are under-replicated until the compactor rebuilds them."
  namespace           = "AWS/AutoScaling"
  metric_name         = "GroupInServiceInstances"
  dimensions          = { AutoScalingGroupName = var.bookie_autoscaling_group_name }
  statistic           = "Minimum"
  period              = 60
  evaluation_periods  = 3
  comparison_operator = "LessThanThreshold"
  threshold           = var.bookie_count
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# No healthy copy of a service behind the load balancer: its port refuses every client.
resource "aws_cloudwatch_metric_alarm" "no_healthy_targets" {
  for_each = var.target_group_arn_suffixes

  alarm_name          = "${var.name_prefix}-${each.key}-no-healthy-targets"
  alarm_description   = "No healthy ${each.key} task behind the load balancer."
  namespace           = "AWS/NetworkELB"
  metric_name         = "HealthyHostCount"
  dimensions          = { LoadBalancer = var.lb_arn_suffix, TargetGroup = each.value }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 2
  comparison_operator = "LessThanThreshold"
  threshold           = 1
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# A service running hot for a long time: autoscaling is at its maximum or cannot keep up.
resource "aws_cloudwatch_metric_alarm" "service_cpu" {
  for_each = var.service_names

  alarm_name          = "${var.name_prefix}-${each.key}-cpu-high"
  alarm_description   = "${each.key} has averaged over ${var.service_cpu_alarm_percent}% CPU for 15 minutes: raise its autoscaling maximum or task size."
  namespace           = "AWS/ECS"
  metric_name         = "CPUUtilization"
  dimensions          = { ClusterName = var.ecs_cluster_name, ServiceName = each.value }
  statistic           = "Average"
  period              = 300
  evaluation_periods  = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.service_cpu_alarm_percent
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# The compactor failing: passes that end in an error.
resource "aws_cloudwatch_metric_alarm" "compactor_errors" {
  alarm_name          = "${var.name_prefix}-compactor-errors"
  alarm_description   = "Compactor passes failed in 3 consecutive 5-minute periods: offload, retention and re-replication are not progressing (see the function's logs)."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = var.compactor_function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# The compactor stuck: no pass started for 15 minutes (schedule disabled, function
# throttled or deleted).
resource "aws_cloudwatch_metric_alarm" "compactor_not_running" {
  alarm_name          = "${var.name_prefix}-compactor-not-running"
  alarm_description   = "No compactor pass in 15 minutes."
  namespace           = "AWS/Lambda"
  metric_name         = "Invocations"
  dimensions          = { FunctionName = var.compactor_function_name }
  statistic           = "Sum"
  period              = 900
  evaluation_periods  = 1
  comparison_operator = "LessThanThreshold"
  threshold           = 1
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# What the compactor function reports of each pass (CloudWatch embedded metric format,
# services/compactor/lambda/emf.go): ledgers whose copies are fewer than their ensemble
# needs, for 15 minutes (a lost bookie's ledgers are rebuilt after --rereplicate-grace, 2
# minutes by default; longer means re-replication is stuck or has nowhere to go).
resource "aws_cloudwatch_metric_alarm" "under_replicated" {
  alarm_name          = "${var.name_prefix}-ledgers-under-replicated"
  alarm_description   = "Ledgers under-replicated for 15 minutes: re-replication is not catching up (too few bookies, or the compactor failing; sluice ledger under-replicated lists them)."
  namespace           = "Sluice/Compactor"
  metric_name         = "LedgersUnderReplicated"
  dimensions          = { FunctionName = var.compactor_function_name }
  statistic           = "Minimum"
  period              = 300
  evaluation_periods  = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# Passes that finished but failed some of their work (a ledger that could not be
# offloaded, an object that could not be deleted): the function itself succeeded, so
# compactor-errors does not see them.
resource "aws_cloudwatch_metric_alarm" "compactor_pass_errors" {
  alarm_name          = "${var.name_prefix}-compactor-pass-errors"
  alarm_description   = "Compactor passes reported errors in 3 consecutive 5-minute periods (see the function's logs)."
  namespace           = "Sluice/Compactor"
  metric_name         = "Errors"
  dimensions          = { FunctionName = var.compactor_function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# The catalog throttled: takeovers and roll-overs slow down (the catalog retries
# throttling only, with backoff).
resource "aws_cloudwatch_metric_alarm" "catalog_throttled" {
  alarm_name          = "${var.name_prefix}-catalog-throttled"
  alarm_description   = "The DynamoDB catalog table throttled requests in 3 consecutive minutes."
  namespace           = "AWS/DynamoDB"
  metric_name         = "ThrottledRequests"
  dimensions          = { TableName = var.catalog_table_name }
  statistic           = "Sum"
  period              = 60
  evaluation_periods  = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# ---------------------------------------------------------------------------------------
# Prometheus
# ---------------------------------------------------------------------------------------

resource "aws_prometheus_workspace" "this" {
  count = var.prometheus ? 1 : 0

  alias = "${var.name_prefix}-metrics"
  tags  = var.tags
}

locals {
  # Task addresses come from the services' Cloud Map names (one A record per task);
  # bookies from EC2 discovery by their sluice:role tag.
  scrape_config = !var.prometheus ? null : yamlencode({
    global = { scrape_interval = var.scrape_interval }
    scrape_configs = concat(
      [for svc, name in var.discovery_names : {
        job_name = "sluice-${svc}"
        dns_sd_configs = [{
          names = [name]
          type  = "A"
          port  = var.service_ports[svc]
        }]
      }],
      [{
        job_name = "sluice-bookie"
        ec2_sd_configs = [{
          region = data.aws_region.current.name
          port   = var.bookie_port
          filters = [
            { name = "tag:sluice:role", values = ["bookie"] },
            { name = "instance-state-name", values = ["running"] },
          ]
        }]
      }],
    )
    remote_write = [{
      url   = "${aws_prometheus_workspace.this[0].prometheus_endpoint}api/v1/remote_write"
      sigv4 = { region = data.aws_region.current.name }
    }]
  })
}

# What the collector's role needs: write to the workspace, and find the bookies.
data "aws_iam_policy_document" "collector" {
  count = var.prometheus ? 1 : 0

  statement {
    sid       = "RemoteWrite"
    actions   = ["aps:RemoteWrite"]
    resources = [aws_prometheus_workspace.this[0].arn]
  }

  statement {
    sid       = "DiscoverBookies"
    actions   = ["ec2:DescribeInstances", "ec2:DescribeAvailabilityZones"]
    resources = ["*"]
  }
}

resource "aws_iam_policy" "collector" {
  count = var.prometheus ? 1 : 0

  name_prefix = "${var.name_prefix}-metrics-collector-"
  description = "Sluice metrics collector: remote-write to the Prometheus workspace, discover the bookies"
  policy      = data.aws_iam_policy_document.collector[0].json
  tags        = var.tags
}

# The repository's Prometheus alerting rules (infra/observability/prometheus), evaluated by
# the workspace, and its alert manager sending to the same SNS topic as the alarms.
resource "aws_prometheus_rule_group_namespace" "sluice" {
  count = var.prometheus && var.alert_rules_file != null ? 1 : 0

  name         = "sluice"
  workspace_id = aws_prometheus_workspace.this[0].id
  data         = file(var.alert_rules_file)
}

resource "aws_prometheus_alert_manager_definition" "this" {
  count = var.prometheus && var.alert_rules_file != null ? 1 : 0

  workspace_id = aws_prometheus_workspace.this[0].id
  definition = yamlencode({
    alertmanager_config = yamlencode({
      route = { receiver = "sns", group_by = ["alertname"] }
      receivers = [{
        name = "sns"
        sns_configs = [{
          topic_arn = aws_sns_topic.alarms.arn
          sigv4     = { region = data.aws_region.current.name }
        }]
      }]
    })
  })
}

# The workspace's alert manager may publish to the alarm topic.
data "aws_iam_policy_document" "alarm_topic" {
  statement {
    sid       = "ManagedPrometheusAlerts"
    actions   = ["sns:Publish", "sns:GetTopicAttributes"]
    resources = [aws_sns_topic.alarms.arn]

    principals {
      type        = "Service"
      identifiers = ["aps.amazonaws.com"]
    }
  }

  statement {
    sid       = "CloudWatchAlarms"
    actions   = ["sns:Publish"]
    resources = [aws_sns_topic.alarms.arn]

    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com"]
    }
  }
}

resource "aws_sns_topic_policy" "alarms" {
  arn    = aws_sns_topic.alarms.arn
  policy = data.aws_iam_policy_document.alarm_topic.json
}
