# sluice-metadata: where the bookkeeping lives (DESIGN.md 2.5) — consumer groups, partition
# leases, committed offsets, producer ids and transaction state, in Cassandra.
#
# Two ways, chosen by var.cassandra_hosts:
#
#   - empty (the default): Amazon Keyspaces. This module creates the keyspace, every table
#     of the schema, and an IAM user whose service-specific credentials the services log in
#     with (the Cassandra driver authenticates with a user name and password, not with the
#     task's role). The services reach it over TLS on port 9142.
#   - a list of host[:port]: a self-managed Cassandra (4.1 or later). The module creates
#     nothing and passes the hosts through; the services create the keyspace and apply the
#     schema themselves at start-up, as in development.
#
# The tables below are the schema the binary's migrations build
# (pkg/bookkeeping/cassandra/schema/v<N>/*.cql, applied in order, plus the schema_version
# table the migrator keeps, pkg/bookkeeping/cassandra/schema.go). The services still run
# the migrations at start-up; against tables that already match, every statement is a
# no-op (CREATE TABLE IF NOT EXISTS, ALTER TABLE ... ADD IF NOT EXISTS). tfcheck's
# TestKeyspacesTablesMatchMigrations fails when a migration adds a table or a column that
# is not here.

data "aws_region" "current" {}
data "aws_partition" "current" {}
data "aws_caller_identity" "current" {}

locals {
  keyspaces = length(var.cassandra_hosts) == 0

  # Amazon Keyspaces' service endpoint (TLS only).
  keyspaces_endpoint = "cassandra.${data.aws_region.current.name}.${data.aws_partition.current.dns_suffix}:9142"

  # Every table of the schema: columns (name = CQL type), the partition key columns and the
  # clustering columns (ascending), in key order. ttl: written with USING TTL, which
  # Keyspaces accepts only on tables with TTL enabled. client_side_timestamps: written with
  # USING TIMESTAMP or read with WRITETIME, which Keyspaces accepts only with client-side
  # timestamps enabled. (pkg/bookkeeping/cassandra/members.go: a member row expires with its
  # session timeout, and a heartbeat rewrites it at the read row's write time + 1 µs.)
  tables = {
    # v1, v3 (topics, heartbeat_at)
    group_members = {
      columns = {
        group_id           = "text"
        member_id          = "text"
        client_info        = "text"
        session_timeout_ms = "bigint"
        topics             = "frozen<list<text>>"
        heartbeat_at       = "timestamp"
      }
      partition_key          = ["group_id"]
      clustering_key         = ["member_id"]
      ttl                    = true
      client_side_timestamps = true
    }
    # v1, v4 (committed_topic_id)
    consumer_partitions = {
      columns = {
        group_id           = "text"
        topic              = "text"
        partition_id       = "int"
        owner              = "text"
        epoch              = "bigint"
        committed_offset   = "bigint"
        metadata           = "text"
        commit_epoch       = "bigint"
        committed_topic_id = "text"
      }
      partition_key          = ["group_id", "topic"]
      clustering_key         = ["partition_id"]
      ttl                    = false
      client_side_timestamps = false
    }
    # v1
    group_topics = {
      columns = {
        group_id = "text"
        topic    = "text"
      }
      partition_key          = ["group_id"]
      clustering_key         = ["topic"]
      ttl                    = false
      client_side_timestamps = false
    }
    # v2
    producer_id_blocks = {
      columns = {
        name    = "text"
        next_id = "bigint"
      }
      partition_key          = ["name"]
      clustering_key         = []
      ttl                    = false
      client_side_timestamps = false
    }
    # v2, v5 (version ... groups), v6 (offsets), v7 (prev_producer_id); unused from v8
    transactional_producers = {
      columns = {
        transactional_id      = "text"
        producer_id           = "bigint"
        epoch                 = "int"
        version               = "bigint"
        status                = "int"
        timeout_ms            = "bigint"
        deadline              = "timestamp"
        bumped_by_coordinator = "boolean"
        partitions            = "frozen<list<frozen<tuple<text, int>>>>"
        groups                = "frozen<list<text>>"
        offsets               = "frozen<list<frozen<tuple<text, text, text, int, bigint>>>>"
        prev_producer_id      = "bigint"
      }
      partition_key          = ["transactional_id"]
      clustering_key         = []
      ttl                    = false
      client_side_timestamps = false
    }
    # v8: transactional_producers' records, partitioned by bucket (the services' migration
    # copies the rows and writes txn_buckets into keyspace_settings at start-up); v9 (next_partitions,
    # ended, timed_out)
    transactions = {
      columns = {
        bucket                = "int"
        transactional_id      = "text"
        producer_id           = "bigint"
        epoch                 = "int"
        version               = "bigint"
        status                = "int"
        timeout_ms            = "bigint"
        deadline              = "timestamp"
        bumped_by_coordinator = "boolean"
        partitions            = "frozen<list<frozen<tuple<text, int>>>>"
        groups                = "frozen<list<text>>"
        offsets               = "frozen<list<frozen<tuple<text, text, text, int, bigint>>>>"
        prev_producer_id      = "bigint"
        next_partitions       = "frozen<list<frozen<tuple<text, int>>>>"
        ended                 = "int"
        timed_out             = "boolean"
      }
      partition_key          = ["bucket"]
      clustering_key         = ["transactional_id"]
      ttl                    = false
      client_side_timestamps = false
    }
    # v8
    keyspace_settings = {
      columns = {
        name  = "text"
        value = "bigint"
      }
      partition_key          = ["name"]
      clustering_key         = []
      ttl                    = false
      client_side_timestamps = false
    }
    # v3
    consumer_groups = {
      columns = {
        bucket   = "int"
        group_id = "text"
      }
      partition_key          = ["bucket"]
      clustering_key         = ["group_id"]
      ttl                    = false
      client_side_timestamps = false
    }
    # the migrator's own record of applied versions (schema.go)
    schema_version = {
      columns = {
        version     = "int"
        description = "text"
        applied_at  = "timestamp"
      }
      partition_key          = ["version"]
      clustering_key         = []
      ttl                    = false
      client_side_timestamps = false
    }
  }
}

