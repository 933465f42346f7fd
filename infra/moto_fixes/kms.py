"""KMS Sign as AWS answers it (patch 15 of moto_patches.py).

AWS ("Sign", KMS API Reference): `Message` is at most 4096 bytes; `MessageType` is `RAW` (KMS
hashes the message with the algorithm's hash) or `DIGEST` (the message *is* that hash, signed as
it is, and must be exactly the hash's length: 32 bytes for `ECDSA_SHA_256`); anything else is a
`ValidationException`. moto 5.2.5 reads `MessageType` and ignores it: a `DIGEST` is hashed again,
so the signature verifies over SHA-256(digest) instead of over the message the digest stands for,
and no size is checked. Countersign signs its certificates' JWS signing input (as long as the
payload, often over 4096 bytes) as a `DIGEST`: here a digest is signed as AWS signs it, and both
rules are enforced.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, utils
from moto.kms.exceptions import ValidationException

MAX_MESSAGE_BYTES = 4096
DIGEST_BYTES = {"ECDSA_SHA_256": 32, "ECDSA_SHA_384": 48, "ECDSA_SHA_512": 64}
_HASHES = {"ECDSA_SHA_256": hashes.SHA256, "ECDSA_SHA_384": hashes.SHA384, "ECDSA_SHA_512": hashes.SHA512}


def sign(original: Any) -> Any:
    """`KmsResponse.sign`, with AWS's MessageType and size rules."""

    def patched(self: Any) -> str:
        # moto's own `_get_param` decodes the base64 of `Message`.
        message = self._get_param("Message") or b""
        raw = message if isinstance(message, bytes) else str(message).encode("utf-8")
        message_type = self._get_param("MessageType") or "RAW"
        algorithm = self._get_param("SigningAlgorithm")
        if message_type not in ("RAW", "DIGEST"):
            raise ValidationException(
                f"1 validation error detected: Value '{message_type}' at 'messageType' failed to "
                "satisfy constraint: Member must satisfy enum value set: [DIGEST, RAW]"
            )
        if len(raw) > MAX_MESSAGE_BYTES:
            raise ValidationException(
                "1 validation error detected: Value at 'message' failed to satisfy constraint: "
                f"Member must have length less than or equal to {MAX_MESSAGE_BYTES}"
            )
        if message_type == "RAW":
            return original(self)
        if algorithm not in DIGEST_BYTES:
            # Only the ECDSA algorithms are modelled for a digest (Countersign's key is P-256).
            raise ValidationException(f"a DIGEST with {algorithm} is not modelled by the local KMS")
        if len(raw) != DIGEST_BYTES[algorithm]:
            raise ValidationException(
                f"Digest is invalid length for algorithm {algorithm}."
            )
        key = self.kms_backend.describe_key(self._get_param("KeyId"))
        if algorithm not in key.signing_algorithms:
            raise ValidationException(f"{algorithm} is not a signing algorithm of this key")
        signature = key.private_key.private_key.sign(
            raw, ec.ECDSA(utils.Prehashed(_HASHES[algorithm]()))
        )
        return json.dumps({
            "KeyId": key.arn,
            "Signature": base64.b64encode(signature).decode("utf-8"),
            "SigningAlgorithm": algorithm,
        })

    patched._countersign = True  # type: ignore[attr-defined]
    return patched
