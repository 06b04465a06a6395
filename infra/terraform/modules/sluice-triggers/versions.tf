terraform {
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.40+: NLB security groups, Keyspaces client-side timestamps.
      version = "~> 5.40"
    }
  }
}
