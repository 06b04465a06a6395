# sluice-services: the stateless ingest and fetch services (DESIGN.md 2) as ECS Fargate
# services behind one Network Load Balancer.
#
#   clients ──TCP 7421──▶ NLB ──▶ ingest tasks (sluice ingest: ProducerService, topic admin)
#   clients ──TCP 7422──▶ NLB ──▶ fetch tasks  (sluice fetch: ConsumerService, group admin,
#                                               triggers → Lambda Invoke)
#
# Each port serves Connect, gRPC and gRPC-web over h2c (HTTP/2 without TLS, and HTTP/1.1),
# so the NLB passes TCP through and HTTP/2 streams (ProduceStream, Subscribe) stay end to
# end. Copies reach each other directly by their task addresses (--advertise): an ingest
# copy forwards a produce to the partition's owner, a fetch copy forwards a session's calls
# to the copy serving it, and fetch produces triggers' failed records through the NLB's
# ingest listener.
#
# Health: the NLB checks TCP. The services answer grpc.health.v1.Health/Check (SERVING once
# an ingest copy took its partitions back, DESIGN.md 4.5) over gRPC and Connect, but
# Connect's Check is POST only and an NLB's HTTP checks are GETs; a TCP check is what tells
# the truth here. ECS replaces a task whose process exits.
#
# IAM: one task role per service, granting exactly the AWS calls its code makes (the
# "code" policy documents below; tfcheck's TestIAMGrantsMatchCode holds them against the
# Go sources). Lambda invoke for triggers is sluice-triggers' policy, attached to
# the fetch role by that module.

data "aws_region" "current" {}

locals {
  region = data.aws_region.current.name

  # The Cassandra flags both services take. With Keyspaces (TLS on 9142) the CA bundle
  # and the IAM user's service-specific credential; the password comes from the secret as
  # $SLUICE_CASSANDRA_PASSWORD (never a flag: it would show in ps).
  cassandra_args = concat(
    ["--cassandra", join(",", var.cassandra_hosts), "--keyspace", var.keyspace],
    var.cassandra_tls_ca_file == "" ? [] : ["--cassandra-tls-ca", var.cassandra_tls_ca_file],
    var.cassandra_username == "" ? [] : ["--cassandra-username", var.cassandra_username],
  )

  common_args = concat(
    ["--catalog-table", var.catalog_table_name, "--log-format", "json"],
    var.insecure ? ["--insecure"] : [],
  )

  ingest_args = concat(
    ["ingest", "--addr", "0.0.0.0:${var.ingest_port}"],
    local.common_args,
    local.cassandra_args,
    var.ingest_extra_args,
  )

  fetch_args = concat(
    ["fetch", "--addr", "0.0.0.0:${var.fetch_port}"],
    local.common_args,
    local.cassandra_args,
    ["--objects", var.objects_url, "--ingest-address", "${aws_lb.this.dns_name}:${var.ingest_port}"],
    var.fetch_triggers ? [] : ["--no-triggers"],
    var.fetch_extra_args,
  )

  # A Fargate task learns its own address only at run time; the copies must advertise it
  # (not 0.0.0.0) for forwarding. The image needs /bin/sh and hostname (README: image).
  services = {
    ingest = { port = var.ingest_port, args = local.ingest_args, size = var.ingest }
    fetch  = { port = var.fetch_port, args = local.fetch_args, size = var.fetch }
  }

  secrets = var.cassandra_password_secret_arn == "" ? [] : [{
    name      = "SLUICE_CASSANDRA_PASSWORD"
    valueFrom = var.cassandra_password_secret_arn
  }]
}

# ---------------------------------------------------------------------------------------
# Network: the load balancer and the tasks' security groups
# ---------------------------------------------------------------------------------------

resource "aws_security_group" "lb" {
  name_prefix = "${var.name_prefix}-lb-"
  description = "Sluice NLB: the clients' way in"
  vpc_id      = var.vpc_id
  tags        = var.tags

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_ingress_rule" "lb" {
  for_each = { for pair in setproduct(var.client_cidr_blocks, [var.ingest_port, var.fetch_port]) : "${pair[0]}:${pair[1]}" => pair }

  security_group_id = aws_security_group.lb.id
  cidr_ipv4         = each.value[0]
  from_port         = each.value[1]
  to_port           = each.value[1]
  ip_protocol       = "tcp"
  tags              = var.tags
}

# Fetch produces triggers' failed records through the NLB's ingest listener.
resource "aws_vpc_security_group_ingress_rule" "lb_from_tasks" {
  security_group_id            = aws_security_group.lb.id
  referenced_security_group_id = aws_security_group.tasks.id
  from_port                    = var.ingest_port
  to_port                      = var.ingest_port
  ip_protocol                  = "tcp"
  tags                         = var.tags
}

resource "aws_vpc_security_group_egress_rule" "lb" {
  security_group_id            = aws_security_group.lb.id
  referenced_security_group_id = aws_security_group.tasks.id
  ip_protocol                  = "-1"
  tags                         = var.tags
}

