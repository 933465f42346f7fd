"""KMS Sign as AWS answers it (infra/moto_patches.py, patch 15), driven over the wire with boto3
against infra/moto_server.py: a `DIGEST` is signed as it is (its signature verifies over the
message it stands for), a message over 4096 bytes and a digest of the wrong length are refused
(KMS API Reference, "Sign": `Message` "Length Constraints: Minimum length of 1. Maximum length
of 4096", and `MessageType` "DIGEST … must be the length of the hash of the signing
algorithm").

Run: .local/venv/bin/python -m unittest discover -s infra/tests -v   (make test runs it)
"""

import hashlib
import unittest

from botocore.exceptions import ClientError
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_der_public_key

from moto_process import MotoServer


class KmsSignRules(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.moto = MotoServer({})
        cls.kms = cls.moto.client("kms")
        created = cls.kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")
        cls.key = created["KeyMetadata"]["Arn"]
        der = cls.kms.get_public_key(KeyId=cls.key)["PublicKey"]
        cls.public = load_der_public_key(der)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.moto.stop()

    def sign(self, message: bytes, message_type: str) -> bytes:
        return self.kms.sign(KeyId=self.key, Message=message, MessageType=message_type,
                             SigningAlgorithm="ECDSA_SHA_256")["Signature"]

    def test_a_digest_is_signed_as_it_is_and_verifies_over_its_message(self) -> None:
        message = b"a certificate's signing input, longer than 4096 bytes " * 100
        signature = self.sign(hashlib.sha256(message).digest(), "DIGEST")
        self.public.verify(signature, message, ec.ECDSA(hashes.SHA256()))

    def test_a_raw_message_is_hashed_by_kms(self) -> None:
        signature = self.sign(b"hello", "RAW")
        self.public.verify(signature, b"hello", ec.ECDSA(hashes.SHA256()))

    def test_a_raw_message_over_4096_bytes_is_refused(self) -> None:
        with self.assertRaises(ClientError) as refused:
            self.sign(b"x" * 4097, "RAW")
        self.assertEqual(refused.exception.response["Error"]["Code"], "ValidationException")
        self.sign(b"x" * 4096, "RAW")

    def test_a_digest_of_the_wrong_length_is_refused(self) -> None:
        for length in (31, 33, 64):
            with self.assertRaises(ClientError) as refused:
                self.sign(b"d" * length, "DIGEST")
            self.assertEqual(refused.exception.response["Error"]["Code"], "ValidationException")


if __name__ == "__main__":
    unittest.main()
