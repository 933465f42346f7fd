"""The fixes to moto that infra/moto_patches.py installs, one module per concern, each with the
whole of its reasons (what AWS does, with its documentation, and what moto 5.2.5 did):

- `journal`: what a write changed, for a rollback that keeps the tables (patches 1 and 5).
- `transactions`: TransactWriteItems rolled back by the journal, at most 4 MB (patches 1, 9).
- `client_tokens`: TransactWriteItems applied once per ClientRequestToken (patch 8).
- `batch_write`: BatchWriteItem's whole-batch checks, all or nothing (patch 5).
- `streams`: shard iterators that expire (patch 2).
- `sqs`: SQS's characters, sizes and costs (patches 3, 6, 7).
- `indexes`: an added global index backfills before it can be read (patch 10).
- `dispatch`: the dispatcher's host lookup, memoised (patch 4).
- `expressions`: an expression is at most 4 KB (patch 13).
- `secrets_manager`: Secrets Manager's limits on a value and a batch read.
- `sfn_tasks`: Step Functions' state machines run (moto's parser mode), each task token tracked
  (patch 11).
- `sfn_answers`: SendTaskSuccess, SendTaskFailure and SendTaskHeartbeat with AWS's rules
  (patch 12).
- `ses`: SES v2 SendEmail keeps each email whole, for the control API (patch 14).

Importing a module patches nothing: `moto_patches.install()` does, after checking moto's
version. Each module keeps moto's own functions (`_stock_…`) as they are when it is imported.
"""