resource "aws_security_group" "tasks" {
  name_prefix = "${var.name_prefix}-tasks-"
  description = "Sluice ingest and fetch tasks"
  vpc_id      = var.vpc_id
  tags        = var.tags

  lifecycle {
    create_before_destroy = true
  }
}

# From the NLB, from each other (forwarding between copies), and from whatever else
# is named (a Prometheus scraper on /metrics). count, not for_each: the security group ids
# are known only after apply.
locals {
  task_sources = concat([aws_security_group.lb.id, aws_security_group.tasks.id], var.metrics_security_group_ids)
  task_ports   = [var.ingest_port, var.fetch_port]
}

resource "aws_vpc_security_group_ingress_rule" "tasks" {
  count = length(local.task_sources) * length(local.task_ports)

  security_group_id            = aws_security_group.tasks.id
  referenced_security_group_id = local.task_sources[floor(count.index / length(local.task_ports))]
  from_port                    = local.task_ports[count.index % length(local.task_ports)]
  to_port                      = local.task_ports[count.index % length(local.task_ports)]
  ip_protocol                  = "tcp"
  tags                         = var.tags
}

# Out: bookies, Cassandra/Keyspaces, DynamoDB, S3, Lambda, the image registry.
resource "aws_vpc_security_group_egress_rule" "tasks" {
  security_group_id = aws_security_group.tasks.id
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
  tags              = var.tags
}

resource "aws_lb" "this" {
  name                             = "${var.name_prefix}-nlb"
  load_balancer_type               = "network"
  internal                         = var.internal
  subnets                          = var.lb_subnet_ids == null ? var.subnet_ids : var.lb_subnet_ids
  security_groups                  = [aws_security_group.lb.id]
  enable_cross_zone_load_balancing = true
  tags                             = var.tags
}

resource "aws_lb_target_group" "this" {
  for_each = local.services

  name        = "${var.name_prefix}-${each.key}"
  port        = each.value.port
  protocol    = "TCP"
  target_type = "ip"
  vpc_id      = var.vpc_id

  # Long-lived streams (ProduceStream, Subscribe): give them the services' own drain time
  # (10 s, DESIGN.md 4.5) and some.
  deregistration_delay = 30

  # GET /healthz answers 200 only while the copy serves: 503 before its
  # start-up (readiness gate) and while it drains, so the NLB sends it no new
  # connection then. It is open without credentials.
  health_check {
    protocol            = "HTTP"
    path                = "/healthz"
    matcher             = "200"
    port                = "traffic-port"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }

  tags = var.tags
}

resource "aws_lb_listener" "this" {
  for_each = local.services

  load_balancer_arn = aws_lb.this.arn
  port              = each.value.port
  protocol          = "TCP"

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.this[each.key].arn
  }

  tags = var.tags
}

# ---------------------------------------------------------------------------------------
# IAM
# ---------------------------------------------------------------------------------------

data "aws_iam_policy_document" "ecs_tasks_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

# The execution role is ECS's, not Sluice's: pull the image, write the logs, read the
# Cassandra password secret.
resource "aws_iam_role" "execution" {
  name_prefix        = "${var.name_prefix}-exec-"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

data "aws_iam_policy_document" "execution_secrets" {
  count = var.cassandra_password_secret_arn == "" ? 0 : 1

  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [var.cassandra_password_secret_arn]
  }
}

resource "aws_iam_role_policy" "execution_secrets" {
  count = var.cassandra_password_secret_arn == "" ? 0 : 1

  name   = "cassandra-password"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.execution_secrets[0].json
}

# ingest: the catalog (pkg/catalog/dynamodb) and nothing else. Bookies are reached over
# the network, Cassandra with its own credentials.
data "aws_iam_policy_document" "ingest_code" {
  statement {
    sid = "Catalog"
    actions = [
      "dynamodb:BatchGetItem",
      "dynamodb:BatchWriteItem",
      "dynamodb:ConditionCheckItem",
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]
    resources = [var.catalog_table_arn]
  }
}

# fetch: the catalog, and segment objects read back (ranged GETs, HEAD). ListBucket is
# there for the answer to a missing key: without it S3 says 403, not 404, and the code
# tells "not found" from "refused" (objstore.IsNotFound).
data "aws_iam_policy_document" "fetch_code" {
  statement {
    sid = "Catalog"
    actions = [
      "dynamodb:BatchGetItem",
      "dynamodb:BatchWriteItem",
      "dynamodb:ConditionCheckItem",
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]
    resources = [var.catalog_table_arn]
  }

  statement {
    sid       = "SegmentObjects"
    actions   = ["s3:GetObject"]
    resources = ["${var.bucket_arn}/*"]
  }

  statement {
    sid       = "SegmentBucket"
    actions   = ["s3:ListBucket"]
    resources = [var.bucket_arn]
  }
}

