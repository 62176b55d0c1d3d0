#!/usr/bin/env bash
# Deploy vertex-dispatch for one config into its Google Cloud project (docs/deploy.md):
#   deploy/deploy.sh CONFIG.yaml [terraform apply options, e.g. -auto-approve]
# Prints the deploy plan, builds the source bundle with the config in it (validated again; a
# broken config builds nothing), then runs terraform init and apply in deploy/terraform/example
# with the variables the plan wrote. A changed config is deployed by running this again. Needs
# terraform and credentials (gcloud auth application-default login) for the config's project.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: deploy/deploy.sh CONFIG.yaml [terraform apply options]" >&2
  exit 2
fi
config="$(realpath "$1")"
shift

cd "$(dirname "${BASH_SOURCE[0]}")/.."
readonly ROOT=deploy/terraform/example
readonly TFVARS="$ROOT/vertex-dispatch.auto.tfvars.json"
readonly SOURCE_ZIP=build/vertex-dispatch-source.zip

command -v terraform >/dev/null || {
  echo "deploy: terraform is not installed (https://developer.hashicorp.com/terraform/install)" >&2
  exit 1
}
./dev setup
.venv/bin/vertex-dispatch deploy-plan --config "$config" --tfvars "$TFVARS" --source-zip "$SOURCE_ZIP"
.venv/bin/python deploy/bundle.py --config "$config" --zip "$SOURCE_ZIP"
terraform -chdir="$ROOT" init -input=false
terraform -chdir="$ROOT" apply "$@"
