"""SQS as AWS answers it where our dispatch depends on it, and without quadratic costs
(patches 3, 6 and 7 of moto_patches.py).

3. SQS without quadratic costs. moto checks each received message's retention through
   GetQueueAttributes, which counts every message of the queue (three times), and each sent
   message reads the same attributes: with a backlog of a few hundred jobs a ReceiveMessage took
   a third of a second, all of it under the local stack's one global lock. The retention check
   reads the one attribute it needs, and a message's visibility is computed from `time.time()`
   instead of through naive datetimes (the counts remain, at a fraction of the cost).

6. SQS refuses the characters XML does not allow. A message body may contain only
   `#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF`; SendMessage
   answers anything else with `InvalidMessageContents` (SendMessage API reference, "MessageBody",
   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html;
   for a while those pages said SQS replaced such characters with U+FFFD, the current ones say it
   refuses them, as LocalStack's AWS-validated `test_send_message_with_invalid_payload_characters`
   found). moto checked no character at all. In a SendMessageBatch AWS refuses only the entry: it
   comes back in `Failed` with code `InvalidMessageContents` and SenderFault, and the batch's other
   entries are sent (SendMessageBatch API reference: "The result of sending each message is
   reported individually", and its error list has no InvalidMessageContents,
   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html;
   LocalStack's AWS-validated `test_batch_send_with_invalid_char_should_succeed` sends nine good
   bodies and one U+0001 and gets nine sent and that one Failed with this code). A String message
   attribute's value is held to the same characters and refused with `InvalidParameterValue`, as
   AWS does (LocalStack's AWS-validated
   `test_invalid_string_attributes_cause_invalid_parameter_value_error`); in a batch, per entry.

7. SQS sizes in bytes, at 256 KiB. A message's size is the UTF-8 bytes of its body and of its
   attributes' names, types and values (Amazon SQS message quotas,
   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html);
   moto counted the body's characters. AWS raised its limit from 256 KiB to 1 MiB in August 2025
   (a queue's `MaximumMessageSize` is its own limit), but our dispatch is built for the 256 KiB
   that queues had until then, so here new queues get `MaximumMessageSize` 262,144 (one may still
   be set up to 1 MiB); a message over its queue's limit is refused with `InvalidParameterValue`,
   and a SendMessageBatch whose entries together exceed 262,144 bytes with
   `AWS.SimpleQueueService.BatchRequestTooLong` (stricter than today's AWS, which takes 1 MiB).
   More than 10 entries stays moto's `AWS.SimpleQueueService.TooManyEntriesInBatchRequest`, as on
   AWS (SendMessageBatch API reference).
"""

import base64
import binascii
import re
import time
from typing import Any

from moto.core.responses import ActionResult
from moto.sqs.exceptions import (
    BatchEntryIdsNotDistinct,
    EmptyBatchRequest,
    InvalidBatchEntryId,
    InvalidParameterValue,
    SQSException,
    TooManyEntriesInBatchRequest,
)
from moto.sqs.models import Message, SQSBackend
from moto.sqs.responses import SQSResponse
from moto.sqs.utils import validate_message_attributes

# The limit of every SQS queue made before August 2025 (AWS now allows up to 1 MiB).
SQS_MESSAGE_MAX_BYTES = 256 * 1024
# Anything but #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
SQS_REFUSED_CHARACTER = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def is_message_valid_based_on_retention_period(
    self: SQSBackend, queue_name: str, message: Message
) -> bool:
    retention_period = int(self.get_queue(queue_name).message_retention_period)
    return retention_period + message.sent_timestamp / 1000 > time.time()


def _visible(message: Message) -> bool:
    return time.time() * 1000 > message.visible_at


def _delayed(message: Message) -> bool:
    return time.time() * 1000 < message.delayed_until


def _invalid_message_contents() -> SQSException:
    # An SQSException itself, not a subclass: moto finds an error's service by its class's module.
    return SQSException(
        "InvalidMessageContents",
        "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to "
        "#xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
    )


def _refused_attribute(attributes: dict[str, Any]) -> str | None:
    """The name of a String message attribute whose value SQS refuses, if any."""
    for name, value in (attributes or {}).items():
        text = value.get("StringValue") if isinstance(value, dict) else None
        if isinstance(text, str) and SQS_REFUSED_CHARACTER.search(text):
            return name
    return None


def _invalid_attribute(name: str) -> InvalidParameterValue:
    return InvalidParameterValue(
        f"Message (user) attribute '{name}' has a value with characters that are not allowed. "
        "Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | "
        "#x10000 to #x10FFFF"
    )


def _encoded_size(value: Any) -> int:
    if isinstance(value, bytes):
        return len(value)
    return len(str(value).encode("utf-8", "surrogatepass"))


