"""Email on the local AWS (infra/moto_fixes/ses.py, patch 14; infra/local_iam): SES v2
SendEmail keeps each email whole for `GET /_countersign/emails`, answers injected faults first,
refuses an unverified sender (MessageRejected, as SES does), and IAM lets only the executor send,
and only from a From address EmailSenders allows (the `ses:FromAddress` condition of its grant:
"Controlling access to Amazon SES", control-user-access.html; SendEmail's resource types are
`identity` and `configuration-set`, list_amazonsesv2.html).

Run: .local/venv/bin/python -m unittest discover -s infra/tests -v   (make test runs it)
"""

from __future__ import annotations

import json
import unittest
import urllib.request
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from moto_process import MotoServer
from test_local_iam import register

SENDERS = {"EmailSenders": "approvals@acme.example,*@beta.example"}


def simple(subject: str) -> dict[str, Any]:
    return {"Simple": {"Subject": {"Data": subject}, "Body": {"Text": {"Data": "the text"}, "Html": {"Data": "<p>the html</p>"}}}}


class LocalSes(unittest.TestCase):
    moto: MotoServer

    @classmethod
    def setUpClass(cls) -> None:
        cls.moto = MotoServer()
        # One attempt each: botocore would retry a throttled or failed send itself.
        cls.admin = boto3.client("sesv2", endpoint_url=cls.moto.endpoint, region_name="us-east-1",
                                 aws_access_key_id="test", aws_secret_access_key="test",
                                 config=Config(retries={"total_max_attempts": 1}))
        for identity in ("approvals@acme.example", "beta.example", "other@acme.example"):
            cls.admin.create_email_identity(EmailIdentity=identity)
        cls.roles = register(cls.moto.endpoint, "email-granted", {}, SENDERS)
        cls.none = register(cls.moto.endpoint, "email-none", {}, {"EmailSenders": ""})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.moto.stop()

    def client(self, roles: dict[str, Any], function: str = "executor") -> Any:
        role = roles[function]
        return boto3.client("sesv2", endpoint_url=self.moto.endpoint, region_name="us-east-1",
                            aws_access_key_id=role["access_key_id"], aws_secret_access_key=role["secret_access_key"],
                            aws_session_token=role["session_token"],
                            config=Config(retries={"total_max_attempts": 1}))

    def emails(self, to: str) -> list[dict[str, Any]]:
        url = f"{self.moto.endpoint}/_countersign/emails?to={to}"
        return json.loads(urllib.request.urlopen(url).read())

    def send(self, client: Any, sender: str, to: str, subject: str = "s") -> str:
        try:
            client.send_email(FromEmailAddress=sender, Destination={"ToAddresses": [to]}, Content=simple(subject))
        except ClientError as e:
            return e.response["Error"]["Code"]
        return "OK"

    def fault(self, error: str, target: str, count: int = 1) -> None:
        request = urllib.request.Request(f"{self.moto.endpoint}/_countersign/faults", method="POST",
                                         data=json.dumps({"operation": "SendEmail", "error": error,
                                                          "target": target, "count": count}).encode())
        urllib.request.urlopen(request).read()

    def test_each_email_is_kept_whole_with_its_text_and_html(self) -> None:
        self.assertEqual(self.send(self.admin, "approvals@acme.example", "whole@example.com", "Approval requested: x"), "OK")
        [email] = self.emails("whole@example.com")
        self.assertEqual((email["from"], email["to"], email["subject"], email["text"], email["html"]),
                         ("approvals@acme.example", ["whole@example.com"], "Approval requested: x", "the text",
                          "<p>the html</p>"))

    def test_an_unverified_sender_is_refused_as_ses_refuses_it(self) -> None:
        self.assertEqual(self.send(self.admin, "nobody@nowhere.example", "unverified@example.com"), "MessageRejected")
        self.assertEqual(self.emails("unverified@example.com"), [])

    def test_injected_faults_are_answered_first_and_send_nothing(self) -> None:
        for error, status in (("TooManyRequestsException", 429), ("MessageRejected", 400), ("InternalFailure", 500)):
            self.fault(error, "faulty@example.com")
            try:
                self.admin.send_email(FromEmailAddress="approvals@acme.example",
                                      Destination={"ToAddresses": ["faulty@example.com"]}, Content=simple("f"))
                self.fail("no fault")
            except ClientError as e:
                self.assertEqual((e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]),
                                 (error, status))
        self.assertEqual(self.emails("faulty@example.com"), [])
        self.assertEqual(self.send(self.admin, "approvals@acme.example", "faulty@example.com"), "OK")

    def test_only_the_executor_may_send_and_only_from_an_allowed_address(self) -> None:
        executor = self.client(self.roles)
        self.assertEqual(self.send(executor, "approvals@acme.example", "iam@example.com"), "OK")
        self.assertEqual(self.send(executor, "ops@beta.example", "iam@example.com"), "OK")
        # Verified, but not a From address EmailSenders allows.
        self.assertEqual(self.send(executor, "other@acme.example", "iam@example.com"), "AccessDeniedException")
        for function in ("api", "decide", "webhook", "dispatch", "sweeper", "reconciler", "read"):
            self.assertEqual(self.send(self.client(self.roles, function), "approvals@acme.example", "iam@example.com"),
                             "AccessDeniedException", function)
        # Without EmailSenders the executor has no grant at all.
        self.assertEqual(self.send(self.client(self.none), "approvals@acme.example", "iam@example.com"),
                         "AccessDeniedException")
        self.assertEqual(len(self.emails("iam@example.com")), 2)


if __name__ == "__main__":
    unittest.main()
