"""IAM for resuming a paused workflow (infra/local_iam, infra/template.yaml): the executor's
grants follow ResumeStateMachineArns and ResumeFunctionArns, and the gate evaluates
SendTaskSuccess/SendTaskFailure and the durable-execution callbacks on the resources AWS does.

- Step Functions' SendTaskSuccess and SendTaskFailure take no resource type (Service
  Authorization Reference, list_awsstepfunctions.html): they are evaluated on "*", so a grant on
  a state machine's ARN allows nothing, and the template grants them on "*" only when
  ResumeStateMachineArns is given.
- Lambda's SendDurableExecutionCallbackSuccess/Failure are evaluated on the durable execution's
  ARN ("Security and permissions for Lambda durable functions"): `function:NAME:*` matches the
  durable executions of every version of NAME, and nothing of another function.

Run: .local/venv/bin/python -m unittest discover -s infra/tests -v   (make test runs it)
"""

from __future__ import annotations

import json
import time
import unittest
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from moto_process import MotoServer
from test_local_iam import register
from test_sfn_tasks import Workflow

from local_iam.policy import Resource, Statement, evaluate
from local_iam.requests import stepfunctions as stepfunctions_needs
from local_iam.template import Resolver, load

STATE_MACHINES = "arn:aws:states:us-east-1:123456789012:stateMachine:countersign-*"
FUNCTIONS = "arn:aws:lambda:us-east-1:123456789012:function:countersign-*"
RESUME = {"ResumeStateMachineArns": STATE_MACHINES, "ResumeFunctionArns": FUNCTIONS}
NONE = {"ResumeStateMachineArns": "", "ResumeFunctionArns": ""}


def executor(parameters: dict[str, str]) -> Any:
    return Resolver(load(), {}, parameters, "us-east-1", "123456789012", lambda _: None).roles()["executor"]


def allows(role: Any, action: str, arn: str) -> bool:
    return evaluate(role.statements, action, arn, {}) is not None


class TemplateGrants(unittest.TestCase):
    def test_the_executor_may_answer_task_tokens_only_with_resume_state_machine_arns(self) -> None:
        self.assertFalse(allows(executor(NONE), "states:SendTaskSuccess", "*"))
        role = executor({"ResumeStateMachineArns": STATE_MACHINES})
        for action in ("states:SendTaskSuccess", "states:SendTaskFailure"):
            with self.subTest(action=action):
                self.assertTrue(allows(role, action, "*"))
        self.assertFalse(allows(role, "states:SendTaskHeartbeat", "*"), "heartbeats are not granted")
        self.assertFalse(allows(executor({"ResumeFunctionArns": FUNCTIONS}), "states:SendTaskSuccess", "*"))

    def test_send_task_success_is_evaluated_on_star_so_a_state_machine_grant_allows_nothing(self) -> None:
        (need,) = stepfunctions_needs("SendTaskSuccess", {"taskToken": "anything"})
        self.assertEqual((need.action, need.resource), ("states:SendTaskSuccess", "*"))
        machine = "arn:aws:states:us-east-1:123456789012:stateMachine:countersign-deploy"
        scoped = [Statement.make("Allow", ["states:SendTaskSuccess"], [Resource(machine, machine)])]
        self.assertIsNone(evaluate(scoped, need.action, need.resource, {}))

    def test_durable_callbacks_are_allowed_on_every_version_of_each_function_given(self) -> None:
        given = "arn:aws:lambda:us-east-1:123456789012:function:deploy,arn:aws:lambda:us-east-1:123456789012:function:refund"
        role = executor({"ResumeFunctionArns": given})
        execution = "arn:aws:lambda:us-east-1:123456789012:function:{}:{}/durable-execution/approval/0f1e"
        for action in ("lambda:SendDurableExecutionCallbackSuccess", "lambda:SendDurableExecutionCallbackFailure"):
            for function, qualifier in (("deploy", "$LATEST"), ("deploy", "7"), ("refund", "$LATEST")):
                with self.subTest(action=action, function=function, qualifier=qualifier):
                    self.assertTrue(allows(role, action, execution.format(function, qualifier)))
            with self.subTest(action=action, function="another"):
                self.assertFalse(allows(role, action, execution.format("deployer", "$LATEST")))
        self.assertFalse(allows(role, "lambda:SendDurableExecutionCallbackHeartbeat", execution.format("deploy", "1")))
        self.assertFalse(allows(executor(NONE), "lambda:SendDurableExecutionCallbackSuccess",
                                execution.format("deploy", "1")))

    def test_only_the_executor_gets_the_grants(self) -> None:
        roles = Resolver(load(), {}, RESUME, "us-east-1", "123456789012", lambda _: None).roles()
        for function, role in roles.items():
            if function == "executor":
                continue
            with self.subTest(function=function):
                self.assertFalse(allows(role, "states:SendTaskSuccess", "*"))
                self.assertFalse(allows(role, "lambda:SendDurableExecutionCallbackSuccess",
                                        "arn:aws:lambda:us-east-1:123456789012:function:countersign-x:1/durable-execution/a/b"))

    def test_resume_types_follow_the_parameters_on_the_api_and_the_executor(self) -> None:
        cases = (
            (NONE, ""),
            ({"ResumeStateMachineArns": STATE_MACHINES}, "stepfunctions"),
            ({"ResumeFunctionArns": FUNCTIONS}, "lambda_durable"),
            (RESUME, "stepfunctions,lambda_durable"),
        )
        template = load()
        for parameters, expected in cases:
            resolver = Resolver(template, {}, parameters, "us-east-1", "123456789012", lambda _: None)
            for logical in ("CreateFunction", "ExecutorFunction"):
                variables = template["Resources"][logical]["Properties"]["Environment"]["Variables"]
                with self.subTest(parameters=parameters, function=logical):
                    self.assertEqual(resolver.value(variables["RESUME_TYPES"]), expected)
        for logical, resource in template["Resources"].items():
            if resource["Type"] == "AWS::Serverless::Function" and logical not in ("CreateFunction", "ExecutorFunction"):
                with self.subTest(function=logical):
                    self.assertNotIn("RESUME_TYPES", resource["Properties"]["Environment"]["Variables"])


