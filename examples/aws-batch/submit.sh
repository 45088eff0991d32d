#!/bin/sh
# Submits examples/campaign.yaml as an AWS Batch array job of 3 shards (docs/shards.md).
# AWS_BATCH_JOB_ARRAY_INDEX (0, 1, 2) is read by --shard-from-env; the array size and MEDIABATCH_SHARD_COUNT
# must be equal. The run id is fixed at submission, so every shard (and every retry) names the same run.
# The results bucket is reached with the job role; the API key comes from Secrets Manager.
set -eu
SHARDS=${SHARDS:-3}
RUN_ID=${RUN_ID:-campaign-$(date -u +%Y-%m-%d)}
aws batch register-job-definition --cli-input-json file://examples/aws-batch/job-definition.json >/dev/null
aws batch submit-job \
  --job-name "mediabatch-$RUN_ID" \
  --job-queue "${JOB_QUEUE:-mediabatch}" \
  --job-definition mediabatch-shards \
  --array-properties "size=$SHARDS" \
  --container-overrides "environment=[{name=MEDIABATCH_SHARD_COUNT,value=$SHARDS},{name=MEDIABATCH_RUN_ID,value=$RUN_ID}]"
# When the array job is done:
#   mediabatch report --merge "s3://my-results-bucket/mediabatch/$RUN_ID"
