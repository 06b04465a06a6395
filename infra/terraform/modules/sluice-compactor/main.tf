# sluice-compactor: the compactor (DESIGN.md 2.9) as an AWS Lambda function run on a
# schedule — services/compactor/lambda, one bounded pass (compactor.Pass) per invocation:
# offload sealed ledgers to segment objects, retention, key compaction, orphan sweeps,
# re-replication of lost bookies' ledgers.
#
# Build the function's zip (README: the compactor function):
#
#   CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap ./services/compactor/lambda
#   zip compactor.zip bootstrap
#
# It runs in the VPC, because it reads ledgers from the bookies and rebuilds copies on
# them. Reserved concurrency 1: two passes at once are safe (every catalog change is a
# compare-and-set) but do duplicate work.

locals {
  environment = merge(
    {
      SLUICE_CATALOG_TABLE = var.catalog_table_name
      SLUICE_OBJECTS       = var.objects_url
      # A pass ends before the function's timeout, so it reports instead of being killed.
      SLUICE_COMPACTOR_PASS_TIMEOUT = "${var.timeout_seconds - 30}s"
    },
    var.environment,
  )
}

resource "aws_security_group" "compactor" {
  name_prefix = "${var.name_prefix}-compactor-"
  description = "Sluice compactor function (reaches bookies, DynamoDB, S3)"
  vpc_id      = var.vpc_id
  tags        = var.tags

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_egress_rule" "compactor" {
  security_group_id = aws_security_group.compactor.id
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
  tags              = var.tags
}

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "compactor" {
  name_prefix        = "${var.name_prefix}-compactor-"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
  tags               = var.tags
}

# compactor: the catalog (pkg/catalog/dynamodb), and the segment objects it writes,
# verifies, lists and deletes (services/compactor through gocloud.dev/blob's S3 driver).
# A multipart upload that fails is aborted (AbortMultipartUpload). ListBucket also makes
# a missing key answer 404, not 403 (objstore.IsNotFound).
data "aws_iam_policy_document" "compactor_code" {
  statement {
    sid = "Catalog"
    actions = [
      "dynamodb:BatchGetItem",
      "dynamodb:BatchWriteItem",
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
    actions   = ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject"]
    resources = ["${var.bucket_arn}/*"]
  }

  statement {
    sid       = "SegmentBucket"
    actions   = ["s3:ListBucket"]
    resources = [var.bucket_arn]
  }
}

resource "aws_iam_role_policy" "compactor_code" {
  name   = "sluice-compactor"
  role   = aws_iam_role.compactor.id
  policy = data.aws_iam_policy_document.compactor_code.json
}

# Lambda's own needs, not the code's: its logs, and the network interfaces of a function
# in a VPC (AWS's managed policy).
resource "aws_iam_role_policy_attachment" "vpc_access" {
  role       = aws_iam_role.compactor.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
}

resource "aws_cloudwatch_log_group" "compactor" {
  name              = "/aws/lambda/${var.function_name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_lambda_function" "compactor" {
  function_name = var.function_name
  description   = "Sluice compactor: one pass per scheduled invocation (services/compactor/lambda)"
  role          = aws_iam_role.compactor.arn

  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = var.zip_path
  source_code_hash = filebase64sha256(var.zip_path)

  memory_size                    = var.memory_mb
  timeout                        = var.timeout_seconds
  reserved_concurrent_executions = 1

  vpc_config {
    subnet_ids         = var.subnet_ids
    security_group_ids = [aws_security_group.compactor.id]
  }

  environment {
    variables = local.environment
  }

  depends_on = [aws_cloudwatch_log_group.compactor, aws_iam_role_policy_attachment.vpc_access]
  tags       = var.tags
}

# A failed pass is not retried by Lambda: the next scheduled one repairs whatever the
# failed one left (DESIGN.md 2.9).
resource "aws_lambda_function_event_invoke_config" "compactor" {
  function_name          = aws_lambda_function.compactor.function_name
  maximum_retry_attempts = 0
}

resource "aws_cloudwatch_event_rule" "schedule" {
  name                = "${var.function_name}-schedule"
  description         = "Runs a Sluice compactor pass"
  schedule_expression = var.schedule_expression
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "schedule" {
  rule = aws_cloudwatch_event_rule.schedule.name
  arn  = aws_lambda_function.compactor.arn
}

resource "aws_lambda_permission" "schedule" {
  statement_id  = "AllowEventBridgeSchedule"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.compactor.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.schedule.arn
}