class OverTheWire(unittest.TestCase):
    """Each function calls as its role; the grants are the registration's parameters'."""

    moto: MotoServer

    @classmethod
    def setUpClass(cls) -> None:
        cls.moto = MotoServer()
        cls.flow = Workflow(cls.moto)
        cls.granted = register(cls.moto.endpoint, "resume-granted", {}, RESUME)
        cls.refused = register(cls.moto.endpoint, "resume-none", {}, NONE)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.moto.stop()

    def client(self, service: str, roles: dict[str, Any], function: str = "executor") -> Any:
        role = roles[function]
        return boto3.client(service, endpoint_url=self.moto.endpoint, region_name="us-east-1",
                            aws_access_key_id=role["access_key_id"], aws_secret_access_key=role["secret_access_key"],
                            aws_session_token=role["session_token"],
                            config=Config(retries={"total_max_attempts": 1}, parameter_validation=False))

    def code(self, call: Any, **kwargs: Any) -> str:
        try:
            call(**kwargs)
        except ClientError as e:
            return e.response["Error"]["Code"]
        return "OK"

    def callback(self, function: str) -> str:
        request = urllib.request.Request(
            f"{self.moto.endpoint}/_countersign/durable/callbacks", method="POST",
            data=json.dumps({"function_arn": f"arn:aws:lambda:us-east-1:123456789012:function:{function}"}).encode())
        return json.loads(urllib.request.urlopen(request).read())["callback_id"]

    def callback_status(self, callback_id: str) -> str:
        url = f"{self.moto.endpoint}/_countersign/durable/callbacks/{quote(callback_id, safe='')}"
        return json.loads(urllib.request.urlopen(url).read())["status"]

    def test_send_task_success_is_refused_without_resume_state_machine_arns_and_allowed_with(self) -> None:
        execution, token = self.flow.start()
        refused = self.client("stepfunctions", self.refused)
        self.assertEqual(self.code(refused.send_task_success, taskToken=token, output="{}"), "AccessDeniedException")
        self.assertEqual(self.code(refused.send_task_failure, taskToken=token, error="Countersign.Rejected"),
                         "AccessDeniedException")
        api = self.client("stepfunctions", self.granted, "api")
        self.assertEqual(self.code(api.send_task_success, taskToken=token, output="{}"), "AccessDeniedException")
        granted = self.client("stepfunctions", self.granted)
        self.assertEqual(self.code(granted.send_task_success, taskToken=token, output='{"ok": true}'), "OK")
        self.assertEqual(self.flow.ended(execution)["status"], "SUCCEEDED")

    def test_a_token_of_any_state_machine_is_allowed_with_the_grant_as_on_aws(self) -> None:
        # The grant is on "*": the state machine's name is not checked (IAM cannot).
        arn, queue = self.flow.machine()
        renamed = self.flow.sfn.create_state_machine(
            name=f"elsewhere-{int(time.time() * 1000)}",
            definition=self.flow.sfn.describe_state_machine(stateMachineArn=arn)["definition"],
            roleArn="arn:aws:iam::123456789012:role/x")["stateMachineArn"]
        execution = self.flow.sfn.start_execution(stateMachineArn=renamed)["executionArn"]
        token = self.flow.token(queue)
        granted = self.client("stepfunctions", self.granted)
        self.assertEqual(self.code(granted.send_task_failure, taskToken=token, error="Countersign.Expired",
                                   cause="{}"), "OK")
        self.assertEqual(self.flow.ended(execution)["status"], "FAILED")

    def test_an_unknown_or_malformed_token_is_checked_on_star_like_any(self) -> None:
        from moto_fixes.sfn_tasks import new_token

        granted = self.client("stepfunctions", self.granted)
        refused = self.client("stepfunctions", self.refused)
        for token, answer in ((new_token(), "TaskDoesNotExist"), ("garbage", "InvalidToken")):
            with self.subTest(answer=answer):
                self.assertEqual(self.code(granted.send_task_success, taskToken=token, output="{}"), answer)
                self.assertEqual(self.code(refused.send_task_success, taskToken=token, output="{}"),
                                 "AccessDeniedException")

    def test_a_durable_callback_is_allowed_for_a_function_in_resume_function_arns_only(self) -> None:
        granted = self.client("lambda", self.granted)
        refused = self.client("lambda", self.refused)
        inside = self.callback("countersign-durable-deploy")
        self.assertEqual(self.code(refused.send_durable_execution_callback_success, CallbackId=inside, Result=b"{}"),
                         "AccessDeniedException")
        self.assertEqual(self.code(granted.send_durable_execution_callback_success, CallbackId=inside, Result=b"{}"),
                         "OK")
        self.assertEqual(self.callback_status(inside), "succeeded")
        outside = self.callback("another-team-function")
        self.assertEqual(self.code(granted.send_durable_execution_callback_failure, CallbackId=outside,
                                   Error={"ErrorType": "Countersign.Rejected"}), "AccessDeniedException")
        self.assertEqual(self.callback_status(outside), "pending")
        # Heartbeats are not granted.
        self.assertEqual(self.code(granted.send_durable_execution_callback_heartbeat, CallbackId=self.callback(
            "countersign-durable-deploy")), "AccessDeniedException")

    def test_a_refused_callback_is_lambdas_403_access_denied(self) -> None:
        granted = self.client("lambda", self.refused)
        try:
            granted.send_durable_execution_callback_success(CallbackId=self.callback("countersign-x"), Result=b"{}")
        except ClientError as e:
            self.assertEqual(e.response["ResponseMetadata"]["HTTPStatusCode"], 403)
            self.assertEqual(e.response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"], "AccessDeniedException")
            self.assertIn("lambda:SendDurableExecutionCallbackSuccess", e.response["Error"]["Message"])
        else:
            self.fail("allowed")

    def test_a_callback_id_is_checked_on_the_execution_it_names_known_or_not(self) -> None:
        from local_resume.durable import Callbacks

        granted = self.client("lambda", self.granted)
        refused = self.client("lambda", self.refused)
        unknown = Callbacks().create({"function_arn": "arn:aws:lambda:us-east-1:123456789012:function:countersign-x"})
        self.assertEqual(self.code(granted.send_durable_execution_callback_success, CallbackId=unknown.callback_id,
                                   Result=b"{}"), "ResourceNotFoundException")
        self.assertEqual(self.code(refused.send_durable_execution_callback_success, CallbackId=unknown.callback_id,
                                   Result=b"{}"), "AccessDeniedException")
        # An id that names no execution: nothing to evaluate, refused as malformed whoever asks.
        self.assertEqual(self.code(refused.send_durable_execution_callback_success, CallbackId="QUJD", Result=b"{}"),
                         "InvalidParameterValueException")


class DefaultParameters(unittest.TestCase):
    def test_moto_iam_parameters_fill_what_a_registration_leaves_out(self) -> None:
        moto = MotoServer({"MOTO_IAM_PARAMETERS": json.dumps(RESUME)})
        try:
            flow = Workflow(moto)
            execution, token = flow.start()
            for parameters, expected in (({}, "OK"), (NONE, "AccessDeniedException")):
                roles = register(moto.endpoint, f"defaults-{len(parameters)}", {}, parameters)
                role = roles["executor"]
                sfn = boto3.client("stepfunctions", endpoint_url=moto.endpoint, region_name="us-east-1",
                                   aws_access_key_id=role["access_key_id"],
                                   aws_secret_access_key=role["secret_access_key"],
                                   aws_session_token=role["session_token"],
                                   config=Config(retries={"total_max_attempts": 1}))
                with self.subTest(parameters=parameters):
                    try:
                        sfn.send_task_heartbeat(taskToken=token)
                        code = "OK"
                    except ClientError as e:
                        code = e.response["Error"]["Code"]
                    # Heartbeats are not granted at all: a refusal either way, but of the grant's
                    # absence from the role, which SendTaskSuccess shows.
                    self.assertEqual(code, "AccessDeniedException")
                    try:
                        sfn.send_task_success(taskToken=token, output="{}")
                        code = "OK"
                    except ClientError as e:
                        code = e.response["Error"]["Code"]
                    self.assertEqual(code, expected)
            self.assertEqual(flow.ended(execution)["status"], "SUCCEEDED")
        finally:
            moto.stop()

    def test_moto_iam_parameters_must_name_the_templates_parameters(self) -> None:
        import subprocess
        import sys

        from moto_process import INFRA, free_port

        server = subprocess.run(
            [sys.executable, f"{INFRA}/moto_server.py", str(free_port())],
            env={**__import__("os").environ, "MOTO_IAM_PARAMETERS": '{"NoSuchParameter": "x"}'},
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertNotEqual(server.returncode, 0)
        self.assertIn("NoSuchParameter", server.stderr)


if __name__ == "__main__":
    unittest.main()