resource "aws_keyspaces_keyspace" "this" {
  count = local.keyspaces ? 1 : 0

  name = var.keyspace_name
  tags = var.tags
}

resource "aws_keyspaces_table" "this" {
  for_each = local.keyspaces ? local.tables : {}

  keyspace_name = aws_keyspaces_keyspace.this[0].name
  table_name    = each.key

  schema_definition {
    dynamic "column" {
      for_each = each.value.columns
      content {
        name = column.key
        type = column.value
      }
    }

    dynamic "partition_key" {
      for_each = each.value.partition_key
      content {
        name = partition_key.value
      }
    }

    dynamic "clustering_key" {
      for_each = each.value.clustering_key
      content {
        name     = clustering_key.value
        order_by = "ASC"
      }
    }
  }

  # On-demand: the bookkeeping's load follows the consumers (commits, heartbeats), and is
  # spiky at rebalances.
  capacity_specification {
    throughput_mode = "PAY_PER_REQUEST"
  }

  point_in_time_recovery {
    status = var.point_in_time_recovery ? "ENABLED" : "DISABLED"
  }

  dynamic "ttl" {
    for_each = each.value.ttl ? [1] : []
    content {
      status = "ENABLED"
    }
  }

  dynamic "client_side_timestamps" {
    for_each = each.value.client_side_timestamps ? [1] : []
    content {
      status = "ENABLED"
    }
  }

  tags = var.tags
}

# The services log in to Keyspaces as this IAM user, with a service-specific credential
# (user name and password) that the operator creates and stores in Secrets Manager
# (README: "Keyspaces credentials"). Terraform does not create the credential, so the
# password never lands in the state.
resource "aws_iam_user" "keyspaces" {
  count = local.keyspaces ? 1 : 0

  name = "${var.name_prefix}-keyspaces"
  tags = var.tags
}

locals {
  keyspace_arn = "arn:${data.aws_partition.current.partition}:cassandra:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:/keyspace/${var.keyspace_name}/"
  # The driver reads the system keyspaces (peers, schema) on connect.
  system_keyspaces_arn = "arn:${data.aws_partition.current.partition}:cassandra:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:/keyspace/system*"
}

# What the CQL the services run needs: reads and writes (Select, Modify), and at start-up
# CREATE KEYSPACE/TABLE IF NOT EXISTS and ALTER TABLE ... ADD IF NOT EXISTS (Create,
# Alter), which are no-ops on this schema but are still authorized.
data "aws_iam_policy_document" "keyspaces" {
  statement {
    sid       = "Bookkeeping"
    actions   = ["cassandra:Select", "cassandra:Modify", "cassandra:Create", "cassandra:Alter"]
    resources = [local.keyspace_arn, "${local.keyspace_arn}table/*"]
  }

  statement {
    sid       = "SystemKeyspaces"
    actions   = ["cassandra:Select"]
    resources = [local.system_keyspaces_arn]
  }
}

resource "aws_iam_user_policy" "keyspaces" {
  count = local.keyspaces ? 1 : 0

  name   = "sluice-bookkeeping"
  user   = aws_iam_user.keyspaces[0].name
  policy = data.aws_iam_policy_document.keyspaces.json
}
