"""Step Functions' task tokens on the local AWS, over the wire (infra/moto_fixes/sfn_tasks.py and
sfn_answers.py): a state machine really runs, a `.waitForTaskToken` task waits for its token, and
SendTaskSuccess, SendTaskFailure and SendTaskHeartbeat answer as the Step Functions API
reference says (API_SendTaskSuccess.html, API_SendTaskFailure.html, API_SendTaskHeartbeat.html).

Each test's state machine sends its token to an SQS queue (`$$.Task.Token`), where the test
reads it, as a Countersign test will.

Run: .local/venv/bin/python -m unittest discover -s infra/tests -v   (make test runs it)
"""

from __future__ import annotations

import json
import time
import unittest
import uuid
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from moto_process import MotoServer

ROLE = "arn:aws:iam::123456789012:role/countersign-test-sfn"


class Workflow:
    """State machines that wait on a token sent to a queue."""

    def __init__(self, server: MotoServer) -> None:
        self.sqs = server.client("sqs")
        self.sfn = server.client("stepfunctions")
        # parameter_validation off: the requests AWS refuses are sent as they are.
        import boto3

        self.raw = boto3.client("stepfunctions", endpoint_url=server.endpoint, region_name="us-east-1",
                                aws_access_key_id="test", aws_secret_access_key="test",
                                config=Config(parameter_validation=False, retries={"total_max_attempts": 1}))

    def machine(self, states: dict[str, Any] | None = None, **state: Any) -> tuple[str, str]:
        """A state machine whose first state waits on its token (then `states`, if any); its ARN
        and its queue. A key of `state` given None is left out."""
        queue = self.sqs.create_queue(QueueName=f"tokens-{uuid.uuid4().hex[:12]}")["QueueUrl"]
        wait = {
            "Type": "Task",
            "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
            "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token", "input.$": "$"}},
            "End": True,
            **state,
        }
        wait = {k: v for k, v in wait.items() if v is not None}
        states = dict(states or {})
        if "Next" in wait:
            states[wait["Next"]] = {"Type": "Succeed"}
        definition = {"StartAt": "WaitForApproval", "States": {"WaitForApproval": wait, **states}}
        arn = self.sfn.create_state_machine(
            name=f"countersign-{uuid.uuid4().hex[:12]}", definition=json.dumps(definition), roleArn=ROLE
        )["stateMachineArn"]
        return arn, queue

    def start(self, **state: Any) -> tuple[str, str]:
        """A running execution and the token its task waits on."""
        arn, queue = self.machine(**state)
        execution = self.sfn.start_execution(stateMachineArn=arn, input=json.dumps({"deploy": "v1"}))["executionArn"]
        return execution, self.token(queue)

    def token(self, queue: str) -> str:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            messages = self.sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0).get("Messages")
            if messages:
                return json.loads(messages[0]["Body"])["token"]
            time.sleep(0.05)
        raise AssertionError("the task sent no token")

    def ended(self, execution: str) -> dict[str, Any]:
        deadline = time.monotonic() + 10
        while True:
            described = self.sfn.describe_execution(executionArn=execution)
            if described["status"] != "RUNNING" or time.monotonic() > deadline:
                return described
            time.sleep(0.05)


def error_of(call: Any, **kwargs: Any) -> dict[str, str]:
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]
    raise AssertionError("the call succeeded")


