variable "endpoint" {
  description = "Base URL of the local AWS emulator (moto or LocalStack). localstack/moto.sh listens on 127.0.0.1:$SLUICE_MOTO_PORT, 4566 by default."
  type        = string
  default     = "http://127.0.0.1:4566"
}

variable "bucket_name" {
  description = "Segment bucket name on the emulator."
  type        = string
  default     = "sluice-segments"
}

variable "table_name" {
  description = "Catalog table name on the emulator."
  type        = string
  default     = "sluice-catalog"
}

variable "cassandra_hosts" {
  description = "Contact points of the local Cassandra (localstack/cassandra.sh listens on 127.0.0.1:$SLUICE_CASSANDRA_PORT, 9042 by default)."
  type        = list(string)
  default     = ["127.0.0.1:9042"]
}
