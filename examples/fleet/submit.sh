#!/bin/sh
# Starts N workers of the fleet on AWS Batch (docs/fleet.md): an array job whose children all run the same
# command and join one run; the state is in PostgreSQL (the URL from Secrets Manager), the results in the
# bucket the job role may write. The image is mediabatch with the manifest built in:
#
#   FROM ghcr.io/my-org/mediabatch:0.1.0
#   COPY examples/campaign.yaml /manifest/campaign.yaml
#
# No volume: a child lost with its host loses nothing paid. Run again to add workers to an unfinished run.
set -eu
WORKERS=${WORKERS:-10}
aws batch register-job-definition --cli-input-json file://examples/fleet/aws-batch-job-definition.json
aws batch submit-job \
  --job-name mediabatch-fleet \
  --job-queue "${JOB_QUEUE:-mediabatch}" \
  --job-definition mediabatch-fleet-worker \
  --array-properties "size=$WORKERS"
