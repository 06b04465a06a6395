# An example variables file for envs/aws (copy it, fill in, pass with -var-file).

region      = "us-east-1"
environment = "prod"
bucket_name = "sluice-segments-123456789012-us-east-1"

vpc_id             = "vpc-0123456789abcdef0"
private_subnet_ids = ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb", "subnet-0cccccccccccccccc"]
client_cidr_blocks = ["10.0.0.0/16"]

image                = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sluice:v0.1.0"
sluice_binary_url    = "https://example.com/sluice-linux-amd64"
sluice_binary_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
compactor_zip_path   = "build/compactor.zip"

# Keyspaces credentials (README: Keyspaces credentials).
cassandra_username            = "sluice-prod-keyspaces-at-123456789012"
cassandra_password_secret_arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sluice/keyspaces-AbCdEf"

trigger_function_arns = ["arn:aws:lambda:us-east-1:123456789012:function:orders-handler"]
alarm_emails          = ["oncall@example.com"]