def _message_size(body: Any, attributes: dict[str, Any] | None) -> int:
    """A message's size as SQS counts it: its body and its attributes' names, types and values."""
    size = _encoded_size(body or "")
    for name, value in (attributes or {}).items():
        size += _encoded_size(name)
        if not isinstance(value, dict):
            continue
        size += _encoded_size(value.get("DataType", ""))
        if value.get("StringValue") is not None:
            size += _encoded_size(value["StringValue"])
        binary = value.get("BinaryValue")
        if isinstance(binary, str):
            try:
                binary = base64.b64decode(binary, validate=True)
            except (binascii.Error, ValueError):
                pass
        if binary is not None:
            size += _encoded_size(binary)
    return size


def _too_long(limit: int) -> InvalidParameterValue:
    return InvalidParameterValue(
        f"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."
    )


_stock_send_message = SQSResponse.send_message


def send_message(self: SQSResponse) -> ActionResult:
    """moto's `SQSResponse.send_message`, refusing the characters and sizes AWS refuses."""
    body = self._get_param("MessageBody")
    attributes = self._get_param("MessageAttributes", {})
    if isinstance(body, str) and SQS_REFUSED_CHARACTER.search(body):
        raise _invalid_message_contents()
    refused = _refused_attribute(attributes)
    if refused is not None:
        raise _invalid_attribute(refused)
    queue = self.sqs_backend.get_queue(self._get_queue_name())
    limit = int(queue.maximum_message_size)  # type: ignore[arg-type]
    if _message_size(body, attributes) > limit:
        raise _too_long(limit)
    return _stock_send_message(self)


def send_message_batch(self: SQSResponse) -> ActionResult:
    """moto 5.2.5's `SQSResponse.send_message_batch`: an entry SQS refuses fails alone."""
    queue_name = self._get_queue_name()
    queue = self.sqs_backend.get_queue(queue_name)
    listed = self._get_param("Entries", [])
    if not listed:
        raise EmptyBatchRequest()
    # What refuses the whole request, checked on every entry before any is sent.
    if len(listed) > 10:
        raise TooManyEntriesInBatchRequest(len(listed))
    if any(not re.match(r"^[\w-]{1,80}$", str(entry.get("Id", ""))) for entry in listed):
        raise InvalidBatchEntryId()
    ids: set[str] = set()
    for entry in listed:
        if entry["Id"] in ids:
            raise BatchEntryIdsNotDistinct(entry["Id"])
        ids.add(entry["Id"])
    total = sum(_message_size(e.get("MessageBody"), e.get("MessageAttributes")) for e in listed)
    if total > SQS_MESSAGE_MAX_BYTES:
        raise SQSException(
            "BatchRequestTooLong",
            f"Batch requests cannot be longer than {SQS_MESSAGE_MAX_BYTES} bytes. "
            f"You have sent {total} bytes.",
        )

    entries: dict[str, dict[str, Any]] = {}
    failed: list[dict[str, Any]] = []
    limit = int(queue.maximum_message_size)  # type: ignore[arg-type]
    for idx, entry in enumerate(listed):
        if "MessageAttributes" in entry:
            validate_message_attributes(entry["MessageAttributes"])
        else:
            entry["MessageAttributes"] = {}
        if "DelaySeconds" not in entry:
            entry["DelaySeconds"] = None
        body = entry.get("MessageBody")
        refused = _refused_attribute(entry["MessageAttributes"])
        error: SQSException | None = None
        if isinstance(body, str) and SQS_REFUSED_CHARACTER.search(body):
            error = _invalid_message_contents()
        elif refused is not None:
            error = _invalid_attribute(refused)
        elif _message_size(body, entry["MessageAttributes"]) > limit:
            error = _too_long(limit)
        if error is not None:
            failed.append(
                {"Id": entry["Id"], "SenderFault": True, "Code": error.code, "Message": str(error)}
            )
        else:
            entries[str(idx)] = entry

    messages: list[Message] = []
    if entries:
        messages, backend_failed = self.sqs_backend.send_message_batch(queue_name, entries)
        failed.extend(backend_failed)

    resp: dict[str, Any] = {"Successful": [], "Failed": failed}
    for msg in messages:
        msg_dict = {
            "Id": msg.user_id,  # type: ignore[attr-defined]
            "MessageId": msg.id,
            "MD5OfMessageBody": msg.body_md5,
        }
        if len(msg.message_attributes) > 0:
            msg_dict["MD5OfMessageAttributes"] = msg.attribute_md5
        if queue.fifo_queue:
            msg_dict["SequenceNumber"] = msg.sequence_number
        resp["Successful"].append(msg_dict)
    return ActionResult(resp)
