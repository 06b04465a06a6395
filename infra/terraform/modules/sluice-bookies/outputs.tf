output "autoscaling_group_name" {
  description = "Name of the bookies' Auto Scaling group (the AutoScalingGroupName dimension of its metrics)."
  value       = aws_autoscaling_group.bookies.name
}

output "security_group_id" {
  description = "Security group of the bookies."
  value       = aws_security_group.bookies.id
}

output "role_name" {
  description = "IAM role of the bookie instances."
  value       = aws_iam_role.bookie.name
}

output "port" {
  description = "Bookie port."
  value       = var.port
}

output "bookie_count" {
  description = "Number of bookies the group keeps."
  value       = var.bookie_count
}
