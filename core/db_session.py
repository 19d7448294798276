"""Session settings of the database connections a process opens, by the kind of process it is."""

import re

from django.conf import settings
from django.db import connections

_STATEMENT_TIMEOUT = re.compile(r"-c statement_timeout=\d+")


def session_options(*, statement_timeout_ms: int) -> str:
    """The connections' libpq `options` (settings.py) with this statement_timeout in place of the web's."""
    return _STATEMENT_TIMEOUT.sub(
        f"-c statement_timeout={int(statement_timeout_ms)}", settings.DATABASES["default"]["OPTIONS"]["options"]
    )


def use_statement_timeout(milliseconds: int) -> None:
    """PostgreSQL's statement_timeout for the connections this process opens from now on (0: no limit); the open
    ones are closed. Settings hold the web requests' value; a Celery worker and a management command call this as
    they start, before any query, so a connection pool (OVSITE_DB_POOL), made at the first, takes the new value."""
    settings.DATABASES["default"]["OPTIONS"]["options"] = session_options(statement_timeout_ms=milliseconds)
    connections.close_all()
