# Inputs of the sluice-metadata module.

variable "cassandra_hosts" {
  description = "Contact points (host or host:port) of a self-managed Cassandra 4.1+ cluster. Empty (the default) means Amazon Keyspaces: this module then creates the keyspace, its tables and the IAM user the services log in as. Non-empty: the module creates nothing and outputs these hosts."
  type        = list(string)
  default     = []
}

variable "keyspace_name" {
  description = "Keyspace holding every bookkeeping table (the services' --keyspace). Lower-case letters, digits and _, starting with a letter, at most 48 characters (pkg/bookkeeping/cassandra's rule)."
  type        = string
  default     = "sluice"

  validation {
    condition     = can(regex("^[a-z][a-z0-9_]{0,47}$", var.keyspace_name))
    error_message = "keyspace_name: lower-case letters, digits and _, starting with a letter, at most 48 characters."
  }
}

variable "name_prefix" {
  description = "Prefix of the names of the IAM user this module creates (Keyspaces only)."
  type        = string
  default     = "sluice"
}

variable "point_in_time_recovery" {
  description = "Turn on Keyspaces point-in-time recovery (continuous backups) on every table (Keyspaces only)."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags applied to every resource this module creates (in addition to any provider default_tags)."
  type        = map(string)
  default     = {}
}
