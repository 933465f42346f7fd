"""Fixes to moto 5.2.5 that the local stack needs to stay live and fast under real use, and to
refuse what AWS refuses where our code depends on it. Each is in a module of `moto_fixes/`
beside this file, with the whole of its reasons (what AWS does, with its documentation, and what
moto did); here, the list and `install()`, which puts them in place.

1. A transaction rollback that keeps the tables: a journal of the items a transaction wrote,
   instead of deep copies of every table it touched (`transactions`, `journal`).
2. Shard iterators that expire, as on AWS (15 minutes) (`streams`).
3. SQS without quadratic costs (`sqs`).
4. The host-to-service lookup of moto's dispatcher, memoised (`dispatch`).
5. BatchWriteItem refuses two requests for one item, more than 25 requests and an item over
   400 KB, before writing anything (`batch_write`).
6. SQS refuses the characters XML does not allow (`sqs`).
7. SQS sizes in bytes, at 256 KiB (`sqs`).
8. TransactWriteItems keeps its ClientRequestToken (`client_tokens`).
9. A transaction's items may not exceed 4 MB together (`transactions`).
10. A global secondary index added to a table backfills before it can be read (`indexes`).
11. Step Functions runs state machines (moto's parser mode), and tracks each task token: its
    task, its deadlines, whether it is still open (`sfn_tasks`).
12. SendTaskSuccess, SendTaskFailure and SendTaskHeartbeat answer as AWS does (`sfn_answers`).
13. An expression is at most 4 KB (`expressions`).
14. SES v2 SendEmail keeps each email whole (its text and HTML parts) for the control API, and
    answers injected faults (`ses`).
15. KMS Sign signs a `DIGEST` as it is, and refuses a message over 4096 bytes or a digest of
    the wrong length (`kms`).

Besides: Secrets Manager refuses a SecretString over 65,536 characters and a
BatchGetSecretValue of more than 20 secrets (`secrets_manager`).

Written against moto 5.2.5 (the transaction in `moto_fixes/transactions.py` is its own, with
the rollback replaced): `install()` refuses any other version, loudly, rather than patch code it
has not read.
"""

import os

import moto
import moto.sqs.models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import GlobalSecondaryIndex
from moto.dynamodb.responses import DynamoHandler
from moto.dynamodbstreams.models import DynamoDBStreamsBackend
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.kms.responses import KmsResponse
from moto.secretsmanager.responses import SecretsManagerResponse
from moto.sesv2.responses import SESV2Response
from moto.sqs.models import Message, SQSBackend
from moto.sqs.responses import SQSResponse
from moto.stepfunctions.responses import StepFunctionResponse

from moto_fixes import (
    batch_write,
    client_tokens,
    dispatch,
    expressions,
    indexes,
    kms,
    secrets_manager,
    ses,
    sfn_answers,
    sfn_tasks,
    sqs,
    streams,
    transactions,
)

MOTO_VERSION = "5.2.5"


def install(port: int | None = None) -> None:
    """Patches moto in this process. Refuses any moto but the one this was written against.
    `port`: the server's, where Step Functions' state machines call other services."""
    if moto.__version__ != MOTO_VERSION:
        raise SystemExit(
            f"infra/moto_patches.py is written against moto {MOTO_VERSION}, but moto "
            f"{moto.__version__} is installed: pin moto[server]=={MOTO_VERSION} in "
            "infra/requirements.txt, or port the patch to the new version's "
            "transact_write_items (and its tests in infra/tests/)."
        )
    DynamoDBBackend.transact_write_items = transactions.transact_write_items  # type: ignore[method-assign]
    DynamoDBStreamsBackend.get_shard_iterator = streams.get_shard_iterator  # type: ignore[method-assign]
    DynamoDBStreamsBackend.get_records = streams.get_records  # type: ignore[method-assign]
    SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        sqs.is_message_valid_based_on_retention_period
    )
    Message.visible = property(sqs._visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(sqs._delayed)  # type: ignore[method-assign,assignment]
    DomainDispatcherApplication.get_backend_for_host = dispatch.get_backend_for_host  # type: ignore[method-assign]
    DynamoHandler.batch_write_item = batch_write.batch_write_item  # type: ignore[method-assign]
    DynamoHandler.call_action = expressions.call_action  # type: ignore[method-assign]
    # The module's own setting, read by its functions when they run.
    indexes.BACKFILL_SECONDS = float(os.environ.get("MOTO_BACKFILL_SECONDS", indexes.BACKFILL_SECONDS))
    DynamoDBBackend.update_table_global_indexes = indexes.update_table_global_indexes  # type: ignore[method-assign]
    DynamoDBBackend.query = indexes.query  # type: ignore[method-assign]
    GlobalSecondaryIndex.describe = indexes.describe_global_index  # type: ignore[method-assign]
    client_tokens.TOKEN_WINDOW_SECONDS = float(
        os.environ.get("MOTO_TOKEN_WINDOW_SECONDS", client_tokens.TOKEN_WINDOW_SECONDS)
    )
    DynamoHandler.transact_write_items = client_tokens.transact_write_items_once  # type: ignore[method-assign]
    SQSResponse.send_message = sqs.send_message  # type: ignore[method-assign]
    for name in ("create_secret", "put_secret_value", "update_secret"):
        setattr(
            SecretsManagerResponse,
            name,
            secrets_manager._secret_string_checked(getattr(SecretsManagerResponse, name)),
        )
    SecretsManagerResponse.batch_get_secret_value = secrets_manager.batch_get_secret_value  # type: ignore[method-assign]
    SQSResponse.send_message_batch = sqs.send_message_batch  # type: ignore[method-assign]
    # The default MaximumMessageSize of a new queue (moto reads it when creating one).
    moto.sqs.models.MAXIMUM_MESSAGE_LENGTH = sqs.SQS_MESSAGE_MAX_BYTES  # type: ignore[misc]
    # 11, 12: Step Functions' state machines run, and their task tokens are AWS's.
    if port is not None:
        sfn_tasks.ENDPOINT = f"http://127.0.0.1:{port}"
    sfn_tasks.install_parser_hooks(setattr)
    StepFunctionResponse.send_task_success = sfn_answers.send_task_success  # type: ignore[method-assign]
    StepFunctionResponse.send_task_failure = sfn_answers.send_task_failure  # type: ignore[method-assign]
    StepFunctionResponse.send_task_heartbeat = sfn_answers.send_task_heartbeat  # type: ignore[method-assign]
    # 15: KMS Sign's MessageType and sizes.
    if not getattr(KmsResponse.sign, "_countersign", False):
        KmsResponse.sign = kms.sign(KmsResponse.sign)  # type: ignore[method-assign]
    # 14: what SES sent, whole.
    if not getattr(SESV2Response.send_email, "_countersign", False):
        patched = ses.checked(SESV2Response.send_email)
        patched._countersign = True  # type: ignore[attr-defined]
        SESV2Response.send_email = patched  # type: ignore[method-assign]
