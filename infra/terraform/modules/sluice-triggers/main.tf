# sluice-triggers: what the fetch service needs to run function triggers (DESIGN.md 2.10):
# permission to invoke the functions the triggers name, and nothing else. The invocation
# layer (services/fetch/trigger) calls Lambda's Invoke API synchronously
# (RequestResponse), so the one action is lambda:InvokeFunction.
#
# A trigger names its function by name, partial ARN or ARN with an optional qualifier; the
# policy names the functions by ARN, each with and without a qualifier (":*"), so a
# trigger on an alias or a version works too. Creating, updating or deleting a trigger
# needs no AWS permission: triggers live in the catalog.

locals {
  function_resources = flatten([for arn in var.function_arns : [arn, "${arn}:*"]])
}

data "aws_iam_policy_document" "fetch_code" {
  statement {
    sid       = "InvokeTriggerFunctions"
    actions   = ["lambda:InvokeFunction"]
    resources = local.function_resources
  }
}

resource "aws_iam_policy" "invoke" {
  count = length(var.function_arns) == 0 ? 0 : 1

  name_prefix = "${var.name_prefix}-trigger-invoke-"
  description = "Sluice fetch: invoke the functions of the catalog's triggers"
  policy      = data.aws_iam_policy_document.fetch_code.json
  tags        = var.tags
}

resource "aws_iam_role_policy_attachment" "fetch" {
  count = length(var.function_arns) == 0 ? 0 : 1

  role       = var.fetch_role_name
  policy_arn = aws_iam_policy.invoke[0].arn
}
