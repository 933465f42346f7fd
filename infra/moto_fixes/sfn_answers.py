"""SendTaskSuccess, SendTaskFailure and SendTaskHeartbeat as AWS answers them (patch 12 of
moto_patches.py), on the tokens `sfn_tasks` tracks.

The rules, from the Step Functions API reference (API_SendTaskSuccess.html,
API_SendTaskFailure.html, API_SendTaskHeartbeat.html, and the shapes of the service model that
botocore ships), each tested in infra/tests/test_sfn_tasks.py:

- `taskToken` is 1 to 2,048 characters, `output` at most 262,144 bytes (UTF-8), `error` at most
  256 characters and `cause` at most 32,768: otherwise `ValidationException` ("1 validation
  error detected: ..."), as for every length constraint of the service's model.
- `output` must be JSON: otherwise `InvalidOutput`.
- A token that is not one this service issues (not base64, or not of its form) is
  `InvalidToken` ("The provided token is not valid").
- A token of that form that names no task (issued by another process, or made up) is
  `TaskDoesNotExist`.
- A token whose task is closed — answered already, or its execution ended (succeeded, failed,
  stopped, timed out) — is `TaskTimedOut`, which the reference defines as "The task token has
  either expired or the task associated with the token has already been closed"; so is a token
  whose state's `TimeoutSeconds` (since the wait began) or `HeartbeatSeconds` (since the last
  heartbeat) has passed.
- SendTaskFailure passes `error` and `cause` on (moto dropped the cause): the execution fails
  with them unless the state catches the error.
- SendTaskHeartbeat resets the heartbeat clock of a task with `HeartbeatSeconds`; the task's
  `TimeoutSeconds` still counts from the start of its wait, whatever the heartbeats.

Faults injected through the control API (`local_resume/faults.py`: `ThrottlingException`,
`ServiceUnavailable`) are answered first, so that a client's retries can be tested.
"""

from __future__ import annotations

import json
import time
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.core.responses import EmptyResult

from local_resume import faults
from moto_fixes.sfn_tasks import TASKS, well_formed

TOKEN_MAX = 2048
OUTPUT_MAX_BYTES = 262144
ERROR_MAX = 256
CAUSE_MAX = 32768


def _error(code: str, message: str, status: int = 400) -> JsonRESTError:
    error = JsonRESTError(code, message)
    error.code = status
    return error


def _validation(field: str, detail: str) -> JsonRESTError:
    return _error("ValidationException",
                  f"1 validation error detected: Value at '{field}' failed to satisfy constraint: {detail}")


def _check_length(field: str, value: Any, minimum: int, maximum: int, size: int | None = None) -> None:
    if value is None:
        if minimum:
            raise _error("ValidationException",
                         f"1 validation error detected: Value null at '{field}' failed to satisfy constraint: "
                         "Member must not be null")
        return
    length = len(value) if size is None else size
    if length < minimum:
        raise _validation(field, f"Member must have length greater than or equal to {minimum}")
    if length > maximum:
        raise _validation(field, f"Member must have length less than or equal to {maximum}")


def _injected(operation: str, token: str | None) -> None:
    fault = faults.take(operation, token)
    if fault is not None:
        code, status, message = fault
        raise _error(code, message, status)


def _execution_running(backend: Any, execution_arn: str | None) -> bool:
    if execution_arn is None:
        return True
    try:
        execution = backend.describe_execution(execution_arn)
    except Exception:  # noqa: BLE001 - gone: not running
        return False
    status = getattr(execution, "exec_status", None)
    return getattr(status, "value", status) == "RUNNING"


def _open_task(backend: Any, token: str) -> Any:
    """The task `token` names, still open; or AWS's error for it."""
    if not well_formed(token):
        raise _error("InvalidToken", "Invalid Token: 'The provided token is not valid'")
    task = TASKS.get(token)
    if task is None:
        raise _error("TaskDoesNotExist", "Task Does Not Exist: 'Provided task does not exist'")
    with TASKS.lock:
        if task.status == "waiting" and task.expired(time.monotonic()):
            task.status = "timed_out"
    if task.status == "waiting" and not _execution_running(backend, task.execution_arn):
        with TASKS.lock:
            task.status = "closed"
    if task.status == "timed_out":
        raise _error("TaskTimedOut", "Task Timed Out: 'The task token has expired'")
    if task.status != "waiting":
        raise _error("TaskTimedOut", "Task Timed Out: 'Provided task does not exist anymore'")
    return task


def _answer(task: Any, outcome: Any) -> None:
    with TASKS.lock:
        if task.status != "waiting":
            raise _error("TaskTimedOut", "Task Timed Out: 'Provided task does not exist anymore'")
        task.status = "answered"
        task.answers += 1
    task.endpoint.notify(outcome=outcome)


def send_task_success(self: Any) -> EmptyResult:
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackOutcomeSuccess

    token = self._get_param("taskToken")
    output = self._get_param("output")
    _check_length("taskToken", token, 1, TOKEN_MAX)
    _check_length("output", output, 1, OUTPUT_MAX_BYTES, None if output is None else len(output.encode("utf-8")))
    _injected("SendTaskSuccess", token)
    try:
        json.loads(output)
    except ValueError as e:
        raise _error("InvalidOutput", f"Invalid Output: '{e}'")
    task = _open_task(self.stepfunction_backend, token)
    _answer(task, CallbackOutcomeSuccess(callback_id=token, output=output))
    return EmptyResult()


def send_task_failure(self: Any) -> EmptyResult:
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackOutcomeFailure

    token = self._get_param("taskToken")
    error = self._get_param("error")
    cause = self._get_param("cause")
    _check_length("taskToken", token, 1, TOKEN_MAX)
    _check_length("error", error, 0, ERROR_MAX)
    _check_length("cause", cause, 0, CAUSE_MAX)
    _injected("SendTaskFailure", token)
    task = _open_task(self.stepfunction_backend, token)
    _answer(task, CallbackOutcomeFailure(callback_id=token, error=error, cause=cause))
    return EmptyResult()


def send_task_heartbeat(self: Any) -> EmptyResult:
    token = self._get_param("taskToken")
    _check_length("taskToken", token, 1, TOKEN_MAX)
    _injected("SendTaskHeartbeat", token)
    task = _open_task(self.stepfunction_backend, token)
    with TASKS.lock:
        task.heartbeats += 1
        if task.heartbeat_seconds is not None:
            task.heartbeat_at = time.monotonic() + task.heartbeat_seconds
    task.endpoint.notify_heartbeat()
    return EmptyResult()
