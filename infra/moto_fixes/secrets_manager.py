"""Secrets Manager's limits on a secret's value and on a batch read, which moto 5.2.5 does not
enforce (listed after the numbered patches in moto_patches.py).
"""

from typing import Any

from moto.secretsmanager.exceptions import ValidationException as SecretsValidationException
from moto.secretsmanager.responses import SecretsManagerResponse

# Secrets Manager (AWS Secrets Manager API Reference, CreateSecret / PutSecretValue /
# UpdateSecret: "SecretString … Length Constraints: Maximum length of 65536"; BatchGetSecretValue:
# "SecretIdList … Array Members: Minimum number of 1 item. Maximum number of 20 items"). moto
# 5.2.5 takes a value of any size and a list of any length.
SECRET_STRING_MAX_CHARS = 65536
BATCH_GET_MAX_SECRETS = 20


def _secret_string_checked(stock: Any) -> Any:
    def checked(self: SecretsManagerResponse) -> str:
        value = self._get_param("SecretString")
        if isinstance(value, str) and len(value) > SECRET_STRING_MAX_CHARS:
            raise SecretsValidationException(
                "1 validation error detected: Value at 'secretString' failed to satisfy "
                f"constraint: Member must have length less than or equal to {SECRET_STRING_MAX_CHARS}"
            )
        return stock(self)

    checked.__doc__ = f"moto's `{stock.__name__}`, refusing a SecretString over 65,536 characters."
    return checked


_stock_batch_get_secret_value = SecretsManagerResponse.batch_get_secret_value


def batch_get_secret_value(self: SecretsManagerResponse) -> str:
    """moto's `batch_get_secret_value`, refusing more than 20 secret ids, as AWS does."""
    ids = self._get_param("SecretIdList", if_none=[])
    if len(ids) > BATCH_GET_MAX_SECRETS:
        raise SecretsValidationException(
            "1 validation error detected: Value at 'secretIdList' failed to satisfy constraint: "
            f"Member must have length less than or equal to {BATCH_GET_MAX_SECRETS}"
        )
    return _stock_batch_get_secret_value(self)
