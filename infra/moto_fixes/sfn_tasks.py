"""Step Functions' task tokens, tracked as AWS tracks them (patch 11 of moto_patches.py).

moto 5.2.5's default Step Functions backend accepts SendTaskSuccess, SendTaskFailure and
SendTaskHeartbeat and does nothing: no state machine runs, no token is checked. Its parser mode
(`moto/stepfunctions/parser`, switched on by `default_user_config["stepfunctions"]
["execute_state_machine"]`) runs a state machine for real, and a `.waitForTaskToken` task waits
for its token; but it answers a token only while its execution runs, a second answer is taken as
if it were the first, a token whose state timed out is `InvalidToken`, and a failure drops its
cause. Here, the parser mode is switched on and each token a task waits on is a record of its
own, so that the answers (`sfn_answers`) follow AWS's rules:

- a token is issued when a task state enters (`$$.Task.Token`); it looks like AWS's (a few
  hundred characters of base64), and names the task it was issued for;
- it closes when it is answered (SendTaskSuccess or SendTaskFailure), when its state times out
  (`TimeoutSeconds` since the wait began, or `HeartbeatSeconds` since the last heartbeat), or
  when its execution ends; an answer to a closed token is `TaskTimedOut` ("The task token has
  either expired or the task associated with the token has already been closed", the API
  reference's TaskTimedOut).

Two of the parser's gaps are filled too: an execution started without a name gets a generated
one, as on AWS (the parser named it `None`, so that every unnamed execution of a state machine
had the same ARN); and StopExecution ends an execution whose task waits on its token (the
parser marked it stopping and went on waiting; its status stayed RUNNING until the token was
answered; and once its wait was interrupted, the state's failure overwrote the stop, so that
it ended FAILED, where AWS says ABORTED).

The parser runs an execution in a thread of its own, and calls other services (SQS's
`sendMessage`) through boto3 with `http://localhost:MOTO_PORT` and made-up credentials: here it
calls this server, with the administrator's credentials (the state machine's execution role is
not checked: only the calls of Countersign's functions are), and waits for its turn at the lock
like any other request.
"""

from __future__ import annotations

import base64
import secrets
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

# The prefix of every token this server issues (after base64 decoding): a version byte and a
# name, so that a token of another origin is told apart (InvalidToken) from one of ours that
# names no task (TaskDoesNotExist).
_MAGIC = b"\x01\x00countersign-local-task\x00"
_ID_BYTES = 16
# AWS's tokens run to several hundred characters: so do these, so that a client that keeps or
# passes them on meets their real length.
_PADDING_BYTES = 420

# Where the parser's service calls go: set by moto_patches.install() from the server's port.
ENDPOINT = "http://127.0.0.1:5000"


def new_token() -> str:
    raw = _MAGIC + secrets.token_bytes(_ID_BYTES) + secrets.token_bytes(_PADDING_BYTES)
    return base64.b64encode(raw).decode()


def well_formed(token: str) -> bool:
    """A token this server could have issued (whether or not it did)."""
    try:
        raw = base64.b64decode(token, validate=True)
    except (ValueError, TypeError):
        return False
    return raw.startswith(_MAGIC) and len(raw) == len(_MAGIC) + _ID_BYTES + _PADDING_BYTES


@dataclass
class Task:
    """One task waiting on its token."""

    token: str
    endpoint: Any  # the parser's CallbackEndpoint
    execution_arn: str | None = None
    state_machine_arn: str | None = None
    state_name: str | None = None
    # time.monotonic() deadlines; None: none set (yet).
    timeout_at: float | None = None
    heartbeat_seconds: float | None = None
    heartbeat_at: float | None = None
    # waiting, answered, timed_out, closed (its execution ended)
    status: str = "waiting"
    answers: int = 0
    heartbeats: int = 0
    history: list[str] = field(default_factory=list)

    def expired(self, now: float) -> bool:
        if self.timeout_at is not None and now >= self.timeout_at:
            return True
        return self.heartbeat_at is not None and now >= self.heartbeat_at


class Tasks:
    """Every token issued in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_token: dict[str, Task] = {}

    def issued(self, token: str, endpoint: Any) -> None:
        with self.lock:
            self.by_token[token] = Task(token, endpoint)

    def waiting(self, token: str, execution_arn: str, state_machine_arn: str, state_name: str,
                timeout_seconds: float | None, heartbeat_seconds: float | None) -> None:
        now = time.monotonic()
        with self.lock:
            task = self.by_token.get(token)
            if task is None:
                return
            task.execution_arn, task.state_machine_arn, task.state_name = execution_arn, state_machine_arn, state_name
            if timeout_seconds:
                task.timeout_at = now + float(timeout_seconds)
            if heartbeat_seconds:
                task.heartbeat_seconds = float(heartbeat_seconds)
                task.heartbeat_at = now + float(heartbeat_seconds)

    def wait_ended(self, token: str, timed_out: bool) -> None:
        with self.lock:
            task = self.by_token.get(token)
            if task is not None and timed_out and task.status == "waiting":
                task.status = "timed_out"

    def close_execution(self, execution_arn: str) -> None:
        with self.lock:
            for task in self.by_token.values():
                if task.execution_arn == execution_arn and task.status == "waiting":
                    task.status = "closed"

    def get(self, token: str) -> Task | None:
        with self.lock:
            return self.by_token.get(token)


TASKS = Tasks()


# ---------------------------------------------------------------- the parser's hooks
def _stock(module: str, name: str) -> Any:
    __import__(module)
    return getattr(sys.modules[module], name)


_CALLBACK = "moto.stepfunctions.parser.asl.eval.callback.callback"
_SERVICE_CALLBACK = "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback"
_stock_add = _stock(_CALLBACK, "CallbackPoolManager").add
_stock_wait = _stock(_SERVICE_CALLBACK, "StateTaskServiceCallback")._eval_wait_for_task_token


def add(self: Any, callback_id: str) -> Any:
    """CallbackPoolManager.add: the token's endpoint, recorded."""
    endpoint = _stock_add(self, callback_id)
    TASKS.issued(callback_id, endpoint)
    return endpoint


