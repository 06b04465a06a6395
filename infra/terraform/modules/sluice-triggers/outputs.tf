output "policy_arn" {
  description = "ARN of the invoke policy attached to the fetch role; null when function_arns is empty."
  value       = length(var.function_arns) == 0 ? null : aws_iam_policy.invoke[0].arn
}
