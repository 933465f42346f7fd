"""Lambda durable functions' callbacks on the local AWS, over the wire (infra/local_resume/): the
control API creates a callback as a paused durable execution would, and
SendDurableExecutionCallbackSuccess, SendDurableExecutionCallbackFailure and
SendDurableExecutionCallbackHeartbeat answer it as the Lambda API reference says
(API_SendDurableExecutionCallbackSuccess.html, API_SendDurableExecutionCallbackFailure.html),
with boto3's own lambda client (botocore's model has the operations).

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
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from moto_process import MotoServer

FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:countersign-durable-test"


class Durable:
    def __init__(self, server: MotoServer) -> None:
        self.endpoint = server.endpoint
        # No retries and no client-side validation: every call is sent once, as it is.
        self.client = boto3.client("lambda", endpoint_url=server.endpoint, region_name="us-east-1",
                                   aws_access_key_id="test", aws_secret_access_key="test",
                                   config=Config(parameter_validation=False, retries={"total_max_attempts": 1}))

    def control(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(f"{self.endpoint}{path}", data=data, method=method)
        return json.loads(urllib.request.urlopen(request).read())

    def callback(self, **spec: Any) -> dict[str, str]:
        return self.control("POST", "/_countersign/durable/callbacks", {"function_arn": FUNCTION, **spec})

    def state(self, callback_id: str) -> dict[str, Any]:
        return self.control("GET", f"/_countersign/durable/callbacks/{quote(callback_id, safe='')}")

    def raw(self, callback_id: str, kind: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """A call as the SDKs send it, signed (SigV4) with the administrator's credentials: the
        local AWS refuses an unsigned one as AWS does."""
        url = f"{self.endpoint}/2025-12-01/durable-execution-callbacks/{quote(callback_id, safe='')}/{kind}"
        signed = AWSRequest(method="POST", url=url, data=body)
        SigV4Auth(Credentials("test", "test"), "lambda", "us-east-1").add_auth(signed)
        request = urllib.request.Request(url, data=body, method="POST", headers=dict(signed.headers.items()))
        try:
            with urllib.request.urlopen(request) as answer:
                return answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()


def error_of(call: Any, **kwargs: Any) -> str:
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]["Code"]
    raise AssertionError("the call succeeded")


class DurableCallbacks(unittest.TestCase):
    server: MotoServer
    durable: Durable

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = MotoServer()
        cls.durable = Durable(cls.server)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()

    def test_a_callback_has_an_aws_like_id_naming_its_durable_execution(self) -> None:
        created = self.durable.callback(execution_name="approval-01J")
        self.assertRegex(created["callback_id"], r"^[A-Za-z0-9+/]+={0,2}$")
        self.assertLessEqual(len(created["callback_id"]), 1024)
        self.assertRegex(created["durable_execution_arn"],
                         r"^arn:aws:lambda:us-east-1:123456789012:function:countersign-durable-test:\$LATEST"
                         r"/durable-execution/approval-01J/[A-Za-z0-9_-]+$")
        self.assertEqual(self.durable.state(created["callback_id"])["status"], "pending")

    def test_success_closes_the_callback_with_its_result(self) -> None:
        callback_id = self.durable.callback()["callback_id"]
        decision = json.dumps({"approval_id": "01J", "status": "approved"}).encode()
        self.durable.client.send_durable_execution_callback_success(CallbackId=callback_id, Result=decision)
        state = self.durable.state(callback_id)
        self.assertEqual((state["status"], state["result"]), ("succeeded", decision.decode()))
        self.assertEqual((state["answers_received"], state["answers_accepted"]), (1, 1))

    def test_failure_closes_the_callback_with_its_error_object(self) -> None:
        callback_id = self.durable.callback()["callback_id"]
        error = {"ErrorType": "Countersign.Rejected", "ErrorMessage": "rejected by bob",
                 "ErrorData": json.dumps({"status": "rejected"}), "StackTrace": []}
        self.durable.client.send_durable_execution_callback_failure(CallbackId=callback_id, Error=error)
        state = self.durable.state(callback_id)
        self.assertEqual((state["status"], state["error"]), ("failed", error))

    def test_a_callback_answered_once_is_closed_callback_timeout_exception(self) -> None:
        callback_id = self.durable.callback()["callback_id"]
        self.durable.client.send_durable_execution_callback_success(CallbackId=callback_id, Result=b"{}")
        for call, kwargs in ((self.durable.client.send_durable_execution_callback_success, {"Result": b"{}"}),
                             (self.durable.client.send_durable_execution_callback_failure, {"Error": {}}),
                             (self.durable.client.send_durable_execution_callback_heartbeat, {})):
            with self.subTest(call=call.__name__):
                self.assertEqual(error_of(call, CallbackId=callback_id, **kwargs), "CallbackTimeoutException")
        state = self.durable.state(callback_id)
        self.assertEqual((state["status"], state["answers_received"], state["answers_accepted"]), ("succeeded", 3, 1))
        self.assertEqual(state["calls"], {"succeed": 2, "fail": 1, "heartbeat": 1})

    def test_a_callback_past_its_timeout_is_callback_timeout_exception(self) -> None:
        callback_id = self.durable.callback(timeout_seconds=0.5)["callback_id"]
        time.sleep(0.6)
        self.assertEqual(error_of(self.durable.client.send_durable_execution_callback_success,
                                  CallbackId=callback_id, Result=b"{}"), "CallbackTimeoutException")
        self.assertEqual(self.durable.state(callback_id)["status"], "timed_out")

    def test_heartbeats_keep_a_callback_open_until_they_stop(self) -> None:
        callback_id = self.durable.callback(heartbeat_timeout_seconds=0.6, timeout_seconds=30)["callback_id"]
        for _ in range(3):
            time.sleep(0.3)
            self.durable.client.send_durable_execution_callback_heartbeat(CallbackId=callback_id)
        time.sleep(0.8)
        self.assertEqual(error_of(self.durable.client.send_durable_execution_callback_success,
                                  CallbackId=callback_id, Result=b"{}"), "CallbackTimeoutException")
        self.assertEqual(self.durable.state(callback_id)["heartbeats_accepted"], 3)

    def test_an_id_is_1_to_1024_characters_of_base64(self) -> None:
        for callback_id in ("A" * 1025, "not base64!", "QUJD=="[:5] + "==="):
            with self.subTest(callback_id=callback_id[:12]):
                self.assertEqual(error_of(self.durable.client.send_durable_execution_callback_success,
                                          CallbackId=callback_id, Result=b"{}"), "InvalidParameterValueException")

    def test_an_id_this_service_cannot_have_issued_is_invalid_parameter_value(self) -> None:
        self.assertEqual(error_of(self.durable.client.send_durable_execution_callback_success,
                                  CallbackId="QUJD", Result=b"{}"), "InvalidParameterValueException")

    def test_an_id_naming_no_callback_is_resource_not_found(self) -> None:
        from local_resume.durable import Callbacks

        elsewhere = Callbacks().create({"function_arn": FUNCTION}).callback_id
        self.assertEqual(error_of(self.durable.client.send_durable_execution_callback_success,
                                  CallbackId=elsewhere, Result=b"{}"), "ResourceNotFoundException")

    def test_a_result_is_at_most_262144_bytes(self) -> None:
        callback_id = self.durable.callback()["callback_id"]
        self.assertEqual(error_of(self.durable.client.send_durable_execution_callback_success,
                                  CallbackId=callback_id, Result=b"x" * 262145), "InvalidParameterValueException")
        self.durable.client.send_durable_execution_callback_success(CallbackId=callback_id, Result=b"x" * 262144)
        self.assertEqual(self.durable.state(callback_id)["status"], "succeeded")

    def test_a_failure_body_must_be_an_error_object(self) -> None:
        callback_id = self.durable.callback()["callback_id"]
        for body in (b"[1]", b"{not json", b'{"StackTrace": "one line"}', b'{"Other": "x"}'):
            with self.subTest(body=body):
                status, headers, _ = self.durable.raw(callback_id, "fail", body)
                self.assertEqual((status, headers["x-amzn-ErrorType"]), (400, "InvalidParameterValueException"))
        self.assertEqual(self.durable.state(callback_id)["status"], "pending")

    def test_errors_are_on_the_wire_as_lambda_sends_them(self) -> None:
        callback_id = self.durable.callback()["callback_id"]
        self.assertEqual(self.durable.raw(callback_id, "succeed", b"{}")[0], 200)
        status, headers, body = self.durable.raw(callback_id, "succeed", b"{}")
        self.assertEqual((status, headers["x-amzn-ErrorType"]), (400, "CallbackTimeoutException"))
        self.assertEqual(json.loads(body)["Type"], "User")

    def test_ids_with_slashes_and_pluses_are_read_percent_encoded(self) -> None:
        for _ in range(50):
            callback_id = self.durable.callback()["callback_id"]
            if "/" in callback_id or "+" in callback_id:
                break
        else:
            self.skipTest("no id with / or + in 50")
        self.durable.client.send_durable_execution_callback_success(CallbackId=callback_id, Result=b"{}")
        self.assertEqual(self.durable.state(callback_id)["status"], "succeeded")

    def test_queued_faults_answer_first_and_leave_the_callback_open(self) -> None:
        callback_id = self.durable.callback()["callback_id"]
        for error, status in (("TooManyRequestsException", 429), ("ServiceException", 500)):
            with self.subTest(error=error):
                self.durable.control("POST", "/_countersign/faults", {
                    "operation": "SendDurableExecutionCallbackSuccess", "error": error, "count": 1})
                answer = self.durable.raw(callback_id, "succeed", b"{}")
                self.assertEqual((answer[0], answer[1]["x-amzn-ErrorType"]), (status, error))
        self.assertEqual(self.durable.raw(callback_id, "succeed", b"{}")[0], 200)
        self.assertEqual(self.durable.state(callback_id)["status"], "succeeded")


if __name__ == "__main__":
    unittest.main()
