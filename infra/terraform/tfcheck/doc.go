// Package tfcheck holds the Terraform in infra/terraform against the code it
// deploys. No Terraform provider can be downloaded where CI runs, so
// `terraform validate` and `plan` cannot run there; these tests are what
// checks the configuration instead, hermetically (no network, no services):
//
//   - every .tf and .tfvars file parses (HCL native syntax, hashicorp/hcl/v2),
//     and every templatefile() template uses exactly the variables passed;
//   - every module variable has a description and is used, every output has a
//     description, and every argument an environment passes to a module is one
//     of its variables (and every variable without a default is passed);
//   - the DynamoDB catalog table of modules/sluice-storage has the keys,
//     attribute definitions, indexes, TTL and billing mode of
//     pkg/catalog/dynamodb.TableDefinition;
//   - the Keyspaces tables of modules/sluice-metadata are the tables the CQL
//     migrations in pkg/bookkeeping/cassandra/schema build (names, columns,
//     types, primary keys), with TTL and client-side timestamps on exactly
//     the tables whose statements need them;
//   - every IAM role's "code" policy grants exactly the AWS actions its
//     process's code calls: the Go sources are type-checked and searched for
//     AWS SDK v2 operation inputs (dynamodb.GetItemInput{...}), DynamoDB
//     transaction members, and gocloud.dev/blob Bucket methods (the S3
//     driver's calls) — in the catalog only those of the functions the
//     role's code reaches (reach_test.go), elsewhere every call of every
//     package the role's command imports — and the result must equal both
//     the table of calls in
//     iam_test.go and the policy documents' actions;
//   - every flag passed to sluice ingest, fetch and bookie is one that
//     command's --help lists (the binary is built from the tree), and every
//     SLUICE_* environment variable set is one the code reads;
//   - the alarms on the compactor function's metrics name metrics it writes,
//     and the scrape jobs the repository's alerting rules select exist.
//
// `terraform fmt -check` runs in `task lint` where a terraform binary is
// installed.
//
// Files: hcl_test.go (loading modules, evaluating literals), terraform_test.go
// (parsing, templates, variables, module calls), catalog_test.go,
// keyspaces_test.go, iam_test.go (the role table and the code scanner),
// reach_test.go (which catalog functions a role reaches),
// flags_test.go (flags and environment variables), alarms_test.go.
package tfcheck