class TaskTokens(unittest.TestCase):
    server: MotoServer
    flow: Workflow

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = MotoServer()
        cls.flow = Workflow(cls.server)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()

    # ------------------------------------------------------------ the execution waits, then ends
    def test_a_wait_for_task_token_task_waits_until_its_token_is_answered(self) -> None:
        execution, token = self.flow.start()
        time.sleep(0.3)
        self.assertEqual(self.flow.sfn.describe_execution(executionArn=execution)["status"], "RUNNING")
        self.assertGreater(len(token), 500, "a token looks like AWS's: several hundred characters")
        decision = {"approval_id": "01J", "status": "approved", "votes": []}
        self.flow.sfn.send_task_success(taskToken=token, output=json.dumps(decision))
        ended = self.flow.ended(execution)
        self.assertEqual(ended["status"], "SUCCEEDED")
        self.assertEqual(json.loads(ended["output"]), decision)

    def test_send_task_failure_fails_the_execution_with_its_error_and_cause(self) -> None:
        execution, token = self.flow.start()
        cause = json.dumps({"approval_id": "01J", "status": "rejected"})
        self.flow.sfn.send_task_failure(taskToken=token, error="Countersign.Rejected", cause=cause)
        ended = self.flow.ended(execution)
        self.assertEqual(ended["status"], "FAILED")
        self.assertEqual((ended["error"], ended["cause"]), ("Countersign.Rejected", cause))

    def test_a_failure_the_state_catches_goes_on_to_the_catcher(self) -> None:
        arn, queue = self.flow.machine(
            {"Rejected": {"Type": "Pass", "Result": {"rolled": "back"}, "End": True}},
            Catch=[{"ErrorEquals": ["Countersign.Rejected"], "Next": "Rejected"}], End=None, Next="Done")
        self.assertTrue(arn)
        execution = self.flow.sfn.start_execution(stateMachineArn=arn, input="{}")["executionArn"]
        self.flow.sfn.send_task_failure(taskToken=self.flow.token(queue), error="Countersign.Rejected", cause="{}")
        ended = self.flow.ended(execution)
        self.assertEqual((ended["status"], json.loads(ended["output"])), ("SUCCEEDED", {"rolled": "back"}))

    # ------------------------------------------------------------ a token answers once
    def test_a_token_answered_already_is_task_timed_out(self) -> None:
        execution, token = self.flow.start()
        self.flow.sfn.send_task_success(taskToken=token, output="{}")
        for call, kwargs in ((self.flow.sfn.send_task_success, {"output": "{}"}),
                             (self.flow.sfn.send_task_failure, {"error": "Countersign.Rejected"}),
                             (self.flow.sfn.send_task_heartbeat, {})):
            with self.subTest(call=call.__name__):
                self.assertEqual(error_of(call, taskToken=token, **kwargs)["Code"], "TaskTimedOut")
        self.assertEqual(self.flow.ended(execution)["status"], "SUCCEEDED")

    def test_an_execution_started_without_a_name_gets_one_of_its_own(self) -> None:
        arn, _ = self.flow.machine()
        first = self.flow.sfn.start_execution(stateMachineArn=arn)["executionArn"]
        second = self.flow.sfn.start_execution(stateMachineArn=arn)["executionArn"]
        self.assertNotEqual(first, second)
        self.assertNotIn(":None", first)
        for execution in (first, second):
            self.flow.sfn.stop_execution(executionArn=execution)

    def test_a_token_of_an_execution_that_ended_is_task_timed_out(self) -> None:
        execution, token = self.flow.start()
        self.flow.sfn.stop_execution(executionArn=execution, error="Stopped", cause="by a test")
        self.assertEqual(self.flow.ended(execution)["status"], "ABORTED")
        self.assertEqual(error_of(self.flow.sfn.send_task_success, taskToken=token, output="{}")["Code"], "TaskTimedOut")

    # ------------------------------------------------------------ time-outs
    def test_a_token_past_its_states_timeout_seconds_is_task_timed_out(self) -> None:
        execution, token = self.flow.start(TimeoutSeconds=1)
        time.sleep(1.2)
        self.assertEqual(error_of(self.flow.sfn.send_task_success, taskToken=token, output="{}")["Code"], "TaskTimedOut")
        ended = self.flow.ended(execution)
        self.assertEqual((ended["status"], ended.get("error")), ("FAILED", "States.Timeout"))

    def test_heartbeats_keep_a_task_with_heartbeat_seconds_open_and_their_absence_times_it_out(self) -> None:
        execution, token = self.flow.start(HeartbeatSeconds=1, TimeoutSeconds=30)
        for _ in range(3):
            time.sleep(0.5)
            self.flow.sfn.send_task_heartbeat(taskToken=token)
        self.flow.sfn.send_task_success(taskToken=token, output='{"kept": "alive"}')
        self.assertEqual(self.flow.ended(execution)["status"], "SUCCEEDED")

        execution, token = self.flow.start(HeartbeatSeconds=1, TimeoutSeconds=30)
        time.sleep(1.3)
        self.assertEqual(error_of(self.flow.sfn.send_task_heartbeat, taskToken=token)["Code"], "TaskTimedOut")
        self.assertEqual(self.flow.ended(execution)["status"], "FAILED")

    def test_a_heartbeat_is_accepted_without_heartbeat_seconds(self) -> None:
        execution, token = self.flow.start()
        self.flow.sfn.send_task_heartbeat(taskToken=token)
        self.flow.sfn.send_task_success(taskToken=token, output="{}")
        self.assertEqual(self.flow.ended(execution)["status"], "SUCCEEDED")

    # ------------------------------------------------------------ what a request may carry
    def test_a_token_is_1_to_2048_characters(self) -> None:
        for token in ("", "A" * 2049):
            with self.subTest(length=len(token)):
                error = error_of(self.flow.raw.send_task_success, taskToken=token, output="{}")
                self.assertEqual(error["Code"], "ValidationException")
                self.assertIn("'taskToken'", error["Message"])

    def test_a_token_this_service_cannot_have_issued_is_invalid_token(self) -> None:
        for token in ("not-a-token", "QUJD", "A" * 2048):
            with self.subTest(token=token[:12]):
                self.assertEqual(error_of(self.flow.sfn.send_task_success, taskToken=token, output="{}")["Code"],
                                 "InvalidToken")

    def test_a_well_formed_token_that_names_no_task_is_task_does_not_exist(self) -> None:
        from moto_fixes.sfn_tasks import new_token

        for call, kwargs in ((self.flow.sfn.send_task_success, {"output": "{}"}),
                             (self.flow.sfn.send_task_failure, {}),
                             (self.flow.sfn.send_task_heartbeat, {})):
            with self.subTest(call=call.__name__):
                self.assertEqual(error_of(call, taskToken=new_token(), **kwargs)["Code"], "TaskDoesNotExist")

    def test_output_must_be_json_and_at_most_262144_bytes(self) -> None:
        execution, token = self.flow.start()
        self.assertEqual(error_of(self.flow.sfn.send_task_success, taskToken=token, output="{not json")["Code"],
                         "InvalidOutput")
        # 262,144 bytes in UTF-8, not characters: 'é' is two.
        too_big = json.dumps("é" * 131072, ensure_ascii=False)
        self.assertLessEqual(len(too_big), 262144)
        error = error_of(self.flow.raw.send_task_success, taskToken=token, output=too_big)
        self.assertEqual(error["Code"], "ValidationException")
        self.assertIn("'output'", error["Message"])
        # Refused answers leave the task open.
        self.flow.sfn.send_task_success(taskToken=token, output=json.dumps("x" * 262000))
        self.assertEqual(self.flow.ended(execution)["status"], "SUCCEEDED")

    def test_error_is_at_most_256_characters_and_cause_32768(self) -> None:
        execution, token = self.flow.start()
        for kwargs, field in (({"error": "E" * 257}, "'error'"), ({"cause": "c" * 32769}, "'cause'")):
            with self.subTest(field=field):
                error = error_of(self.flow.raw.send_task_failure, taskToken=token, **kwargs)
                self.assertEqual(error["Code"], "ValidationException")
                self.assertIn(field, error["Message"])
        self.flow.sfn.send_task_failure(taskToken=token, error="E" * 256, cause="c" * 32768)
        ended = self.flow.ended(execution)
        self.assertEqual((ended["status"], ended["error"]), ("FAILED", "E" * 256))

    def test_queued_faults_answer_first_and_leave_the_task_open(self) -> None:
        import urllib.request

        execution, token = self.flow.start()
        request = urllib.request.Request(
            f"{self.server.endpoint}/_countersign/faults", method="POST",
            data=json.dumps({"operation": "SendTaskSuccess", "error": "ThrottlingException", "count": 1}).encode())
        self.assertEqual(json.loads(urllib.request.urlopen(request).read()), {"queued": 1})
        # The raw client does not retry (boto3's would, on its own, as the Rust SDK does).
        self.assertEqual(error_of(self.flow.raw.send_task_success, taskToken=token, output="{}")["Code"],
                         "ThrottlingException")
        self.flow.sfn.send_task_success(taskToken=token, output="{}")
        self.assertEqual(self.flow.ended(execution)["status"], "SUCCEEDED")


if __name__ == "__main__":
    unittest.main()
