"""The primary's database backend: Django's PostgreSQL backend whose per-request health check of a reused connection
(CONN_HEALTH_CHECKS) asks the connection's socket instead of the server. Django sends `SELECT 1` before a request's
first statement, a round trip that was one of a cached /find's two (bench/RESULTS.md, request_path); a server that
restarted or ended the session has sent its termination notice and closed the socket, which is then readable while
the connection is idle, so a check without the round trip finds it as well, and the request runs on a new
connection instead of failing."""

import select

from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    def close_if_health_check_failed(self):
        if self.pool or self.connection is None or not self.health_check_enabled or self.health_check_done:
            return
        if not self._idle_and_open():
            self.close()
        self.health_check_done = True

    def _idle_and_open(self) -> bool:
        """Whether the connection is open and nothing came from the server since its last answer: an idle session
        is sent nothing unasked (ovsite listens to no channel), so anything readable is the server's goodbye, or
        at worst a notice, after which a new connection costs only its own setup."""
        if self.connection.closed or self.connection.pgconn.status != pq.ConnStatus.OK:
            return False
        try:
            readable, _, _ = select.select([self.connection.pgconn.socket], [], [], 0)
        except (OSError, ValueError, base.Database.Error):
            return False
        return not readable
