from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core import embedded_pg


class Command(BaseCommand):
    help = "Start, stop or report the embedded PostgreSQL server (data in EMBEDDED_PG_DATA)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["start", "stop", "status"])

    def handle(self, *args, action, **options):
        if not settings.EMBEDDED_PG_ENABLED:
            raise CommandError("DATABASE_URL is set: the embedded PostgreSQL is not used.")
        pgdata = Path(settings.EMBEDDED_PG_DATA)
        if action == "start":
            socket_dir = embedded_pg.start_configured(settings.DATABASES["default"]["NAME"])
            in_use = embedded_pg.shared_buffers_in_use(socket_dir)
            self.stdout.write(
                f"embedded PostgreSQL running: data {pgdata}, socket {socket_dir}, shared_buffers {in_use}"
            )
            wanted = embedded_pg.configured_shared_buffers()
            if _megabytes(in_use) != _megabytes(wanted):  # it was already running: the value applies at a start
                self.stdout.write(
                    f"shared_buffers {wanted} (OVSITE_PG_SHARED_BUFFERS) applies when the server "
                    "starts: `make pg-stop` first to use it"
                )
        elif action == "stop":
            stopped = embedded_pg.stop(pgdata)
            self.stdout.write("stopped" if stopped else "not running")
        else:
            self.stdout.write("running" if embedded_pg.is_running(pgdata) else "not running")


def _megabytes(size: str) -> float:
    """A PostgreSQL memory size in MB; a bare number counts 8 kB buffers, as shared_buffers does."""
    units = {"kB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 * 1024}
    for unit, factor in units.items():
        if size.endswith(unit):
            return float(size[: -len(unit)]) * factor
    return float(size) * 8 / 1024
