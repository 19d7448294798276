"""The database backend of the read replicas' aliases (their ENGINE, set by core.replicas.replica_databases): the
primary's backend (core/db_backend) whose cursors read the primary instead when the replica is lost under a read of
a replica-eligible scope (core.replicas.reads_primary_instead), on connecting or when a statement runs. A replica's
results are read whole as their statement runs (its alias disables server-side cursors), so no fetch of rows
reaches it afterwards."""

from django.db.backends.postgresql import base
from django.db.backends.utils import CursorWrapper
from django.db.utils import InterfaceError, OperationalError

from core import replicas
from core.db_backend import base as primary_base

CONNECTION_ERRORS = (OperationalError, InterfaceError)


class DatabaseWrapper(primary_base.DatabaseWrapper):
    """The primary's backend (its health check asks the socket, no `SELECT 1`), with the fallback below."""

    def cursor(self):
        try:
            return super().cursor()
        except CONNECTION_ERRORS as error:
            if not replicas.reads_primary_instead(self, error):
                raise
        return replicas.primary_cursor()

    def make_cursor(self, cursor):
        return ReplicaCursorWrapper(cursor, self)

    def make_debug_cursor(self, cursor):
        return ReplicaCursorDebugWrapper(cursor, self)


class ReadsPrimaryInstead:
    """A replica's cursor whose statement fails because the replica is lost runs it on the primary, and is the
    primary's cursor from then on (its rows, its description, its close). A replica is read-only: the failed
    statement changed nothing there, so it runs again as it is; nothing else the request did runs again."""

    def _execute_with_wrappers(self, sql, params, many, executor):
        try:
            return super()._execute_with_wrappers(sql, params, many, executor)
        except CONNECTION_ERRORS as error:
            if many or not replicas.reads_primary_instead(self.db, error):
                raise
        # Of the failed cursor's class: the server-binding one of a prepared read prepares on the primary too.
        self.cursor = replicas.primary_cursor(type(self.cursor))
        return self.cursor.execute(sql, params)


class ReplicaCursorWrapper(ReadsPrimaryInstead, CursorWrapper):
    pass


class ReplicaCursorDebugWrapper(ReadsPrimaryInstead, base.CursorDebugWrapper):
    pass
