# sluice-bookies: the ledger storage nodes (DESIGN.md 2.2; bookkeeper/README.md) on EC2
# instances with local NVMe instance storage, one bookie per instance, in an Auto Scaling
# group spread over the availability zones of var.subnet_ids.
#
# Why instance storage: a bookie fsyncs its journal before every acknowledgement, so the
# journal's fsync latency is the produce latency; local NVMe is an order of magnitude
# faster at that than network block storage. The data is replicated by the ledger
# protocol (ensembles of 3 bookies by default), not by the disk.
#
# What that means for operations (README: bookies):
#   - An instance that stops or is replaced comes back empty, with a new address and so a
#     new bookie id; the compactor re-replicates the lost bookie's copies of closed ledgers
#     (--rereplicate-grace), and open ledgers change ensemble on the writer's next add.
#   - Never replace more bookies at once than an ensemble can lose: the group has no
#     instance refresh, and its size is fixed (min = max = desired). To take one out,
#     `sluice bookie decommission` it first, then terminate the instance.
#
# The user data (bookie-user-data.sh.tftpl) formats and mounts the NVMe instance-store
# volumes (the first as the data directory --dir, a second, if the instance type has one,
# as the journal --journal-dir), installs the sluice binary from var.sluice_binary_url
# (checked against var.sluice_binary_sha256) and runs `sluice bookie` under systemd,
# advertising the instance's private address.

data "aws_region" "current" {}

data "aws_ssm_parameter" "al2023" {
  count = var.ami_id == null ? 1 : 0
  name  = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-${var.architecture}"
}

locals {
  ami_id = var.ami_id == null ? data.aws_ssm_parameter.al2023[0].insecure_value : var.ami_id

  bookie_args = concat(
    ["--instance", var.cluster_instance, "--catalog-table", var.catalog_table_name, "--log-format", "json"],
    var.insecure ? ["--insecure"] : [],
    var.extra_args,
  )
}

resource "aws_security_group" "bookies" {
  name_prefix = "${var.name_prefix}-bookies-"
  description = "Sluice bookies"
  vpc_id      = var.vpc_id
  tags        = var.tags

  lifecycle {
    create_before_destroy = true
  }
}

# The bookie port: from ingest, fetch and the compactor (var.client_security_group_ids),
# and from the other bookies (none today, but re-replication may come to read peer to
# peer). count, not for_each: the ids are known only after apply.
locals {
  bookie_sources = concat([aws_security_group.bookies.id], var.client_security_group_ids)
}

resource "aws_vpc_security_group_ingress_rule" "bookie" {
  count = length(local.bookie_sources)

  security_group_id            = aws_security_group.bookies.id
  referenced_security_group_id = local.bookie_sources[count.index]
  from_port                    = var.port
  to_port                      = var.port
  ip_protocol                  = "tcp"
  tags                         = var.tags
}

resource "aws_vpc_security_group_egress_rule" "bookies" {
  security_group_id = aws_security_group.bookies.id
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
  tags              = var.tags
}

data "aws_iam_policy_document" "ec2_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "bookie" {
  name_prefix        = "${var.name_prefix}-bookie-"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume.json
  tags               = var.tags
}

# bookie: the part of the catalog (pkg/catalog/dynamodb) it uses — its registration and
# heartbeat (HeartbeatBookie), and the catalog GC's reads of ledger metadata
# (GetLedger, --catalog-gc-interval).
data "aws_iam_policy_document" "bookie_code" {
  statement {
    sid       = "Catalog"
    actions   = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"]
    resources = [var.catalog_table_arn]
  }
}

resource "aws_iam_role_policy" "bookie_code" {
  name   = "sluice-bookie"
  role   = aws_iam_role.bookie.id
  policy = data.aws_iam_policy_document.bookie_code.json
}

# Session Manager instead of SSH keys, when asked for (AWS's managed policy).
resource "aws_iam_role_policy_attachment" "ssm" {
  count      = var.ssm_access ? 1 : 0
  role       = aws_iam_role.bookie.name
  policy_arn = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "bookie" {
  name_prefix = "${var.name_prefix}-bookie-"
  role        = aws_iam_role.bookie.name
  tags        = var.tags
}

resource "aws_launch_template" "bookie" {
  name_prefix   = "${var.name_prefix}-bookie-"
  image_id      = local.ami_id
  instance_type = var.instance_type

  iam_instance_profile {
    arn = aws_iam_instance_profile.bookie.arn
  }

  vpc_security_group_ids = [aws_security_group.bookies.id]

  # IMDSv2 only; the user data reads the instance's address from it.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  monitoring {
    enabled = true
  }

  user_data = base64encode(templatefile("${path.module}/bookie-user-data.sh.tftpl", {
    sluice_binary_url    = var.sluice_binary_url
    sluice_binary_sha256 = var.sluice_binary_sha256
    port                 = var.port
    args                 = join(" ", [for a in local.bookie_args : format("'%s'", replace(a, "'", "'\\''"))])
    region               = data.aws_region.current.name
  }))

  tag_specifications {
    resource_type = "instance"
    tags          = merge(var.tags, { Name = "${var.name_prefix}-bookie", "sluice:role" = "bookie" })
  }

  tags = var.tags
}

resource "aws_autoscaling_group" "bookies" {
  name_prefix = "${var.name_prefix}-bookies-"

  # Fixed size: a bookie is replaced deliberately, never by a scaling decision.
  min_size         = var.bookie_count
  max_size         = var.bookie_count
  desired_capacity = var.bookie_count

  # One subnet per availability zone; the group balances instances across them, so with
  # 3 zones and 3 bookies each zone holds one copy of every ledger.
  vpc_zone_identifier = var.subnet_ids

  health_check_type         = "EC2"
  health_check_grace_period = 300

  launch_template {
    id      = aws_launch_template.bookie.id
    version = aws_launch_template.bookie.latest_version
  }

  # For the observability module's "bookie down" alarm.
  metrics_granularity = "1Minute"
  enabled_metrics     = ["GroupDesiredCapacity", "GroupInServiceInstances"]

  # Rebalancing across zones would terminate a healthy bookie (and its data).
  suspended_processes = ["AZRebalance"]

  dynamic "tag" {
    for_each = merge(var.tags, { "sluice:role" = "bookie" })
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }
}