def eval_wait_for_task_token(self: Any, env: Any, timeout_seconds: int, callback_endpoint: Any,
                             heartbeat_endpoint: Any) -> Any:
    """StateTaskServiceCallback._eval_wait_for_task_token: the wait's deadlines recorded before
    it begins, and its time-out after it ends."""
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackOutcomeTimedOut, HeartbeatTimedOut

    context = env.states.context_object.context_object_data
    heartbeat = getattr(heartbeat_endpoint, "_heartbeat_seconds", None) if heartbeat_endpoint is not None else None
    TASKS.waiting(
        callback_endpoint.callback_id,
        context["Execution"]["Id"],
        context["StateMachine"]["Id"],
        context["State"]["Name"],
        timeout_seconds,
        heartbeat,
    )
    outcome = _stock_wait(self, env, timeout_seconds, callback_endpoint, heartbeat_endpoint)
    TASKS.wait_ended(callback_endpoint.callback_id, isinstance(outcome, (CallbackOutcomeTimedOut, HeartbeatTimedOut)))
    return outcome


_stock_start = _stock("moto.stepfunctions.parser.models", "StepFunctionsParserBackend").start_execution
_stock_stop = _stock("moto.stepfunctions.parser.backend.execution", "Execution").stop


def start_execution(self: Any, state_machine_arn: str, name: str | None = None, execution_input: str | None = None,
                    trace_header: str | None = None) -> Any:
    """StepFunctionsParserBackend.start_execution: an unnamed execution named, as AWS names it
    (a UUID)."""
    return _stock_start(self, state_machine_arn, name or str(uuid.uuid4()), execution_input, trace_header)


def stop(self: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
    """Execution.stop: its tasks closed, and their waits interrupted, so that it ends."""
    TASKS.close_execution(self.exec_arn)
    _stock_stop(self, stop_date, error, cause)
    worker = self.exec_worker
    if worker is not None:
        for endpoint in list(worker.env.callback_pool_manager._pool.values()):
            endpoint.interrupt_all()


_stock_set_error = _stock("moto.stepfunctions.parser.asl.eval.environment", "Environment").set_error


def set_error(self: Any, error: Any) -> None:
    """Environment.set_error: a stopped execution stays stopped (ABORTED), whatever its
    interrupted state then raises."""
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    if isinstance(self._program_state, ProgramStopped):
        return
    _stock_set_error(self, error)


def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
    """The parser's client for a service it calls: this server, as the administrator."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        service,
        region_name=region,
        endpoint_url=ENDPOINT,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(parameter_validation=False, retries={"max_attempts": 0, "total_max_attempts": 1},
                      connect_timeout=10, read_timeout=60),
    )


def install_parser_hooks(install: Callable[[Any, str, Any], None]) -> None:
    """Switches the parser mode on and puts the hooks in place (`install(owner, name, value)`
    sets an attribute). The parser's modules each import boto_client_for by name: each one's is
    replaced."""
    from moto.core.config import default_user_config

    default_user_config.setdefault("stepfunctions", {})["execute_state_machine"] = True
    # Import the parser (and every task state's module) before replacing what they imported.
    import moto.stepfunctions.parser.models  # noqa: F401
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (  # noqa: F401
        state_task_service_factory,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils  # noqa: F401
    import moto.stepfunctions.parser.asl.eval.states as states
    from moto.stepfunctions.parser.asl.utils import boto_client

    install(states, "long_uid", new_token)
    install(_stock("moto.stepfunctions.parser.models", "StepFunctionsParserBackend"), "start_execution", start_execution)
    install(_stock("moto.stepfunctions.parser.backend.execution", "Execution"), "stop", stop)
    install(_stock("moto.stepfunctions.parser.asl.eval.environment", "Environment"), "set_error", set_error)
    install(_stock(_CALLBACK, "CallbackPoolManager"), "add", add)
    install(_stock(_SERVICE_CALLBACK, "StateTaskServiceCallback"), "_eval_wait_for_task_token", eval_wait_for_task_token)
    stock = boto_client.boto_client_for
    for name, module in list(sys.modules.items()):
        if name.startswith("moto.stepfunctions.parser") and getattr(module, "boto_client_for", None) is stock:
            install(module, "boto_client_for", boto_client_for)
