"""Verify a Countersign certificate before acting on it: Countersign's signature (ES256, a
detached JWS over the certificate's RFC 8785 form), every vote's passkey signature over its
statement, and every rule met by distinct people other than the requester. See docs/VERIFY.md.

    python examples/verify/verify_certificate.py CERT.json JWKS.json [PAYLOAD.json]

Exit 0 with one line per rule; 1 with the reason it fails. Needs `cryptography` and `rfc8785`
(pip install cryptography rfc8785).
"""

import base64
import hashlib
import json
import sys

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, utils


def b64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_of(jwk):
    point = b"\x04" + b64(jwk["x"]) + b64(jwk["y"])
    return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)


def who(name):
    return name.strip().lower()


def verify(cert, jwks, payload=None):
    # 1. Countersign's signature: header..signature over BASE64URL(RFC 8785 of the rest).
    header, empty, signature = cert["signature"].split(".")
    kid = json.loads(b64(header))["kid"]
    key = next(k for k in jwks["keys"] if k.get("kid") == kid)
    unsigned = {k: v for k, v in cert.items() if k != "signature"}
    signed = header + "." + base64.urlsafe_b64encode(rfc8785.dumps(unsigned)).rstrip(b"=").decode()
    r, s = b64(signature)[:32], b64(signature)[32:]
    der = utils.encode_dss_signature(int.from_bytes(r, "big"), int.from_bytes(s, "big"))
    key_of(key).verify(der, signed.encode(), ec.ECDSA(hashes.SHA256()))
    # 2. The action: its digest, and the payload this target was sent.
    if hashlib.sha256(rfc8785.dumps(cert["action"]["payload"])).hexdigest() != cert["payload_sha256"]:
        raise ValueError("the payload does not match its digest")
    if payload is not None and payload != cert["action"]["payload"]:
        raise ValueError("the payload given does not match the certificate's")
    # 3. Each vote: a passkey signature over its statement, about this approval and action.
    approving, people = [], set()
    for n, vote in enumerate(cert["votes"], 1):
        statement = json.loads(vote["statement"])
        if (statement["tenant"], statement["approval_id"]) != (cert["tenant"], cert["approval_id"]) \
                or statement["action"] != {"type": cert["action"]["type"], "payload_sha256": cert["payload_sha256"]} \
                or statement["vote"] != "approve":
            raise ValueError(f"vote {n}: its statement is not an approval of this action")
        client = json.loads(b64(vote["client_data_json"]))
        challenge = base64.urlsafe_b64encode(hashlib.sha256(vote["statement"].encode()).digest()).rstrip(b"=")
        data = b64(vote["authenticator_data"])
        if client["type"] != "webauthn.get" or client["challenge"].encode() != challenge or data[32] & 0x05 != 0x05:
            raise ValueError(f"vote {n}: not a user-verified assertion over its statement")
        signed = data + hashlib.sha256(b64(vote["client_data_json"])).digest()
        key_of(vote["public_key_jwk"]).verify(b64(vote["signature"]), signed, ec.ECDSA(hashes.SHA256()))
        place, signer = who(statement["approver"]), who(statement.get("by", statement["approver"]))
        if who(cert.get("requested_by") or "") in (place, signer):
            raise ValueError(f"vote {n}: the requester's vote counts for no rule")
        if place in people or signer in people:
            raise ValueError(f"vote {n}: {signer} votes twice")
        people |= {place, signer}
        approving.append(place)
    # 4. Every rule met by its approvers' votes.
    lines = []
    for rule in cert["policy"]["rules"]:
        by = [p for p in approving if p in {who(a) for a in rule["approvers"]}]
        if len(by) < rule["min_approvals"]:
            raise ValueError(f"rule {rule['name']} is not met: {len(by)} of the {rule['min_approvals']} approvals it requires")
        lines.append(f"rule {rule['name']}: met, {len(by)} of {rule['min_approvals']} required, by {', '.join(by)}")
    return lines


if __name__ == "__main__":
    paths = sys.argv[1:]
    loaded = [json.load(open(path)) for path in paths]
    try:
        print("\n".join(verify(*loaded)))
    except (InvalidSignature, ValueError, KeyError, StopIteration) as error:
        print(f"not verified: {type(error).__name__} {error}", file=sys.stderr)
        sys.exit(1)
