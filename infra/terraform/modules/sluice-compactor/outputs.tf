output "function_name" {
  description = "Name of the compactor function (the FunctionName dimension of its metrics)."
  value       = aws_lambda_function.compactor.function_name
}

output "function_arn" {
  description = "ARN of the compactor function."
  value       = aws_lambda_function.compactor.arn
}

output "security_group_id" {
  description = "Security group of the function: the bookies admit it on their port."
  value       = aws_security_group.compactor.id
}

output "role_name" {
  description = "IAM role of the function."
  value       = aws_iam_role.compactor.name
}