resource "aws_iam_role" "task" {
  for_each = local.services

  name_prefix        = "${var.name_prefix}-${each.key}-"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy" "ingest_code" {
  name   = "sluice-ingest"
  role   = aws_iam_role.task["ingest"].id
  policy = data.aws_iam_policy_document.ingest_code.json
}

resource "aws_iam_role_policy" "fetch_code" {
  name   = "sluice-fetch"
  role   = aws_iam_role.task["fetch"].id
  policy = data.aws_iam_policy_document.fetch_code.json
}

# ---------------------------------------------------------------------------------------
# ECS
# ---------------------------------------------------------------------------------------

resource "aws_ecs_cluster" "this" {
  name = "${var.name_prefix}-services"

  setting {
    name  = "containerInsights"
    value = var.container_insights ? "enabled" : "disabled"
  }

  tags = var.tags
}

resource "aws_cloudwatch_log_group" "this" {
  for_each = local.services

  name              = "/sluice/${var.name_prefix}/${each.key}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_ecs_task_definition" "this" {
  for_each = local.services

  family                   = "${var.name_prefix}-${each.key}"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = each.value.size.cpu
  memory                   = each.value.size.memory
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task[each.key].arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.cpu_architecture
  }

  container_definitions = jsonencode([{
    name      = each.key
    image     = var.image
    essential = true
    # sh -c: the copy advertises its task address (hostname -i), known only at run time.
    entryPoint = ["/bin/sh", "-c"]
    command = [join(" ", concat(
      ["exec", var.sluice_path],
      [for a in each.value.args : format("'%s'", replace(a, "'", "'\\''"))],
      ["--advertise", "\"$(hostname -i | cut -d' ' -f1):${each.value.port}\""],
    ))]
    portMappings = [{ containerPort = each.value.port, protocol = "tcp" }]
    environment = [
      { name = "AWS_REGION", value = local.region },
    ]
    secrets = local.secrets
    # The services drain for up to 10 s on SIGTERM (DESIGN.md 4.5); an ingest copy hands
    # its partitions over first.
    stopTimeout = 30
    ulimits     = [{ name = "nofile", softLimit = 65536, hardLimit = 65536 }]
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.this[each.key].name
        awslogs-region        = local.region
        awslogs-stream-prefix = each.key
      }
    }
  }])

  tags = var.tags
}

resource "aws_service_discovery_private_dns_namespace" "this" {
  name        = var.discovery_namespace
  description = "Sluice task addresses (A records per task), for Prometheus' DNS discovery"
  vpc         = var.vpc_id
  tags        = var.tags
}

resource "aws_service_discovery_service" "this" {
  for_each = local.services

  name = each.key

  dns_config {
    namespace_id   = aws_service_discovery_private_dns_namespace.this.id
    routing_policy = "MULTIVALUE"

    dns_records {
      type = "A"
      ttl  = 10
    }
  }

  health_check_custom_config {
    failure_threshold = 1
  }

  tags = var.tags
}

resource "aws_ecs_service" "this" {
  for_each = local.services

  name            = each.key
  cluster         = aws_ecs_cluster.this.id
  task_definition = aws_ecs_task_definition.this[each.key].arn
  desired_count   = each.value.size.min
  launch_type     = "FARGATE"

  # ECS replaces a task the load balancer finds unhealthy, after this much time to start.
  health_check_grace_period_seconds = 60

  # Rolling: start new copies before stopping old ones; an ingest copy's partitions move
  # to the others through the catalog's writer leases when it stops.
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = [aws_security_group.tasks.id]
    assign_public_ip = false
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.this[each.key].arn
    container_name   = each.key
    container_port   = each.value.port
  }

  service_registries {
    registry_arn = aws_service_discovery_service.this[each.key].arn
  }

  # Autoscaling owns the count after creation.
  lifecycle {
    ignore_changes = [desired_count]
  }

  depends_on = [aws_lb_listener.this]
  tags       = var.tags
}

# Autoscaling on CPU: the services are CPU-bound (encoding, checksums, TLS) long before
# they are memory-bound.
resource "aws_appautoscaling_target" "this" {
  for_each = local.services

  service_namespace  = "ecs"
  resource_id        = "service/${aws_ecs_cluster.this.name}/${aws_ecs_service.this[each.key].name}"
  scalable_dimension = "ecs:service:DesiredCount"
  min_capacity       = each.value.size.min
  max_capacity       = each.value.size.max
  tags               = var.tags
}

resource "aws_appautoscaling_policy" "cpu" {
  for_each = local.services

  name               = "${var.name_prefix}-${each.key}-cpu"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.this[each.key].service_namespace
  resource_id        = aws_appautoscaling_target.this[each.key].resource_id
  scalable_dimension = aws_appautoscaling_target.this[each.key].scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value = var.cpu_target_percent

    predefined_metric_specification {
      predefined_metric_type = "ECSServiceAverageCPUUtilization"
    }

    # Scale in slowly: a copy that stops hands its partitions (ingest) or leases (fetch)
    # over, which is cheap but not free.
    scale_in_cooldown  = 300
    scale_out_cooldown = 60
  }
}
