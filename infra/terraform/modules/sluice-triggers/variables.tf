# Inputs of the sluice-triggers module.

variable "name_prefix" {
  description = "Prefix of the name of the IAM policy this module creates."
  type        = string
  default     = "sluice"
}

variable "fetch_role_name" {
  description = "Name of the fetch service's task role (sluice-services' task_role_names[\"fetch\"]); the invoke policy is attached to it."
  type        = string
}

variable "function_arns" {
  description = "Unqualified ARNs of the Lambda functions triggers may invoke. Empty: no policy, and a trigger's invocations are refused (its partitions back off, and DescribeTrigger says why)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.function_arns : can(regex("^arn:[^:]+:lambda:[^:]+:[0-9]{12}:function:[A-Za-z0-9_-]+$", a))])
    error_message = "function_arns must be unqualified Lambda function ARNs (arn:aws:lambda:REGION:ACCOUNT:function:NAME)."
  }
}

variable "tags" {
  description = "Tags applied to every resource this module creates (in addition to any provider default_tags)."
  type        = map(string)
  default     = {}
}
