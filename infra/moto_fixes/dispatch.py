"""The dispatcher's host-to-service lookup, memoised (patch 4 of moto_patches.py).

4. The host-to-service lookup of moto's dispatcher, memoised: it walks every moto module's URL
   patterns twice per request (about a millisecond, under the lock), though its answer for a
   host never changes.
"""

from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_stock_backend_for_host = DomainDispatcherApplication.get_backend_for_host


def get_backend_for_host(self: DomainDispatcherApplication, host: str | None) -> Any:
    known = self.__dict__.setdefault("_backend_by_host", {})
    if host not in known:
        known[host] = _stock_backend_for_host(self, host)
    return known[host]
